-- The last send time of a recipient is read from its steps (max sent_at); keeping a copy on the
-- recipient cost one more row update per applied result.
ALTER TABLE recipients DROP COLUMN last_sent_at;
