-- The result watchdog: a step dispatched long ago with no result is dispatched again (a new attempt) or
-- failed `no_result`. `result_timeouts` counts how often that happened to the step; the partial index
-- keeps the sweep to the (few) steps in flight.
ALTER TABLE recipient_steps ADD COLUMN result_timeouts integer NOT NULL DEFAULT 0;
CREATE INDEX recipient_steps_in_flight ON recipient_steps (dispatched_at) WHERE status = 'dispatched';
