-- Operational rows that would otherwise grow for ever (issue 35, docs/operations.md "Data lifecycle"):
-- the retention rounds (retention.ts) prune them by these, oldest first, in small batches. A digest
-- row only says "today's digest went to this member" (one a member a day); a staff link code is dead
-- once expired.
CREATE INDEX rating_digests_day ON rating_digests (day);
CREATE INDEX staff_link_codes_expiry ON staff_link_codes (expires_at);
