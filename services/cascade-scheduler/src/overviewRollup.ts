import { counter, histogram, startHousekeepingRounds, type Logger, type Pool, type PoolClient } from '@rrs/runtime';

/*
 * The console's overview from counters rolled up per organization and quarter hour (docs/operations.md,
 * "Data lifecycle"; migration 0023). The overview counts the review requests *made* in a range, and a
 * request's figures keep changing after that day: steps sent and delivered days later, the form opened,
 * a rating or a click up to a month later. The rule that keeps the rolled-up figures equal to the live
 * computation over the raw rows:
 *
 * - A bucket is the quarter hour (UTC) a request was made in. Rounds roll up, per organization, the
 *   buckets that ended more than ROLLUP_AGE_HOURS ago (`overview_rollup_horizons.rolled_through`).
 *   Quarter hours, because every time zone's offset is a whole number of them: a day in any zone is a
 *   run of whole buckets, and so is the day a rating was given in.
 * - Every write that changes a figure of a request made more than MARK_AGE_HOURS ago (before its own
 *   transaction began) also writes, in that transaction, a stale mark for the request's bucket
 *   (`markStale`): step results (recipientStore's save: a step sent, delivered or rerouted), the form
 *   opened, a rating, a public link click. Nothing else changes a figure: erasure and retention
 *   anonymize names and addresses in place and keep every row the figures count.
 * - ROLLUP_AGE_HOURS − MARK_AGE_HOURS (an hour) is longer than any write transaction, so a change that
 *   commits after a round's snapshot was taken began less than an hour before it and is marked when
 *   its request is in a bucket that round could roll up. A change in the round's snapshot is in the
 *   counters.
 * - The overview reads the counters of the rolled-up buckets in range without a mark, and computes the
 *   rest live from the raw rows (the last day or so, marked buckets, and the range's edges when they
 *   are not whole buckets). A round re-rolls marked buckets in a REPEATABLE READ transaction and
 *   deletes the marks its snapshot saw: a mark committed after it stays for the next round.
 *
 * The live computation and the roll-up are the same statements (the *_FACTS below), grouped by bucket.
 */

export const BUCKET_MINUTES = 15;
export const BUCKET_MS = BUCKET_MINUTES * 60_000;
/** Buckets are rolled up once they ended this long ago. */
export const ROLLUP_AGE_HOURS = 25;
/** Changes to requests made longer ago than this are marked (see above: an hour less than ROLLUP_AGE_HOURS). */
export const MARK_AGE_HOURS = 24;
/** Rolled up per transaction: one day of an organization's buckets. */
const CHUNK_MS = 86_400_000;

/** The SQL of the bucket of a timestamp (buckets count from 2000-01-01 UTC, a multiple of BUCKET_MS since the epoch). */
export const bucketOf = (column: string): string => `date_bin(interval '${BUCKET_MINUTES} minutes', ${column}, timestamptz '2000-01-01 00:00:00+00')`;

/*
 * The live figures of organization $1's requests made in the parts [$2[i], $3[i]), by bucket. The steps
 * are looked up per request (LATERAL, by recipient_steps' (recipient_id, step_order) key): joined as a
 * set, the planner hash-joined every step the organization ever had. The live part is every request of
 * the last ROLLUP_AGE_HOURS, so its cost per request is what the overview costs: a click is recorded
 * only on a rated link (publicLinkClicks.ts), so only rated requests' clicks are looked up (the lookup
 * run for every request was ~40 % of the live computation, 40 000 requests: ~100 ms of a subplan over
 * an empty table).
 */
const REQUESTS = `SELECT rr.id, rr.recipient_id, rr.location_id, rr.opened_at, rr.rated_at, rr.public_links_shown_at, ${bucketOf('rr.created_at')} AS bucket,
                         CASE WHEN rr.rated_at IS NOT NULL THEN (SELECT min(c.clicked_at) FROM public_link_clicks c WHERE c.review_request_id = rr.id) END AS clicked_at
                    FROM unnest($2::timestamptz[], $3::timestamptz[]) AS part(from_at, to_at)
                    JOIN review_requests rr ON rr.organization_id = $1 AND rr.created_at >= part.from_at AND rr.created_at < part.to_at`;

