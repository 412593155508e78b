-- Customer respect (docs/customer-respect.md): the cooldown between two review requests to one person,
-- and whether recipients without consent are skipped. Existing organizations get the defaults of new ones.
ALTER TABLE organizations
  ADD COLUMN cooldown_days integer NOT NULL DEFAULT 30 CHECK (cooldown_days BETWEEN 0 AND 365),
  ADD COLUMN require_consent boolean NOT NULL DEFAULT false;
