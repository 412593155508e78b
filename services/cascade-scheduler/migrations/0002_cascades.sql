-- Cascades: recipients put into a flow (or a one-step channel send). Location name, review links,
-- templates and locale are snapshotted at start, so a running cascade never calls the directory to
-- render a step.
CREATE TABLE cascades (
  id                 uuid PRIMARY KEY,
  organization_id    uuid NOT NULL,
  location_id        text NOT NULL,
  name               text NOT NULL DEFAULT '',
  flow_id            uuid,
  channel            text,
  external_id        text,
  -- running | finished | canceled
  status             text NOT NULL,
  locale             text NOT NULL DEFAULT 'en',
  templates          jsonb NOT NULL DEFAULT '{}',
  flow_steps         jsonb NOT NULL DEFAULT '[]',
  recipients_total   integer NOT NULL,
  skipped            integer NOT NULL DEFAULT 0,
  -- Recipients not finished yet; the cascade finishes when it reaches 0.
  active_recipients  integer NOT NULL,
  created_at         timestamptz NOT NULL DEFAULT now(),
  finished_at        timestamptz
);
CREATE INDEX cascades_org ON cascades (organization_id, created_at DESC);

CREATE TABLE recipients (
  id                   uuid PRIMARY KEY,
  cascade_id           uuid NOT NULL REFERENCES cascades (id) ON DELETE CASCADE,
  organization_id      uuid NOT NULL,
  position             integer NOT NULL,
  name                 text NOT NULL DEFAULT '',
  email                text NOT NULL DEFAULT '',
  phone                text NOT NULL DEFAULT '',
  contact_id           text NOT NULL DEFAULT '',
  contact_external_id  text NOT NULL DEFAULT '',
  -- running | finished
  status               text NOT NULL,
  finish_reason        text CHECK (finish_reason IN ('rated', 'exhausted', 'unreachable', 'unsubscribed', 'canceled')),
  last_sent_at         timestamptz,
  rating               integer CHECK (rating BETWEEN 1 AND 5),
  rated_at             timestamptz,
  feedback             text,
  finished_at          timestamptz,
  review_request_id    uuid NOT NULL
);
CREATE INDEX recipients_cascade ON recipients (cascade_id, position);

-- One row per flow step per recipient, created with the recipient. At most one step of a recipient is
-- scheduled or dispatched at a time; the others are pending or done.
CREATE TABLE recipient_steps (
  id               uuid PRIMARY KEY,
  recipient_id     uuid NOT NULL REFERENCES recipients (id) ON DELETE CASCADE,
  cascade_id       uuid NOT NULL,
  organization_id  uuid NOT NULL,
  step_order       integer NOT NULL,
  channel          text NOT NULL,
  delay_minutes    integer NOT NULL,
  -- pending | scheduled | dispatched | sent | failed | skipped | canceled
  status           text NOT NULL,
  -- The channel the message goes through (differs from channel after a reroute).
  sent_channel     text NOT NULL,
  attempt          integer NOT NULL DEFAULT 0,
  due_at           timestamptz,
  dispatched_at    timestamptz,
  sent_at          timestamptz,
  skipped_at       timestamptz,
  delivered_at     timestamptz,
  reason           text,
  reroutes         jsonb NOT NULL DEFAULT '[]',
  UNIQUE (recipient_id, step_order)
);
-- The dispatcher's timer wheel: only scheduled steps are indexed, so a million future steps cost one
-- index range scan per claim.
CREATE INDEX recipient_steps_due ON recipient_steps (due_at) WHERE status = 'scheduled';

-- Personal review links: one per cascade recipient, or created alone by POST /review-requests.
CREATE TABLE review_requests (
  id                   uuid PRIMARY KEY,
  organization_id      uuid NOT NULL,
  token                text NOT NULL UNIQUE,
  location_id          text NOT NULL,
  recipient_id         uuid,
  customer_name        text NOT NULL DEFAULT '',
  contact              text NOT NULL DEFAULT '',
  -- created | opened | rated | feedback
  status               text NOT NULL DEFAULT 'created',
  opened_at            timestamptz,
  rated_at             timestamptz,
  feedback_at          timestamptz,
  public_links_shown_at timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now()
);

-- One rating per review request: the primary key is what makes a second submit a no-op.
CREATE TABLE ratings (
  review_request_id  uuid PRIMARY KEY REFERENCES review_requests (id) ON DELETE CASCADE,
  organization_id    uuid NOT NULL,
  rating             integer NOT NULL CHECK (rating BETWEEN 1 AND 5),
  created_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE feedback (
  review_request_id  uuid PRIMARY KEY REFERENCES review_requests (id) ON DELETE CASCADE,
  organization_id    uuid NOT NULL,
  text               text NOT NULL,
  created_at         timestamptz NOT NULL DEFAULT now()
);

-- Latest known location data (name, review links), refreshed at each start; read by the review form.
CREATE TABLE location_snapshots (
  organization_id  uuid NOT NULL,
  location_id      text NOT NULL,
  name             text NOT NULL,
  address          text NOT NULL DEFAULT '',
  city             text NOT NULL DEFAULT '',
  review_links     jsonb NOT NULL DEFAULT '[]',
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, location_id)
);

CREATE TABLE organization_settings (
  organization_id       uuid PRIMARY KEY,
  name                  text NOT NULL DEFAULT '',
  locale                text NOT NULL DEFAULT 'en',
  low_rating_threshold  integer NOT NULL DEFAULT 3 CHECK (low_rating_threshold BETWEEN 0 AND 5),
  updated_at            timestamptz NOT NULL DEFAULT now()
);

-- A contact's opt-out of a channel for one organization, keyed by the address (lower-case email or
-- E.164 phone).
CREATE TABLE opt_outs (
  organization_id  uuid NOT NULL,
  channel          text NOT NULL,
  address          text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, channel, address)
);

-- Transactional outbox: events written in the transaction of the change they report, relayed to the
-- bus with msg_id as Nats-Msg-Id, so relaying a row twice is dropped by the stream.
CREATE TABLE outbox (
  id            bigserial PRIMARY KEY,
  msg_id        text NOT NULL UNIQUE,
  subject       text NOT NULL,
  payload       bytea NOT NULL,
  -- A recipient's finish event waits while the low-rating feedback form may still be answered, so the
  -- event carries the feedback; submitting it makes the row available at once.
  recipient_id  uuid,
  available_at  timestamptz NOT NULL DEFAULT now(),
  created_at    timestamptz NOT NULL DEFAULT now(),
  published_at  timestamptz
);
CREATE INDEX outbox_unpublished ON outbox (available_at, id) WHERE published_at IS NULL;
CREATE INDEX outbox_recipient ON outbox (recipient_id) WHERE published_at IS NULL AND recipient_id IS NOT NULL;