/** The funnel: requests that reached each stage, by bucket and location. */
export const FUNNEL_FACTS = `WITH rr AS (${REQUESTS}),
      staged AS (
        SELECT rr.bucket, rr.location_id, rr.opened_at IS NOT NULL AS opened, rr.rated_at IS NOT NULL AS rated, rr.public_links_shown_at IS NOT NULL AS shown,
               rr.clicked_at IS NOT NULL AS clicked, coalesce(st.sent, false) AS sent, coalesce(st.delivered, false) AS delivered
          FROM rr LEFT JOIN LATERAL (SELECT bool_or(s.sent_at IS NOT NULL) AS sent, bool_or(s.delivered_at IS NOT NULL) AS delivered
                                       FROM recipient_steps s WHERE s.recipient_id = rr.recipient_id) st ON true)
 SELECT bucket, location_id, count(*)::int AS requests, count(*) FILTER (WHERE sent)::int AS sent, count(*) FILTER (WHERE delivered)::int AS delivered,
        count(*) FILTER (WHERE opened)::int AS opened, count(*) FILTER (WHERE rated)::int AS rated, count(*) FILTER (WHERE shown)::int AS shown,
        count(*) FILTER (WHERE clicked)::int AS clicked
   FROM staged GROUP BY bucket, location_id`;

/**
 * By bucket and channel: the steps it carried (sent, delivered) and the requests opened, rated and
 * clicked credited to it. The channel credited with an event is the one of the last step sent at or
 * before it. A step's `sent_at` is when its result was applied, which a backlog of results can put
 * after the customer already acted on the message: an event with no step recorded before it goes to
 * the first step sent. The steps carried are counted by the outer GROUP BY, one row a step: grouped per
 * request inside the LATERAL, a sort and an aggregate ran for every request (half the statement). The
 * LATERAL keeps `OFFSET 0` so it stays a lookup per request: without it PostgreSQL flattens it into a
 * join, and on a long history chose to merge-join every step ever sent (a day's roll-up at 5 M
 * recipients: ~10 s of reads instead of a fraction of a second).
 */
export const CHANNEL_FACTS = `WITH rr AS (${REQUESTS}),
      carried AS (
        SELECT rr.bucket, s.channel, s.sent, s.delivered, 0 AS opened, 0 AS rated, 0 AS clicked
          FROM rr CROSS JOIN LATERAL (SELECT s.sent_channel AS channel, 1 AS sent, (s.delivered_at IS NOT NULL)::int AS delivered
                                        FROM recipient_steps s WHERE s.recipient_id = rr.recipient_id AND s.sent_at IS NOT NULL OFFSET 0) s),
      happened AS (
        SELECT bucket, recipient_id, 'opened' AS kind, opened_at AS at FROM rr WHERE opened_at IS NOT NULL
        UNION ALL SELECT bucket, recipient_id, 'rated', rated_at FROM rr WHERE rated_at IS NOT NULL
        UNION ALL SELECT bucket, recipient_id, 'clicked', clicked_at FROM rr WHERE clicked_at IS NOT NULL),
      credited AS (
        SELECT h.bucket, last_step.sent_channel AS channel, 0 AS sent, 0 AS delivered,
               (h.kind = 'opened')::int AS opened, (h.kind = 'rated')::int AS rated, (h.kind = 'clicked')::int AS clicked
          FROM happened h
          CROSS JOIN LATERAL (SELECT s.sent_channel FROM recipient_steps s WHERE s.recipient_id = h.recipient_id AND s.sent_at IS NOT NULL
                              ORDER BY s.sent_at <= h.at DESC, CASE WHEN s.sent_at <= h.at THEN s.sent_at END DESC, s.sent_at LIMIT 1) last_step)
 SELECT bucket, channel, sum(sent)::int AS sent, sum(delivered)::int AS delivered, sum(opened)::int AS opened, sum(rated)::int AS rated, sum(clicked)::int AS clicked
   FROM (SELECT * FROM carried UNION ALL SELECT * FROM credited) c GROUP BY bucket, channel`;

/**
 * The requests' ratings by bucket, the quarter hour they were given in, and value. A rating is written
 * with its request's `rated_at` in one transaction (ratings.ts), so only rated requests are looked up,
 * each by the ratings' key (OFFSET 0 keeps it a lookup: as a join, the planner, expecting a tenth of
 * the organization's requests in any range, hash-joined the whole ratings table — 1 M rows at 5 M
 * recipients, in parallel workers beside the overview's other statements).
 */
export const RATING_FACTS = `WITH rr AS (${REQUESTS})
 SELECT rr.bucket, ${bucketOf('ra.created_at')} AS rated_bucket, ra.rating, count(*)::int AS ratings
   FROM rr CROSS JOIN LATERAL (SELECT ra.created_at, ra.rating FROM ratings ra WHERE ra.review_request_id = rr.id OFFSET 0) ra
  WHERE rr.rated_at IS NOT NULL GROUP BY 1, 2, 3`;

/**
 * Marks the buckets of the review requests `ids` stale when they were made more than MARK_AGE_HOURS
 * before this transaction began (the rule above). Call it in the transaction of the change.
 */
