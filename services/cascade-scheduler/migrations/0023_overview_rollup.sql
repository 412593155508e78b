-- The console's overview from pre-aggregated counters (issue 35; docs/operations.md, "Data lifecycle";
-- overviewRollup.ts). The overview counts the review requests made in a range; these tables hold its
-- figures per organization and quarter hour of the requests' creation (a "bucket", UTC), rolled up by
-- the housekeeping rounds for buckets older than a day, so a 30-day overview reads ~2 900 buckets
-- instead of every request, step and click in range. Whatever a bucket holds equals what the live
-- computation over its raw rows gives (the rule: overviewRollup.ts).

-- How far each organization is rolled up: every bucket before `rolled_through` has its rows below
-- (none when it had no request), unless a stale mark says a request of it changed since.
CREATE TABLE overview_rollup_horizons (
  organization_id  uuid PRIMARY KEY,
  rolled_through   timestamptz NOT NULL
);

-- The funnel: requests per stage, by location.
CREATE TABLE overview_funnel_rollup (
  organization_id  uuid NOT NULL,
  bucket           timestamptz NOT NULL,
  location_id      text NOT NULL,
  requests         integer NOT NULL,
  sent             integer NOT NULL,
  delivered        integer NOT NULL,
  opened           integer NOT NULL,
  rated            integer NOT NULL,
  shown            integer NOT NULL,
  clicked          integer NOT NULL,
  PRIMARY KEY (organization_id, bucket, location_id)
);

-- Steps by the channel that carried them, and the requests opened, rated and clicked credited to it.
CREATE TABLE overview_channel_rollup (
  organization_id  uuid NOT NULL,
  bucket           timestamptz NOT NULL,
  channel          text NOT NULL,
  sent             integer NOT NULL,
  delivered        integer NOT NULL,
  opened           integer NOT NULL,
  rated            integer NOT NULL,
  clicked          integer NOT NULL,
  PRIMARY KEY (organization_id, bucket, channel)
);

-- Ratings of the bucket's requests by the quarter hour they were given in (the overview groups them by
-- day in the organization's time zone, whose offset is a whole number of quarter hours) and value.
CREATE TABLE overview_rating_rollup (
  organization_id  uuid NOT NULL,
  bucket           timestamptz NOT NULL,
  rated_bucket     timestamptz NOT NULL,
  rating           integer NOT NULL,
  ratings          integer NOT NULL,
  PRIMARY KEY (organization_id, bucket, rated_bucket, rating)
);

-- A request of a rolled-up bucket changed (a step sent or delivered, the form opened, a rating, a
-- click) in the transaction that wrote the mark: the overview computes that bucket live until the next
-- round rolls it up again and deletes the marks it saw. Insert-only (no key), so a writer never waits
-- on another or on a round.
CREATE TABLE overview_stale_buckets (
  organization_id  uuid NOT NULL,
  bucket           timestamptz NOT NULL
);
CREATE INDEX overview_stale_buckets_of_organization ON overview_stale_buckets (organization_id, bucket);
