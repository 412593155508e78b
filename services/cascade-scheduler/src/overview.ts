import type { schedulerV1 } from '@rrs/proto';
import { InvalidError, type Pool } from '@rrs/runtime';
import { DAY_MS, dayOf } from './dayRange';
import { isUuid } from './ids';
import { BUCKET_MINUTES, BUCKET_MS, CHANNEL_FACTS, FUNNEL_FACTS, RATING_FACTS, partsOfBuckets } from './overviewRollup';

export const MAX_OVERVIEW_DAYS = 366;

const EMPTY: schedulerV1.FunnelCounts = { requests: 0, sent: 0, delivered: 0, opened: 0, rated: 0, publicLinksShown: 0, publicLinkClicked: 0 };

/**
 * The console's overview over the review requests made from day `from` to day `to` (both included, in
 * the organization's time zone): how many reached each stage of
 * the funnel (a step sent, delivered, the form opened, rated, the public links shown, one of them
 * clicked), in all and by location; the steps by the channel that carried them, and the requests
 * opened, rated and clicked by the channel of the last step sent before that event (docs/cascades.md);
 * the ratings' distribution, average and days. Every figure counts the same population (the range's
 * review requests), so the stages can be compared.
 *
 * The figures of the range's whole quarter hours rolled up and not marked stale come from the roll-up
 * tables, the rest is computed live from the raw rows by the same statements (overviewRollup.ts has
 * the rule that makes both equal); `live` computes everything from the raw rows (the reference).
 */
