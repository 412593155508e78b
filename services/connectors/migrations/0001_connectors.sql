-- CRM connectors of organizations. Credentials are a secretBox-sealed JSON document (context
-- `connector:<id>:credentials`); the inbound secret is kept as its SHA-256 only.
CREATE TABLE connectors (
  id                  uuid PRIMARY KEY,
  organization_id     uuid NOT NULL,
  kind                text NOT NULL CHECK (kind IN ('amocrm', 'bitrix24')),
  name                text NOT NULL,
  enabled             boolean NOT NULL DEFAULT true,
  crm_url             text NOT NULL,
  auth_mode           text NOT NULL,
  credentials         text NOT NULL,
  -- Bumped by every write of the credentials, so a token refresh can tell whether another worker refreshed first.
  credentials_version integer NOT NULL DEFAULT 1,
  inbound_secret_hash bytea NOT NULL,
  -- wonStages, locationId, locationMapping, flowId, writeBack.
  settings            jsonb NOT NULL,
  active_since        timestamptz NOT NULL,
  -- Reconciliation lists won deals from here (in the CRM's clock), minus an overlap.
  sync_cursor         timestamptz NOT NULL,
  next_sync_at        timestamptz NOT NULL DEFAULT now(),
  last_sync_at        timestamptz,
  last_event_at       timestamptz,
  last_error          text,
  last_error_code     text,
  last_error_at       timestamptz,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX connectors_organization ON connectors (organization_id, created_at);
CREATE INDEX connectors_sync_due ON connectors (next_sync_at) WHERE enabled;

-- The durable inbox: every accepted CRM event (and every deal reconciliation found missing), stored
-- before the CRM is answered, processed by the inbox worker. Credentials the CRM sends along (Bitrix24's
-- `auth[...]`) are not kept.
CREATE TABLE crm_events (
  id              bigserial PRIMARY KEY,
  connector_id    uuid NOT NULL REFERENCES connectors (id) ON DELETE CASCADE,
  -- `webhook` | `reconcile`
  source          text NOT NULL,
  event           text NOT NULL,
  deal_id         text NOT NULL,
  payload         jsonb NOT NULL,
  -- pending | done | ignored | failed
  status          text NOT NULL DEFAULT 'pending',
  -- started | duplicate | not_won | won_before_connector | deal_not_found | deal_without_contact | no_location | refused:<code> | …
  outcome         text,
  cascade_id      text,
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error      text,
  received_at     timestamptz NOT NULL DEFAULT now(),
  processed_at    timestamptz
);
CREATE INDEX crm_events_due ON crm_events (next_attempt_at) WHERE status = 'pending';
CREATE INDEX crm_events_deal ON crm_events (connector_id, deal_id) WHERE status = 'pending';
CREATE INDEX crm_events_connector ON crm_events (connector_id, received_at);
CREATE INDEX crm_events_processed ON crm_events (processed_at) WHERE status <> 'pending';

-- One cascade per (deal, won stage): the guard that makes a CRM retry, a duplicate event or a
-- reconciliation start nothing twice, and the way back from a cascade to its deal.
CREATE TABLE deal_cascades (
  connector_id    uuid NOT NULL REFERENCES connectors (id) ON DELETE CASCADE,
  deal_id         text NOT NULL,
  won_key         text NOT NULL,
  organization_id uuid NOT NULL,
  cascade_id      text NOT NULL,
  contact_id      text NOT NULL,
  crm_contact_id  text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (connector_id, deal_id, won_key)
);
CREATE INDEX deal_cascades_cascade ON deal_cascades (cascade_id);

-- Write-back log: one row per integrator event (finished, rated late) of a connector's cascade, so a
-- redelivered event writes nothing twice. Each part is marked done as soon as the CRM accepted it.
CREATE TABLE write_backs (
  event_id        text PRIMARY KEY,
  connector_id    uuid NOT NULL REFERENCES connectors (id) ON DELETE CASCADE,
  deal_id         text NOT NULL,
  event_type      text NOT NULL,
  cascade_id      text NOT NULL,
  rating          integer,
  feedback        text NOT NULL,
  reason          text NOT NULL,
  occurred_at     timestamptz NOT NULL,
  note_done       boolean NOT NULL DEFAULT false,
  fields_done     boolean NOT NULL DEFAULT false,
  -- pending | done | failed
  status          text NOT NULL DEFAULT 'pending',
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error      text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  done_at         timestamptz
);
CREATE INDEX write_backs_due ON write_backs (next_attempt_at) WHERE status = 'pending';
CREATE INDEX write_backs_connector ON write_backs (connector_id, status);
