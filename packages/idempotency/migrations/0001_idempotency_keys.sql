-- Saved responses of POST requests sent with an Idempotency-Key, written in the same transaction as
-- the effect they record. Scoped to the organization; expired rows are purged.
CREATE TABLE idempotency_keys (
  organization_id uuid NOT NULL,
  key             text NOT NULL,
  fingerprint     text NOT NULL,
  response        bytea NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL,
  PRIMARY KEY (organization_id, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
