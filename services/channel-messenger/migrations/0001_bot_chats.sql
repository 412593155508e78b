-- The chats of the official bots linked to a contact (docs/channels.md "Official bots"): a person who
-- followed a thank-you page's deep link, per organization and phone. A linked contact's MAX/TELEGRAM
-- steps go through the bot. Unlinking (`/stop`, the bot blocked) keeps the row with `unlinked_at`:
-- the evidence of when and why sending there ended.
CREATE TABLE bot_chats (
  channel          text NOT NULL,
  organization_id  uuid NOT NULL,
  -- E.164.
  phone            text NOT NULL,
  -- What the bot sends to: Telegram's chat id, MAX's user id.
  chat_id          text NOT NULL,
  recipient_id     uuid,
  -- ru | en: the organization's, for the bot's replies.
  locale           text NOT NULL DEFAULT 'en',
  linked_at        timestamptz NOT NULL DEFAULT now(),
  unlinked_at      timestamptz,
  -- stop_command | bot_blocked
  unlink_reason    text,
  PRIMARY KEY (channel, organization_id, phone)
);

CREATE INDEX bot_chats_by_chat ON bot_chats (channel, chat_id) WHERE unlinked_at IS NULL;
