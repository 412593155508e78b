-- Link codes of the official messenger bots (docs/channels.md "Official bots"): the thank-you page's
-- "get future requests in MAX / Telegram" deep link carries one. One open (unclaimed) code per review
-- request and channel; an expired one is replaced the next time the page asks, and a claimed one is
-- kept (the person's export lists it) while the page gets a new open one.
CREATE TABLE bot_link_codes (
  code               text PRIMARY KEY,
  review_request_id  uuid NOT NULL REFERENCES review_requests (id) ON DELETE CASCADE,
  channel            text NOT NULL,
  organization_id    uuid NOT NULL,
  -- E.164: who the code stands for; never put in the link itself.
  phone              text NOT NULL,
  recipient_id       uuid,
  created_at         timestamptz NOT NULL DEFAULT now(),
  expires_at         timestamptz NOT NULL,
  used_at            timestamptz,
  -- The chat that claimed it: the same chat claiming again (a retried webhook) gets the same answer.
  used_by_chat       text
);
CREATE UNIQUE INDEX bot_link_codes_open ON bot_link_codes (review_request_id, channel) WHERE used_at IS NULL;
