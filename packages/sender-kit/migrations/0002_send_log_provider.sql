-- Several providers per channel (docs/channels.md, "Providers in order, with failover").
-- provider: the one that took the message, reported again with a recorded outcome.
-- maybe_with: providers whose call for this step ended without proof they refused it (no answer in
-- time, a 5xx, a lost connection) and whose status lookup could not say: the step is never failed over
-- past them, and the next delivery asks them first.
ALTER TABLE send_log ADD COLUMN provider text;
ALTER TABLE send_log ADD COLUMN maybe_with text[] NOT NULL DEFAULT '{}';
