-- Erasure requests per person (docs/customer-respect.md, "Erasure"): POST /api/v1/people/erase and the
-- admin and console routes. A row holds no identifier of the person: the evidence (lifecycle_actions)
-- names them by keyed hash under the same id.
CREATE TABLE person_erasures (
  id              uuid PRIMARY KEY,
  organization_id uuid NOT NULL,
  actor           text NOT NULL,
  status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done')),
  requested_at    timestamptz NOT NULL DEFAULT now(),
  done_at         timestamptz,
  CHECK ((status = 'done') = (done_at IS NOT NULL))
);
CREATE INDEX person_erasures_organization ON person_erasures (organization_id, requested_at);
