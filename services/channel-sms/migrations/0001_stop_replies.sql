-- The phone number each SMS step went to, so an inbound reply (a STOP) can be matched to the last SMS this
-- sender sent to that number (docs/channels.md, "STOP replies"). Written before the provider call; the send
-- log (same schema) says whether the message went out and through which provider.
CREATE TABLE sms_recipients (
  step_id text PRIMARY KEY,
  phone text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sms_recipients_phone ON sms_recipients (phone, created_at DESC);

-- How far each provider's inbox has been read (SMSC.ru `get_answers`: the last message id applied).
CREATE TABLE inbox_cursors (
  provider text PRIMARY KEY,
  last_id bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
