-- The organizations' recipient budgets (docs/security.md, "Quotas count work"): one row per organization
-- and window (60 s, 86 400 s). A start takes its recipients from both rows in its own transaction, so
-- every entry point and every replica draws from the same budget, and a start that rolls back (refused,
-- failed, or a replay answered from its Idempotency-Key) has taken nothing. A window starts with its
-- first recipient and ends `window_seconds` later (fixed windows, as the RateLimit fields announce them).
CREATE TABLE recipient_budgets (
  organization_id uuid NOT NULL,
  window_seconds integer NOT NULL CHECK (window_seconds > 0),
  window_start timestamptz NOT NULL,
  used integer NOT NULL CHECK (used >= 0),
  PRIMARY KEY (organization_id, window_seconds)
);
