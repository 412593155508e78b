-- Locations, contacts, templates, channel configuration and the SMS balance ledger.

ALTER TABLE locations ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();

-- Contacts without an externalId are never deduplicated (the unique constraint ignores NULLs).
ALTER TABLE contacts ADD CONSTRAINT contacts_attributes_object CHECK (jsonb_typeof(attributes) = 'object');
CREATE INDEX contacts_organization ON contacts (organization_id, created_at);

-- An organization's own template for a channel; a channel without a row uses the default of the
-- organization's locale.
CREATE TABLE message_templates (
  organization_id uuid NOT NULL REFERENCES organizations (id),
  channel         text NOT NULL CHECK (channel ~ '^[A-Z][A-Z0-9_]*$'),
  subject         text NOT NULL DEFAULT '',
  body            text NOT NULL,
  updated_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, channel)
);

-- Which channels an organization has set up. A channel without a row is not configured.
CREATE TABLE channel_configurations (
  organization_id uuid NOT NULL REFERENCES organizations (id),
  channel         text NOT NULL CHECK (channel ~ '^[A-Z][A-Z0-9_]*$'),
  configured      boolean NOT NULL,
  updated_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, channel)
);

-- Every change of an SMS balance, so organizations.sms_balance = the sum of `delta` per organization.
-- A debit names the step it pays for; the unique step_id makes a repeated debit return the first
-- outcome. A refused debit (balance too low) is kept too, with delta 0, so a repeat gets the same
-- refusal and a step is never both rerouted and sent by SMS.
CREATE TABLE sms_ledger (
  id              uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id),
  kind            text NOT NULL CHECK (kind IN ('initial', 'credit', 'adjustment', 'debit')),
  step_id         text UNIQUE,
  parts           bigint NOT NULL CHECK (parts >= 0),
  delta           bigint NOT NULL,
  debited         boolean NOT NULL DEFAULT false,
  balance_after   bigint NOT NULL CHECK (balance_after >= 0),
  reason          text NOT NULL DEFAULT '',
  created_at      timestamptz NOT NULL DEFAULT now(),
  CHECK ((kind = 'debit') = (step_id IS NOT NULL))
);
CREATE INDEX sms_ledger_organization ON sms_ledger (organization_id, created_at);

-- Balances created before this ledger existed get their opening entry.
INSERT INTO sms_ledger (id, organization_id, kind, parts, delta, balance_after, reason)
SELECT gen_random_uuid(), id, 'initial', sms_balance, sms_balance, sms_balance, 'opening balance'
  FROM organizations WHERE sms_balance > 0;
