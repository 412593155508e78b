-- Costs that do not grow with history (issue 35). GET /cascades/{id} scanned every step ever made
-- (it asked recipient_steps by cascade_id, which no index covers) and each of the console overview's
-- queries scanned every review request of every organization. Invariant: every query the API and the
-- console run reaches a history table through an index (test/historyPlans.test.ts checks it).

-- GET /cascades/{id} reads its steps through its recipients (readCascade.ts), with no index on
-- recipient_steps (cascade_id): that would cost intake a third index entry per step.
-- The console overview and the review requests of a range: an organization's requests by when made.
CREATE INDEX review_requests_org_created ON review_requests (organization_id, created_at);
-- The outbox purge (published rows older than the relay's retention, in chunks of 5 000) found them
-- by scanning the whole outbox once a minute; by when they were published it reads only those.
CREATE INDEX outbox_published ON outbox (published_at) WHERE published_at IS NOT NULL;

-- Data lifecycle (docs/customer-respect.md, "Data lifecycle"). Personal data of recipients finished
-- longer ago than the organization's `personal_data_retention_days` is anonymized in place by the
-- retention rounds (retention.ts); an erasure does the same at once for one person (personErasure.ts).
ALTER TABLE organization_settings ADD COLUMN personal_data_retention_days integer NOT NULL DEFAULT 365
  CHECK (personal_data_retention_days BETWEEN 30 AND 3650);
-- When a recipient's personal data was anonymized (NULL: still held).
ALTER TABLE recipients ADD COLUMN anonymized_at timestamptz;
-- The retention rounds' queue: finished recipients still holding personal data, per organization,
-- oldest first. An anonymized recipient leaves it, so it holds at most one retention period.
CREATE INDEX recipients_to_retain ON recipients (organization_id, finished_at) WHERE anonymized_at IS NULL AND finished_at IS NOT NULL;
-- A review request made without a cascade (POST /review-requests) holds its own name and contact.
ALTER TABLE review_requests ADD COLUMN anonymized_at timestamptz;
-- The claimed bot link codes of a review request, emptied with it.
CREATE INDEX bot_link_codes_of_request ON bot_link_codes (review_request_id);
CREATE INDEX review_requests_to_retain ON review_requests (organization_id, created_at) WHERE anonymized_at IS NULL AND recipient_id IS NULL;

-- Organizations whose opt-out ledger holds keyed hashes: only their opt-out checks hash the addresses
-- they look up (an HMAC costs ~2 µs an address, on intake's and the dispatcher's path).
CREATE TABLE hashed_ledger_organizations (
  organization_id  uuid PRIMARY KEY
);

-- The evidence of erasures and retention (exported by the admin API): what was done, to whom (the
-- keyed hash of the person's identifiers, never the identifiers), when and by whom. Holds no personal data.
CREATE TABLE lifecycle_actions (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  organization_id  uuid NOT NULL,
  -- erasure | retention
  kind             text NOT NULL CHECK (kind IN ('erasure', 'retention')),
  -- The erasure request's id ('' for retention).
  request_id       text NOT NULL DEFAULT '',
  -- Keyed hashes of the erased person's addresses and external id; empty for retention.
  subject_hashes   text[] NOT NULL DEFAULT '{}',
  -- Who asked: `api:<key id>`, `member:<id>`, `admin`, or `retention`.
  actor            text NOT NULL,
  -- Rows anonymized or deleted, by table.
  counts           jsonb NOT NULL,
  at               timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX lifecycle_actions_of_organization ON lifecycle_actions (organization_id, at);

-- step_results dedupes a sender's redelivered result (docs/cascades.md); past the redelivery window
-- (STEP_RESULTS_KEEP_DAYS) a row can no longer matter and is pruned, oldest first, by when received.
CREATE INDEX step_results_received ON step_results (received_at);
