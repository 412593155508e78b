-- The send log: one row per step a sender handled, so a redelivered step is never sent twice.
-- state: `sending` while a provider call is (or may be) in flight, `retry` after a retryable failure
-- (the provider did not take the message), `done` once the outcome is known and recorded.
CREATE TABLE send_log (
  step_id text PRIMARY KEY,
  attempt_id text NOT NULL,
  channel text NOT NULL,
  organization_id text NOT NULL,
  state text NOT NULL CHECK (state IN ('sending', 'retry', 'done')),
  -- While `sending`: until when the holder may still be working; after it, the holder is presumed dead.
  lease_until timestamptz NOT NULL,
  attempts integer NOT NULL DEFAULT 1,
  outcome text,
  reason text,
  provider_message_id text,
  parts integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX send_log_provider_message ON send_log (provider_message_id) WHERE provider_message_id IS NOT NULL;

-- Steps given up on after their last delivery, with the message as it arrived, for inspection and replay.
CREATE TABLE dead_letters (
  id bigserial PRIMARY KEY,
  step_id text NOT NULL,
  attempt_id text NOT NULL,
  channel text NOT NULL,
  reason text NOT NULL,
  deliveries integer NOT NULL,
  step bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_letters_step ON dead_letters (step_id);
