-- The address a message went to, for senders that must match what a person sends back to the last
-- message they got (an SMS "STOP" reply: docs/channels.md, "STOP replies"). Recorded with the outcome, in
-- the same statement; NULL for senders that don't ask for it, so only their rows are indexed.
ALTER TABLE send_log ADD COLUMN address text;
CREATE INDEX send_log_address ON send_log (address, updated_at DESC) WHERE address IS NOT NULL;
