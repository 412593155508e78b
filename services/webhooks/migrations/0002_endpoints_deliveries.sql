-- From now on only events some endpoint subscribes to are stored (see intake.ts).
-- The exact JSON body sent for an event, rendered once so that every attempt signs the same bytes.
ALTER TABLE events ADD COLUMN body text;
UPDATE events SET body = jsonb_build_object('type', type, 'timestamp', occurred_at, 'data', payload)::text WHERE body IS NULL;
ALTER TABLE events ALTER COLUMN body SET NOT NULL;

CREATE TABLE endpoints (
  id              uuid PRIMARY KEY,
  organization_id uuid NOT NULL,
  url             text NOT NULL,
  events          text[] NOT NULL CHECK (cardinality(events) > 0),
  description     text NOT NULL DEFAULT '',
  -- Set when the endpoint is disabled; no delivery is made or attempted while it is.
  disabled_at     timestamptz,
  disabled_reason text CHECK (disabled_reason IN ('manual', 'gone', 'failing')),
  -- Start of the current run of failed attempts (NULL after a success).
  failing_since   timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  CHECK ((disabled_at IS NULL) = (disabled_reason IS NULL))
);
CREATE INDEX endpoints_organization ON endpoints (organization_id, created_at);

-- Signing secrets. The current one has expires_at NULL; a rotated-out one keeps signing until expires_at.
-- Stored readable: HMAC signing needs the secret itself.
CREATE TABLE endpoint_secrets (
  id          uuid PRIMARY KEY,
  endpoint_id uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  secret      text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz
);
CREATE UNIQUE INDEX endpoint_secrets_current ON endpoint_secrets (endpoint_id) WHERE expires_at IS NULL;
CREATE INDEX endpoint_secrets_endpoint ON endpoint_secrets (endpoint_id, expires_at);

-- One delivery per (event, endpoint): a redelivered bus message finds the row and adds nothing.
-- The retry schedule lives here: `retry_index` is the position in the schedule, `next_attempt_at` when
-- the next attempt is due (while pending). A claimed delivery's next_attempt_at is pushed past the
-- send timeout (a lease), so a worker that dies mid-send leaves it due again, never lost.
CREATE TABLE deliveries (
  id              uuid PRIMARY KEY,
  event_id        text NOT NULL REFERENCES events (id),
  endpoint_id     uuid NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
  organization_id uuid NOT NULL,
  status          text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempt_count   integer NOT NULL DEFAULT 0,
  retry_index     integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz,
  -- Changes on every claim; an outcome is recorded only by the claim that still holds the delivery.
  claim_token     uuid,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (event_id, endpoint_id),
  CHECK ((status = 'pending') = (next_attempt_at IS NOT NULL))
);
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, id DESC);

CREATE TABLE attempts (
  delivery_id   uuid NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
  number        integer NOT NULL,
  started_at    timestamptz NOT NULL,
  duration_ms   integer NOT NULL,
  status_code   integer,
  response_body text NOT NULL DEFAULT '',
  error         text NOT NULL DEFAULT '',
  outcome       text NOT NULL CHECK (outcome IN ('delivered', 'retry', 'failed')),
  PRIMARY KEY (delivery_id, number)
);
