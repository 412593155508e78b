-- The account console's people (docs/console.md): members of an organization, their sessions and the
-- invitations that bring them in. Secrets (passwords, session and invitation tokens) are stored as
-- hashes only: argon2id for passwords, SHA-256 for the random tokens.
CREATE TABLE members (
  id              uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id),
  email           text NOT NULL,
  name            text NOT NULL DEFAULT '',
  role            text NOT NULL CHECK (role IN ('owner', 'admin', 'viewer')),
  password_hash   text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
-- One person signs in with one email: an email belongs to one organization.
CREATE UNIQUE INDEX members_email ON members (lower(email));
CREATE INDEX members_org ON members (organization_id, created_at);

CREATE TABLE member_sessions (
  id              uuid PRIMARY KEY,
  member_id       uuid NOT NULL REFERENCES members (id) ON DELETE CASCADE,
  organization_id uuid NOT NULL,
  token_hash      bytea NOT NULL UNIQUE,
  csrf_token      text NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  last_seen_at    timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL,
  ended_at        timestamptz
);
CREATE INDEX member_sessions_member ON member_sessions (member_id);

CREATE TABLE member_invitations (
  id              uuid PRIMARY KEY,
  organization_id uuid NOT NULL REFERENCES organizations (id),
  email           text NOT NULL,
  role            text NOT NULL CHECK (role IN ('owner', 'admin', 'viewer')),
  token_hash      bytea NOT NULL UNIQUE,
  invited_by      uuid,
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL,
  accepted_at     timestamptz
);
CREATE INDEX member_invitations_org ON member_invitations (organization_id, created_at);

-- A password reset: a one-time link the operator (or, later, the reset email) hands to the member.
CREATE TABLE member_password_resets (
  id              uuid PRIMARY KEY,
  member_id       uuid NOT NULL REFERENCES members (id) ON DELETE CASCADE,
  token_hash      bytea NOT NULL UNIQUE,
  created_at      timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL,
  used_at         timestamptz
);
