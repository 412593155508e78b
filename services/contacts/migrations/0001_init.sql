-- The directory. Every row belongs to one organization; every query filters by it.
CREATE TABLE organizations (
  id              uuid PRIMARY KEY,
  name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
  plan            text NOT NULL DEFAULT 'trial' CHECK (plan IN ('trial', 'standard', 'pro')),
  email_confirmed boolean NOT NULL DEFAULT false,
  sms_balance     bigint NOT NULL DEFAULT 0 CHECK (sms_balance >= 0),
  time_zone       text NOT NULL DEFAULT 'UTC',
  locale          text NOT NULL DEFAULT 'en' CHECK (locale IN ('en', 'ru')),
  default_region  text NOT NULL DEFAULT 'RU' CHECK (default_region ~ '^[A-Z]{2}$'),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);

-- Only a hash of each key is kept; prefix and last4 exist so people can tell keys apart.
CREATE TABLE api_keys (
  id              uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id),
  name            text NOT NULL DEFAULT '',
  key_hash        bytea NOT NULL UNIQUE,
  prefix          text NOT NULL,
  last4           text NOT NULL,
  scopes          text[] NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  revoked_at      timestamptz
);
CREATE INDEX api_keys_organization ON api_keys (organization_id);

CREATE TABLE locations (
  id              uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id),
  name            text NOT NULL,
  address         text NOT NULL DEFAULT '',
  city            text NOT NULL DEFAULT '',
  time_zone       text NOT NULL DEFAULT '',
  review_links    jsonb NOT NULL DEFAULT '[]',
  created_at      timestamptz NOT NULL DEFAULT now(),
  deleted_at      timestamptz
);
CREATE INDEX locations_organization ON locations (organization_id) WHERE deleted_at IS NULL;

-- externalId is the caller's deduplication key within its organization.
CREATE TABLE contacts (
  id              uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id),
  external_id     text,
  name            text,
  email           text,
  phone           text,
  location_id     uuid REFERENCES locations (id),
  consent_at      timestamptz,
  attributes      jsonb NOT NULL DEFAULT '{}',
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (organization_id, external_id)
);
