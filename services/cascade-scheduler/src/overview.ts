import type { schedulerV1 } from '@rrs/proto';
import { InvalidError, type Pool } from '@rrs/runtime';
import { DAY_MS, dayOf } from './dayRange';
import { isUuid } from './ids';

export const MAX_OVERVIEW_DAYS = 366;

const EMPTY: schedulerV1.FunnelCounts = { requests: 0, sent: 0, delivered: 0, opened: 0, rated: 0, publicLinksShown: 0, publicLinkClicked: 0 };
type ChannelEvent = 'opened' | 'rated' | 'clicked';

/**
 * The console's overview over the review requests made from day `from` to day `to` (both included, in
 * the organization's time zone): how many reached each stage of
 * the funnel (a step sent, delivered, the form opened, rated, the public links shown, one of them
 * clicked), in all and by location; the steps by the channel that carried them, and the requests
 * opened, rated and clicked by the channel of the last step sent before that event (docs/cascades.md);
 * the ratings' distribution, average and days. Every figure counts the same population (the range's
 * review requests), so the stages can be compared.
 */
export async function getOverview(pool: Pool, input: schedulerV1.GetOverviewRequest): Promise<schedulerV1.GetOverviewResponse> {
  const from = dayOf(input.fromDay);
  const to = dayOf(input.toDay);
  const problems = [];
  if (from === null) problems.push({ parameter: 'from', detail: 'must be a day, YYYY-MM-DD' });
  if (to === null) problems.push({ parameter: 'to', detail: 'must be a day, YYYY-MM-DD' });
  if (from !== null && to !== null && (to < from || to - from >= MAX_OVERVIEW_DAYS * DAY_MS)) problems.push({ parameter: 'to', detail: `must be from \`from\` to ${MAX_OVERVIEW_DAYS} days after it` });
  if (problems.length > 0) throw new InvalidError(problems, { message: problems.map((p) => `${p.parameter} ${p.detail}`).join('; ') });
  const empty = { total: { ...EMPTY }, byLocation: [], byChannel: [], ratingCounts: [0, 0, 0, 0, 0], ratingAverage: 0, ratingDays: [], openItems: 0, overdueItems: 0 };
  if (!isUuid(input.organizationId)) return empty;

  const inRange = `SELECT rr.id, rr.recipient_id, rr.location_id, rr.opened_at, rr.rated_at, rr.public_links_shown_at,
                          (SELECT min(c.clicked_at) FROM public_link_clicks c WHERE c.review_request_id = rr.id) AS clicked_at
                     FROM review_requests rr
                    WHERE rr.organization_id = $1 AND rr.created_at >= ($2::date)::timestamp AT TIME ZONE $4 AND rr.created_at < ($3::date + 1)::timestamp AT TIME ZONE $4`;
  // The steps are looked up per request in range (LATERAL, by recipient_steps' (recipient_id,
  // step_order) key): joined as a set, the planner hash-joined every step the organization ever had.
  const params = [input.organizationId, input.fromDay, input.toDay, input.timeZone || 'UTC'];
  const [funnel, channels, ratings, events, items] = await Promise.all([
    pool.query(
      `WITH rr AS (${inRange}),
            staged AS (
              SELECT rr.location_id, rr.opened_at IS NOT NULL AS opened, rr.rated_at IS NOT NULL AS rated, rr.public_links_shown_at IS NOT NULL AS shown, rr.clicked_at IS NOT NULL AS clicked,
                     coalesce(st.sent, false) AS sent, coalesce(st.delivered, false) AS delivered
                FROM rr LEFT JOIN LATERAL (SELECT bool_or(s.sent_at IS NOT NULL) AS sent, bool_or(s.delivered_at IS NOT NULL) AS delivered
                                             FROM recipient_steps s WHERE s.recipient_id = rr.recipient_id) st ON true)
       SELECT location_id, count(*)::int AS requests, count(*) FILTER (WHERE sent)::int AS sent, count(*) FILTER (WHERE delivered)::int AS delivered,
              count(*) FILTER (WHERE opened)::int AS opened, count(*) FILTER (WHERE rated)::int AS rated, count(*) FILTER (WHERE shown)::int AS shown,
              count(*) FILTER (WHERE clicked)::int AS clicked
         FROM staged GROUP BY location_id ORDER BY location_id`,
      params,
    ),
    pool.query(
      `WITH rr AS (${inRange})
       SELECT s.channel, sum(s.sent)::int AS sent, sum(s.delivered)::int AS delivered
         FROM rr CROSS JOIN LATERAL (SELECT s.sent_channel AS channel, count(*) AS sent, count(*) FILTER (WHERE s.delivered_at IS NOT NULL) AS delivered
                                       FROM recipient_steps s WHERE s.recipient_id = rr.recipient_id AND s.sent_at IS NOT NULL GROUP BY s.sent_channel) s
        GROUP BY s.channel ORDER BY s.channel`,
      params,
    ),
    pool.query(
      `WITH rr AS (${inRange})
       SELECT to_char(ra.created_at AT TIME ZONE $4, 'YYYY-MM-DD') AS day, ra.rating, count(*)::int AS n
         FROM rr JOIN ratings ra ON ra.review_request_id = rr.id GROUP BY 1, 2 ORDER BY 1, 2`,
      params,
    ),
    // The channel credited with an event is the one of the last step sent at or before it. A step's
    // `sent_at` is when its result was applied, which a backlog of results can put after the customer
    // already acted on the message: an event with no step recorded before it goes to the first step sent.
    pool.query<{ channel: string; kind: ChannelEvent; n: number }>(
      `WITH rr AS (${inRange}),
            happened AS (
              SELECT recipient_id, 'opened' AS kind, opened_at AS at FROM rr WHERE opened_at IS NOT NULL
              UNION ALL SELECT recipient_id, 'rated', rated_at FROM rr WHERE rated_at IS NOT NULL
              UNION ALL SELECT recipient_id, 'clicked', clicked_at FROM rr WHERE clicked_at IS NOT NULL)
       SELECT last_step.sent_channel AS channel, h.kind, count(*)::int AS n
         FROM happened h
         CROSS JOIN LATERAL (SELECT s.sent_channel FROM recipient_steps s WHERE s.recipient_id = h.recipient_id AND s.sent_at IS NOT NULL
                             ORDER BY s.sent_at <= h.at DESC, CASE WHEN s.sent_at <= h.at THEN s.sent_at END DESC, s.sent_at LIMIT 1) last_step
        GROUP BY 1, 2`,
      params,
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
  const byChannel = new Map<string, schedulerV1.ChannelCounts>(channels.rows.map((r) => [r.channel, { channel: r.channel, sent: r.sent, delivered: r.delivered, opened: 0, rated: 0, clicked: 0 }]));
  for (const e of events.rows) {
    const counts = byChannel.get(e.channel) ?? { channel: e.channel, sent: 0, delivered: 0, opened: 0, rated: 0, clicked: 0 };
    counts[e.kind] += e.n;
    byChannel.set(e.channel, counts);
  }
  return {
    total,
    byLocation,
    byChannel: [...byChannel.values()].sort((a, b) => a.channel.localeCompare(b.channel)),
    ratingCounts,
    ratingAverage: rated === 0 ? 0 : ratingCounts.reduce((sum, n, i) => sum + n * (i + 1), 0) / rated,
    ratingDays: [...days].map(([day, d]) => ({ day, ratings: d.ratings, average: d.sum / d.ratings })),
    openItems: items.rows[0].open,
    overdueItems: items.rows[0].overdue,
  };
}
