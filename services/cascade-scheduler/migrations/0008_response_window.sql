-- The response window (docs/cascades.md). A flow may set its own (NULL = the organization's); a cascade
-- keeps the one it started with; a recipient whose last step went out waits (`status = 'waiting'`)
-- until `window_closes_at` for a rating before it finishes `exhausted`. Cascades started before this
-- release keep finishing when their last step goes out (0).
ALTER TABLE flows ADD COLUMN response_window_minutes integer CHECK (response_window_minutes BETWEEN 0 AND 525600);
ALTER TABLE cascades ADD COLUMN response_window_minutes integer NOT NULL DEFAULT 0;
ALTER TABLE recipients ADD COLUMN window_closes_at timestamptz;
-- The window closer's timer: only waiting recipients are indexed.
CREATE INDEX recipients_waiting ON recipients (window_closes_at) WHERE status = 'waiting';
