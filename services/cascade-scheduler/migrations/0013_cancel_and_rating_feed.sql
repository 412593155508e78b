-- Integrators reconcile and stop (docs/cascades.md, "Canceling" and "The ratings feed").

-- A canceled review link (a review request canceled through the API, or the link of a recipient its
-- cascade's cancel finished) shows "this request is no longer active" and accepts no rating.
ALTER TABLE review_requests ADD COLUMN canceled_at timestamptz;

-- The ratings feed. Each rating has a place in its organization's feed, given from the organization's
-- counter row in the transaction that records the rating (and again in the one that records its
-- feedback). The counter row stays locked until that transaction commits, so positions of one
-- organization are committed in their order: whoever sees a position sees every lower one, and a
-- reader resuming after the last position it saw misses nothing.
CREATE TABLE rating_feed_counters (
  organization_id  uuid PRIMARY KEY,
  last_position    bigint NOT NULL
);

ALTER TABLE ratings ADD COLUMN feed_position bigint;
UPDATE ratings ra SET feed_position = numbered.position
  FROM (SELECT review_request_id, row_number() OVER (PARTITION BY organization_id ORDER BY created_at, review_request_id) AS position FROM ratings) numbered
 WHERE numbered.review_request_id = ra.review_request_id;
INSERT INTO rating_feed_counters (organization_id, last_position)
  SELECT organization_id, max(feed_position) FROM ratings GROUP BY organization_id;
CREATE UNIQUE INDEX ratings_feed ON ratings (organization_id, feed_position);

-- The cascade list (GET /cascades, the console's) pages an organization's cascades by id, newest first.
CREATE INDEX cascades_org_id ON cascades (organization_id, id);
