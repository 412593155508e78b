-- Costs that do not grow with history (issue 35). Without these, GET /cascades/{id} scanned every
-- step ever made (recipient_steps had no index on cascade_id) and each of the console overview's
-- queries scanned every review request of every organization. Invariant: every query the API and the
-- console run reaches a history table through an index (test/historyPlans.test.ts checks it).

-- GET /cascades/{id}: the cascade's steps in the order the read wants them.
CREATE INDEX recipient_steps_cascade ON recipient_steps (cascade_id, recipient_id, step_order);
-- The console overview and the review requests of a range: an organization's requests by when made.
CREATE INDEX review_requests_org_created ON review_requests (organization_id, created_at);
-- The outbox purge (published rows older than the relay's retention, in chunks of 5 000) found them
-- by scanning the whole outbox once a minute; by when they were published it reads only those.
CREATE INDEX outbox_published ON outbox (published_at) WHERE published_at IS NOT NULL;
