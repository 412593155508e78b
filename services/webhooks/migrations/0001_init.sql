-- Every integrator event received from the bus, once per event id (a redelivered message is a no-op).
CREATE TABLE events (
  id              text PRIMARY KEY,
  type            text NOT NULL,
  organization_id uuid NOT NULL,
  occurred_at     timestamptz NOT NULL,
  payload         jsonb NOT NULL,
  received_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX events_organization ON events (organization_id, occurred_at);
