-- The number each SMS went to is the send log's `address` (sender-kit migration 0003), recorded with
-- the outcome: an inbound reply (a STOP) is matched to the last SMS this sender sent to that number
-- (docs/channels.md, "STOP replies").

-- How far each provider's inbox has been read (SMSC.ru `get_answers`: the last message id applied).
CREATE TABLE inbox_cursors (
  provider text PRIMARY KEY,
  last_id bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
