-- The provider that took a step's message (a channel may have several in order, with failover):
-- recorded from the sender's SENT result, shown on the step.
ALTER TABLE recipient_steps ADD COLUMN provider text;