export async function getOverview(pool: Pool, input: schedulerV1.GetOverviewRequest, options: { live?: boolean } = {}): Promise<schedulerV1.GetOverviewResponse> {
  const from = dayOf(input.fromDay);
  const to = dayOf(input.toDay);
  const problems = [];
  if (from === null) problems.push({ parameter: 'from', detail: 'must be a day, YYYY-MM-DD' });
  if (to === null) problems.push({ parameter: 'to', detail: 'must be a day, YYYY-MM-DD' });
  if (from !== null && to !== null && (to < from || to - from >= MAX_OVERVIEW_DAYS * DAY_MS)) problems.push({ parameter: 'to', detail: `must be from \`from\` to ${MAX_OVERVIEW_DAYS} days after it` });
  if (problems.length > 0) throw new InvalidError(problems, { message: problems.map((p) => `${p.parameter} ${p.detail}`).join('; ') });
  const empty = { total: { ...EMPTY }, byLocation: [], byChannel: [], ratingCounts: [0, 0, 0, 0, 0], ratingAverage: 0, ratingDays: [], openItems: 0, overdueItems: 0 };
  if (!isUuid(input.organizationId)) return empty;

  const [plan] = (await pool.query<{ from_at: Date; to_at: Date; rolled_through: Date | null; stale: Date[] }>(
    `SELECT ($2::date)::timestamp AT TIME ZONE $4 AS from_at, ($3::date + 1)::timestamp AT TIME ZONE $4 AS to_at,
            ${options.live ? 'NULL::timestamptz' : '(SELECT rolled_through FROM overview_rollup_horizons WHERE organization_id = $1)'} AS rolled_through,
            ARRAY(SELECT DISTINCT s.bucket FROM overview_stale_buckets s
                   WHERE s.organization_id = $1 AND s.bucket >= ($2::date)::timestamp AT TIME ZONE $4 - interval '${BUCKET_MINUTES} minutes'
                     AND s.bucket < ($3::date + 1)::timestamp AT TIME ZONE $4 ORDER BY 1) AS stale`,
    [input.organizationId, input.fromDay, input.toDay, input.timeZone || 'UTC'],
  )).rows;
  const { live, rolledFrom, rolledTo, stale } = overviewParts(plan.from_at.getTime(), plan.to_at.getTime(), plan.rolled_through?.getTime() ?? null, plan.stale.map((bucket) => bucket.getTime()));
  // $1 organization, $2/$3 the parts computed live, $4/$5/$6 the rolled-up buckets read (those from
  // $4 to $5, but the stale ones $6); the ratings' days are in the time zone $7.
  const params = [input.organizationId, live.from, live.to, new Date(rolledFrom), new Date(rolledTo), stale.map((bucket) => new Date(bucket))];
  const rolledUp = 'organization_id = $1 AND bucket >= $4 AND bucket < $5 AND bucket <> ALL($6::timestamptz[])';
  const [funnel, channels, ratings, items] = await Promise.all([
    pool.query(
      `SELECT location_id, sum(requests)::int AS requests, sum(sent)::int AS sent, sum(delivered)::int AS delivered, sum(opened)::int AS opened,
              sum(rated)::int AS rated, sum(shown)::int AS shown, sum(clicked)::int AS clicked
         FROM (SELECT location_id, requests, sent, delivered, opened, rated, shown, clicked FROM (${FUNNEL_FACTS}) live
               UNION ALL
               SELECT location_id, requests, sent, delivered, opened, rated, shown, clicked FROM overview_funnel_rollup WHERE ${rolledUp}) f
        GROUP BY location_id ORDER BY location_id`,
      params,
    ),
    pool.query<{ channel: string; sent: number; delivered: number; opened: number; rated: number; clicked: number }>(
      `SELECT channel, sum(sent)::int AS sent, sum(delivered)::int AS delivered, sum(opened)::int AS opened, sum(rated)::int AS rated, sum(clicked)::int AS clicked
         FROM (SELECT channel, sent, delivered, opened, rated, clicked FROM (${CHANNEL_FACTS}) live
               UNION ALL
               SELECT channel, sent, delivered, opened, rated, clicked FROM overview_channel_rollup WHERE ${rolledUp}) c
        GROUP BY channel ORDER BY channel`,
      params,
    ),
    // By the day (in the zone) the rating was given: its quarter hour lies within one day of any zone.
    pool.query(
      `SELECT to_char(rated_bucket AT TIME ZONE $7, 'YYYY-MM-DD') AS day, rating, sum(ratings)::int AS n
         FROM (SELECT rated_bucket, rating, ratings FROM (${RATING_FACTS}) live
               UNION ALL
               SELECT rated_bucket, rating, ratings FROM overview_rating_rollup WHERE ${rolledUp}) r
        GROUP BY 1, 2 ORDER BY 1, 2`,
      [...params, input.timeZone || 'UTC'],
    ),
    // The inbox now, whatever the range: items not resolved, and those past their response target.
    pool.query<{ open: number; overdue: number }>(
      `SELECT count(*)::int AS open, count(*) FILTER (WHERE respond_by < clock_timestamp())::int AS overdue
         FROM ratings WHERE organization_id = $1 AND actionable_at IS NOT NULL AND handled_at IS NULL`,
      [input.organizationId],
    ),
  ]);

  const total = { ...EMPTY };
  const byLocation = funnel.rows.map((r) => {
    const counts = { requests: r.requests, sent: r.sent, delivered: r.delivered, opened: r.opened, rated: r.rated, publicLinksShown: r.shown, publicLinkClicked: r.clicked };
    for (const key of Object.keys(total) as Array<keyof schedulerV1.FunnelCounts>) total[key] += counts[key];
    return { locationId: r.location_id, counts };
  });
  const ratingCounts = [0, 0, 0, 0, 0];
  const days = new Map<string, { ratings: number; sum: number }>();
  for (const r of ratings.rows) {
    ratingCounts[r.rating - 1] += r.n;
    const day = days.get(r.day) ?? { ratings: 0, sum: 0 };
    day.ratings += r.n;
    day.sum += r.rating * r.n;
    days.set(r.day, day);
  }
  const rated = ratingCounts.reduce((a, b) => a + b, 0);
  return {
    total,
    byLocation,
    byChannel: channels.rows.map((r) => ({ channel: r.channel, sent: r.sent, delivered: r.delivered, opened: r.opened, rated: r.rated, clicked: r.clicked })).sort((a, b) => a.channel.localeCompare(b.channel)),
    ratingCounts,
    ratingAverage: rated === 0 ? 0 : ratingCounts.reduce((sum, n, i) => sum + n * (i + 1), 0) / rated,
    ratingDays: [...days].map(([day, d]) => ({ day, ratings: d.ratings, average: d.sum / d.ratings })),
    openItems: items.rows[0].open,
    overdueItems: items.rows[0].overdue,
  };
}

/**
 * Which of the range [from, to) is read from the roll-up (the whole buckets from `rolledFrom` to
 * `rolledTo` but the `stale` ones) and which is computed live (`live`: the range's partial buckets at
 * either end, the stale buckets, and everything from the roll-up horizon on).
 */
export function overviewParts(from: number, to: number, rolledThrough: number | null, staleBuckets: number[]): { live: { from: Date[]; to: Date[] }; rolledFrom: number; rolledTo: number; stale: number[] } {
  const rolledFrom = Math.ceil(from / BUCKET_MS) * BUCKET_MS;
  const rolledTo = Math.max(rolledFrom, Math.min(Math.floor(to / BUCKET_MS) * BUCKET_MS, rolledThrough ?? -Infinity));
  const stale = staleBuckets.filter((bucket) => bucket >= rolledFrom && bucket < rolledTo);
  if (rolledTo === rolledFrom) return { live: { from: [new Date(from)], to: [new Date(to)] }, rolledFrom, rolledTo, stale: [] };
  const live = partsOfBuckets(stale);
  if (from < rolledFrom) {
    live.from.unshift(new Date(from));
    live.to.unshift(new Date(rolledFrom));
  }
  if (rolledTo < to) {
    live.from.push(new Date(rolledTo));
    live.to.push(new Date(to));
  }
  return { live, rolledFrom, rolledTo, stale };
}
