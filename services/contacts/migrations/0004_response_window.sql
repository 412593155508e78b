-- The response window (docs/cascades.md): minutes a recipient waits for a rating after its last step
-- went out, for one-channel sends and flows that set none. Every organization gets the default, so a
-- rating given after the last step is reported with the finish rather than as a late rating.
ALTER TABLE organizations ADD COLUMN response_window_minutes integer NOT NULL DEFAULT 4320
  CHECK (response_window_minutes BETWEEN 0 AND 525600);
