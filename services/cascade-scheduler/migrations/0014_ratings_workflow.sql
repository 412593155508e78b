-- The ratings inbox as a workflow, rating alerts, staff chats and daily digests (docs/console.md,
-- "The ratings inbox" and "Rating alerts").

-- A rating is an item of the workflow (`actionable_at`: when it became a low rating or got private
-- feedback), worked on by a member (`assigned_to`: in progress) and resolved with a note (the existing
-- `handled_at`/`handled_by` are the resolution). Its response target (`respond_by`) is the
-- organization's target counted in its working hours from `actionable_at`.
ALTER TABLE ratings ADD COLUMN actionable_at timestamptz;
ALTER TABLE ratings ADD COLUMN respond_by timestamptz;
ALTER TABLE ratings ADD COLUMN assigned_to text;
ALTER TABLE ratings ADD COLUMN resolution_note text;
-- The open items (overview counts, the overdue filter) by their target.
CREATE INDEX ratings_open_items ON ratings (organization_id, respond_by) WHERE actionable_at IS NOT NULL AND handled_at IS NULL;

-- Every change of a rating's life in the inbox, with who (a member id; '' for the service) and when.
CREATE TABLE rating_history (
  id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  review_request_id  uuid NOT NULL REFERENCES review_requests (id) ON DELETE CASCADE,
  organization_id    uuid NOT NULL,
  at                 timestamptz NOT NULL DEFAULT clock_timestamp(),
  member_id          text NOT NULL DEFAULT '',
  kind               text NOT NULL,
  text               text NOT NULL DEFAULT '',
  target             text NOT NULL DEFAULT '',
  -- A reply's id: asking for the same reply twice records (and sends) it once.
  reply_id           uuid UNIQUE
);
CREATE INDEX rating_history_of_rating ON rating_history (review_request_id, id);

-- Alerts of a rating, each sent once: `rating` (the low rating, with the feedback that came before it
-- went out) and `feedback` (feedback that came after the rating's alert went, or with a high rating).
CREATE TABLE rating_alerts (
  id                 uuid PRIMARY KEY,
  review_request_id  uuid NOT NULL REFERENCES review_requests (id) ON DELETE CASCADE,
  organization_id    uuid NOT NULL,
  kind               text NOT NULL CHECK (kind IN ('rating', 'feedback')),
  due_at             timestamptz NOT NULL,
  sent_at            timestamptz,
  -- Where it went: ["email:<address>", "TELEGRAM:<chat id>", …].
  sent_to            jsonb NOT NULL DEFAULT '[]',
  created_at         timestamptz NOT NULL DEFAULT now(),
  UNIQUE (review_request_id, kind)
);
CREATE INDEX rating_alerts_due ON rating_alerts (due_at) WHERE sent_at IS NULL;

-- The organization's alert and inbox settings.
ALTER TABLE organization_settings ADD COLUMN alert_threshold integer NOT NULL DEFAULT 3 CHECK (alert_threshold BETWEEN 0 AND 5);
ALTER TABLE organization_settings ADD COLUMN response_target_minutes integer NOT NULL DEFAULT 120 CHECK (response_target_minutes BETWEEN 1 AND 43200);
ALTER TABLE organization_settings ADD COLUMN work_start text NOT NULL DEFAULT '09:00';
ALTER TABLE organization_settings ADD COLUMN work_end text NOT NULL DEFAULT '21:00';
ALTER TABLE organization_settings ADD COLUMN work_days integer[] NOT NULL DEFAULT '{}';
ALTER TABLE organization_settings ADD COLUMN reply_to text NOT NULL DEFAULT '';
-- A location's own threshold; NULL = the organization's.
ALTER TABLE location_snapshots ADD COLUMN alert_threshold integer CHECK (alert_threshold BETWEEN 0 AND 5);

-- A member's own choice of email alerts; a member without a row has their role's default.
CREATE TABLE member_alerts (
  organization_id  uuid NOT NULL,
  member_id        text NOT NULL,
  email            text NOT NULL CHECK (email IN ('instant', 'digest', 'off')),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, member_id)
);

-- Daily digests sent: one per member and local day.
CREATE TABLE rating_digests (
  organization_id  uuid NOT NULL,
  member_id        text NOT NULL,
  day              date NOT NULL,
  sent_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (organization_id, member_id, day)
);

-- Staff chats: a member's link code (claimed by the bot's webhook like a customer's), and the chats
-- that get the organization's alerts through the official bots.
CREATE TABLE staff_link_codes (
  code             text PRIMARY KEY,
  organization_id  uuid NOT NULL,
  channel          text NOT NULL,
  member_id        text NOT NULL,
  created_at       timestamptz NOT NULL DEFAULT now(),
  expires_at       timestamptz NOT NULL,
  used_at          timestamptz,
  used_by_chat     text
);
CREATE TABLE staff_chats (
  organization_id  uuid NOT NULL,
  channel          text NOT NULL,
  chat_id          text NOT NULL,
  linked_by        text NOT NULL,
  linked_at        timestamptz NOT NULL DEFAULT now(),
  unlinked_at      timestamptz,
  PRIMARY KEY (organization_id, channel, chat_id)
);
CREATE INDEX staff_chats_of_chat ON staff_chats (channel, chat_id) WHERE unlinked_at IS NULL;