export async function markStale(client: Pool | PoolClient, ids: string[]): Promise<void> {
  if (ids.length > 0) await client.query(markStaleStatement(ids));
}
/** markStale's statement, for a caller that sends it its own way (a coalesced transaction). */
export const markStaleStatement = (ids: string[]): { text: string; values: unknown[] } => ({ text: MARK_STALE, values: [ids] });
const MARK_STALE = `INSERT INTO overview_stale_buckets (organization_id, bucket)
  SELECT DISTINCT rr.organization_id, ${bucketOf('rr.created_at')} FROM review_requests rr
   WHERE rr.id = ANY($1::uuid[]) AND rr.created_at < now() - interval '${MARK_AGE_HOURS} hours'`;
/** The same for one request, as a CTE-able statement over a `changed (id)` relation of the caller's statement. */
export const markStaleOf = (changed: string): string => `INSERT INTO overview_stale_buckets (organization_id, bucket)
  SELECT rr.organization_id, ${bucketOf('rr.created_at')} FROM ${changed} ch JOIN review_requests rr ON rr.id = ch.id
   WHERE rr.created_at < now() - interval '${MARK_AGE_HOURS} hours'`;

const roundsRun = counter({ name: 'scheduler_overview_rollup_rounds_total', help: 'Overview roll-up rounds run.' });
const bucketsRolled = counter({ name: 'scheduler_overview_rollup_buckets_total', help: 'Overview buckets rolled up, by why.', labelNames: ['kind'] });
const roundSeconds = histogram({ name: 'scheduler_overview_rollup_round_seconds', help: 'Duration of one overview roll-up round.', buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30] });

export interface OverviewRollupOptions {
  pool: Pool;
  logger: Logger;
  /** Days of history rolled up per organization and round (default 31): a first round over years of history is spread over rounds. */
  daysPerRound?: number;
  /** Wait between rounds that found nothing more (default 10 minutes). */
  intervalMs?: number;
}

/** The parts [from, to) covering `buckets` (sorted), adjacent buckets merged. */
export function partsOfBuckets(buckets: number[]): { from: Date[]; to: Date[] } {
  const from: Date[] = [];
  const to: Date[] = [];
  for (const bucket of buckets) {
    if (to.length > 0 && to[to.length - 1].getTime() === bucket) to[to.length - 1] = new Date(bucket + BUCKET_MS);
    else {
      from.push(new Date(bucket));
      to.push(new Date(bucket + BUCKET_MS));
    }
  }
  return { from, to };
}

/** Writes the figures of organization `organizationId`'s requests made in `parts` into the roll-up tables. */
async function rollUp(client: PoolClient, organizationId: string, parts: { from: Date[]; to: Date[] }): Promise<void> {
  const params = [organizationId, parts.from, parts.to];
  await client.query(
    `INSERT INTO overview_funnel_rollup (organization_id, bucket, location_id, requests, sent, delivered, opened, rated, shown, clicked)
     SELECT $1, bucket, location_id, requests, sent, delivered, opened, rated, shown, clicked FROM (${FUNNEL_FACTS}) f`,
    params,
  );
  await client.query(
    `INSERT INTO overview_channel_rollup (organization_id, bucket, channel, sent, delivered, opened, rated, clicked)
     SELECT $1, bucket, channel, sent, delivered, opened, rated, clicked FROM (${CHANNEL_FACTS}) c`,
    params,
  );
  await client.query(
    `INSERT INTO overview_rating_rollup (organization_id, bucket, rated_bucket, rating, ratings)
     SELECT $1, bucket, rated_bucket, rating, ratings FROM (${RATING_FACTS}) r`,
    params,
  );
}

/**
 * One transaction of a round, in one snapshot (REPEATABLE READ): the marks deleted are exactly those
 * whose changes the counters written include. Only one round works on the counters at a time: a
 * session advisory lock taken before the snapshot begins (taken inside it, a round could start from a
 * snapshot older than the last one's commit); another replica's round skips.
 */
