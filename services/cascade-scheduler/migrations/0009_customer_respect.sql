-- Customer respect (docs/customer-respect.md).

-- The opt-out ledger: an address (lower-case email or E.164 phone) that receives nothing more from the
-- organization, on any channel. An opt-out suppresses every address known to belong to the person (a
-- recipient's email and phone together), so one row per address; `channel` and `source` say where it
-- came from. It replaces opt_outs, whose rows were email unsubscribes from the /u/ page.
CREATE TABLE suppressions (
  organization_id  uuid NOT NULL,
  address          text NOT NULL,
  channel          text NOT NULL DEFAULT '',
  source           text NOT NULL,
  recipient_id     uuid,
  note             text NOT NULL DEFAULT '',
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, address)
);

INSERT INTO suppressions (organization_id, address, channel, source, created_at)
  SELECT DISTINCT ON (organization_id, address) organization_id, address, channel, 'unsubscribe_page', created_at
    FROM opt_outs ORDER BY organization_id, address, created_at;

DROP TABLE opt_outs;

-- The cooldown ledger: when a review request last went out to an address of the organization, and
-- when the person behind it last rated. Both addresses of a recipient are written, so a later request
-- that knows only one of them still matches.
CREATE TABLE person_activity (
  organization_id  uuid NOT NULL,
  address          text NOT NULL,
  last_sent_at     timestamptz,
  last_rated_at    timestamptz,
  PRIMARY KEY (organization_id, address)
);

-- Consent as the request gave it (POST /cascades, channel sends, POST /contacts with startCascade).
ALTER TABLE recipients ADD COLUMN consent_at timestamptz;

-- Which public review links the rating page showed with the rating (public_links_shown_at says when).
ALTER TABLE review_requests ADD COLUMN public_links_shown jsonb;

-- Recipients skipped at intake for the cooldown or missing consent finish with those reasons. Every
-- existing row met the narrower check, so the new one needs no scan of the table (NOT VALID).
ALTER TABLE recipients DROP CONSTRAINT recipients_finish_reason_check;
ALTER TABLE recipients ADD CONSTRAINT recipients_finish_reason_check
  CHECK (finish_reason IN ('rated', 'exhausted', 'unreachable', 'unsubscribed', 'canceled', 'cooldown', 'no_consent')) NOT VALID;
