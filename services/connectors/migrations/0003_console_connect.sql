-- Connecting a CRM from the console (docs/connectors.md, "Connecting from the console").

-- The last time things worked (a deal processed, a write-back done, a reconciliation completed): a
-- connection error is cleared by it, and an older deal's failure is shown as past.
ALTER TABLE connectors ADD COLUMN last_success_at timestamptz;

-- amoCRM's OAuth consent: the one-time `state` sent to amoCRM's authorization page (its SHA-256 only),
-- bound to the organization and member that started it, with the connector's settings to create.
CREATE TABLE amocrm_oauth_states (
  state_hash       bytea PRIMARY KEY,
  organization_id  uuid NOT NULL,
  member_id        text NOT NULL,
  name             text NOT NULL,
  location_id      text NOT NULL,
  flow_id          text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  expires_at       timestamptz NOT NULL,
  used_at          timestamptz
);