async function inSnapshot<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T | null> {
  const client = await pool.connect();
  let locked = false;
  try {
    locked = (await client.query<{ locked: boolean }>(`SELECT pg_try_advisory_lock(hashtext('overview_rollup')) AS locked`)).rows[0].locked;
    if (!locked) return null;
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    try {
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  } finally {
    // A connection that could not give the lock back is closed, which gives it back.
    const unlocked = !locked || (await client.query(`SELECT pg_advisory_unlock(hashtext('overview_rollup'))`).then(() => true, () => false));
    client.release(unlocked ? undefined : new Error('overview rollup lock not released'));
  }
}

/**
 * One roll-up round (the rule at the top): for each organization with review requests, re-rolls its
 * marked buckets, then rolls up at most `daysPerRound` days more, up to ROLLUP_AGE_HOURS ago.
 * Resolves whether more is due now.
 */
export async function overviewRollupRound(options: OverviewRollupOptions): Promise<{ rolled: number; restaled: number; organizations: number; more: boolean }> {
  const started = process.hrtime.bigint();
  const daysPerRound = options.daysPerRound ?? 31;
  let rolled = 0;
  let restaled = 0;
  let more = false;
  const organizations = await organizationsWithRequests(options.pool);
  for (const organizationId of organizations) {
    const stale = await inSnapshot(options.pool, async (client) => {
      const { rows } = await client.query<{ bucket: Date }>(
        `SELECT DISTINCT s.bucket FROM overview_stale_buckets s JOIN overview_rollup_horizons h ON h.organization_id = s.organization_id
          WHERE s.organization_id = $1 AND s.bucket < h.rolled_through ORDER BY s.bucket LIMIT 1000`,
        [organizationId],
      );
      const buckets = rows.map((row) => row.bucket);
      if (buckets.length === 0) return 0;
      for (const table of ['overview_funnel_rollup', 'overview_channel_rollup', 'overview_rating_rollup']) {
        await client.query(`DELETE FROM ${table} WHERE organization_id = $1 AND bucket = ANY($2::timestamptz[])`, [organizationId, buckets]);
      }
      await rollUp(client, organizationId, partsOfBuckets(buckets.map((bucket) => bucket.getTime())));
      await client.query('DELETE FROM overview_stale_buckets WHERE organization_id = $1 AND bucket = ANY($2::timestamptz[])', [organizationId, buckets]);
      return buckets.length;
    });
    if (stale === null) continue;
    restaled += stale;
    more ||= stale >= 1000;
    for (let day = 0; day < daysPerRound; day++) {
      const advanced = await inSnapshot(options.pool, async (client) => {
        const { rows } = await client.query<{ from_at: Date | null; target: Date }>(
          `SELECT coalesce((SELECT rolled_through FROM overview_rollup_horizons WHERE organization_id = $1),
                           (SELECT ${bucketOf('min(created_at)')} FROM review_requests WHERE organization_id = $1)) AS from_at,
                  ${bucketOf(`now() - interval '${ROLLUP_AGE_HOURS} hours'`)} AS target`,
          [organizationId],
        );
        const { from_at: from, target } = rows[0];
        if (from === null || from.getTime() >= target.getTime()) return null;
        const to = new Date(Math.min(from.getTime() + CHUNK_MS, target.getTime()));
        await rollUp(client, organizationId, { from: [from], to: [to] });
        // Marks of these buckets written before this snapshot are in the counters just written.
        await client.query('DELETE FROM overview_stale_buckets WHERE organization_id = $1 AND bucket >= $2 AND bucket < $3', [organizationId, from, to]);
        await client.query(
          `INSERT INTO overview_rollup_horizons (organization_id, rolled_through) VALUES ($1, $2)
           ON CONFLICT (organization_id) DO UPDATE SET rolled_through = excluded.rolled_through`,
          [organizationId, to],
        );
        return { buckets: (to.getTime() - from.getTime()) / BUCKET_MS, done: to.getTime() >= target.getTime() };
      });
      if (!advanced) break;
      rolled += advanced.buckets;
      if (advanced.done) break;
      if (day === daysPerRound - 1) more = true;
    }
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  roundsRun.inc();
  roundSeconds.observe(seconds);
  bucketsRolled.inc({ kind: 'new' }, rolled);
  bucketsRolled.inc({ kind: 'stale' }, restaled);
  options.logger.info({ rolled, restaled, organizations: organizations.length, more, ms: Math.round(seconds * 1000) }, 'overview rollup round');
  return { rolled, restaled, organizations: organizations.length, more };
}

/** Organizations with review requests: a skip scan of review_requests (organization_id, created_at), one index probe each. */
async function organizationsWithRequests(pool: Pool): Promise<string[]> {
  const { rows } = await pool.query<{ organization_id: string }>(
    `WITH RECURSIVE orgs AS (
        (SELECT organization_id FROM review_requests WHERE organization_id >= '00000000-0000-0000-0000-000000000000' ORDER BY organization_id LIMIT 1)
        UNION ALL
        SELECT (SELECT rr.organization_id FROM review_requests rr WHERE rr.organization_id > orgs.organization_id ORDER BY rr.organization_id LIMIT 1)
          FROM orgs WHERE orgs.organization_id IS NOT NULL)
     SELECT organization_id FROM orgs WHERE organization_id IS NOT NULL`,
  );
  return rows.map((row) => row.organization_id);
}

/** Pause after a round that left more to do (ms): a first roll-up of a long history goes on in the background. */
const PAUSE_AFTER_MORE_MS = 100;

/** The roll-up rounds: every `intervalMs`, sooner while there is more. */
export function startOverviewRollup(options: OverviewRollupOptions): { stop(): Promise<void> } {
  return startHousekeepingRounds({ name: 'overview rollup', logger: options.logger, intervalMs: options.intervalMs ?? 600_000, pauseMs: PAUSE_AFTER_MORE_MS, round: () => overviewRollupRound(options) });
}
