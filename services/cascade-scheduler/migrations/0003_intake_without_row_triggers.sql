-- Intake writes ~2 500 rows per 500-recipient request in one statement; row-level foreign-key triggers
-- on recipients, steps and review links were a third of its cost. Those rows are only ever written
-- together by that one statement (and never deleted one by one), so the references are kept by
-- construction instead; ratings and feedback keep theirs (one row per rating).
ALTER TABLE recipients DROP CONSTRAINT recipients_cascade_id_fkey;
ALTER TABLE recipient_steps DROP CONSTRAINT recipient_steps_recipient_id_fkey;
