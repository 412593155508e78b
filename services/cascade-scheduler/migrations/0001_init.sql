-- Flows: an ordered list of channel steps with delays. One flow per organization may be the default.
CREATE TABLE flows (
  id              uuid PRIMARY KEY,
  organization_id uuid NOT NULL,
  name            text NOT NULL,
  is_default      boolean NOT NULL DEFAULT false,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX flows_one_default ON flows (organization_id) WHERE is_default;

CREATE TABLE flow_steps (
  flow_id         uuid NOT NULL REFERENCES flows (id) ON DELETE CASCADE,
  step_order      integer NOT NULL CHECK (step_order >= 1),
  channel         text NOT NULL CHECK (channel ~ '^[A-Z][A-Z0-9_]*$'),
  delay_minutes   integer NOT NULL CHECK (delay_minutes >= 0),
  PRIMARY KEY (flow_id, step_order)
);

-- Outcomes reported by senders, one row per step attempt and outcome: a redelivered result is a no-op.
CREATE TABLE step_results (
  attempt_id      text NOT NULL,
  outcome         text NOT NULL,
  step_id         text NOT NULL,
  channel         text NOT NULL,
  reason          text NOT NULL DEFAULT '',
  provider_message_id text NOT NULL DEFAULT '',
  received_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (attempt_id, outcome)
);
