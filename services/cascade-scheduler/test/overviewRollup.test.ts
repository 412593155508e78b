import { createHash } from 'node:crypto';
import { testLogger, waitFor } from '@rrs/testkit';
import { overviewRollupRound } from '../src';
import { anonymizeRecipients } from '../src/anonymize';
import { getOverview, overviewParts } from '../src/overview';
import { BUCKET_MS, CHANNEL_FACTS, FUNNEL_FACTS, RATING_FACTS, ROLLUP_AGE_HOURS } from '../src/overviewRollup';
import { DUE_CHANNEL } from '../src/recipientStore';
import { LOCATION, ORG, startHarness, type Harness } from './harness';

const OTHER_LOCATION = `${LOCATION}-b`;
const ZONES = ['UTC', 'Asia/Kathmandu', 'America/New_York', 'Pacific/Kiritimati'];
const HOUR_MS = 3_600_000;

/** The day `daysAgo` days before today, in `timeZone`. */
function dayIn(timeZone: string, daysAgo: number): string {
  return new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date(Date.now() - daysAgo * 86_400_000));
}

/**
 * The console's overview from rolled-up counters (overviewRollup.ts; docs/operations.md, "Data
 * lifecycle"): on a real database, the overview equals the live computation over the raw rows for a
 * seeded history (late steps and ratings, clicks, opens before any send, requests around a local
 * midnight in a zone a quarter hour off UTC) before and after the roll-up, after late changes made
 * through the service's own paths, and after anonymization; and a 30-day range reads the counters.
 */
describe('overview roll-up: the same figures as the live computation, from counters', () => {
  let h: Harness;
  let lateStepRequest: string;

  /** The overview (counters where rolled up) and the live reference, for the ranges the console asks. */
  async function bothWays(timeZone: string, fromDaysAgo: number, toDaysAgo: number) {
    const input = { organizationId: ORG, fromDay: dayIn(timeZone, fromDaysAgo), toDay: dayIn(timeZone, toDaysAgo), timeZone };
    return { rolled: await getOverview(h.pool, input), live: await getOverview(h.pool, input, { live: true }) };
  }

  async function expectSameAsLive(): Promise<void> {
    for (const zone of ZONES) {
      for (const [from, to] of [[29, 0], [3, 3], [4, 2], [6, 1]]) {
        const { rolled, live } = await bothWays(zone, from, to);
        expect({ zone, from, to, overview: rolled }).toEqual({ zone, from, to, overview: live });
      }
    }
  }

  const marks = async () => Number((await h.pool.query('SELECT count(*) FROM overview_stale_buckets WHERE organization_id = $1', [ORG])).rows[0].count);

  /** Rounds until the organization is rolled up to ROLLUP_AGE_HOURS ago with no mark left (a round of the scheduler's own loop may hold the lock). */
  async function rollUpAll(): Promise<void> {
    await waitFor(async () => {
      await overviewRollupRound({ pool: h.pool, logger: testLogger() });
      const { rows } = await h.pool.query(`SELECT rolled_through FROM overview_rollup_horizons WHERE organization_id = $1`, [ORG]);
      return rows.length === 1 && Date.now() - rows[0].rolled_through.getTime() <= ROLLUP_AGE_HOURS * HOUR_MS + BUCKET_MS + 60_000 && (await marks()) === 0;
    }, { what: 'rolled up' });
  }

  beforeAll(async () => {
    h = await startHarness({ sender: { channels: ['EMAIL', 'SMS'] }, config: { overviewRollupIntervalMs: 3_600_000 } });
    // A cascade whose second step waits (100 000 flow minutes of 50 ms) until a test makes it due: its
    // request is made "three days ago" below, so that step is a late change to a rolled-up bucket.
    await h.scheduler.flows.create({ organizationId: ORG, name: 'two', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 100_000 }] });
    const { result } = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: '', externalId: 'late-step', recipients: [{ name: 'Late', email: 'late@example.com', phone: '+79000000001' }] });
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].steps[0].status === 'sent', { what: 'first step sent' });
    const { rows } = await h.pool.query(
      `UPDATE review_requests SET created_at = now() - interval '3 days' WHERE id = (SELECT review_request_id FROM recipients WHERE cascade_id = $1) RETURNING id`,
      [result.id],
    );
    lateStepRequest = rows[0].id;

    // Six days of history in two locations: a first step by email (some failed), a second by SMS a day
    // later for some, deliveries, opens (some before any step was recorded), ratings given up to three
    // days after the request, clicks; and four requests a minute or so around a midnight in Kathmandu (UTC+5:45).
    await h.pool.query(
      `WITH src AS (
         SELECT g, now() - interval '6 days' + g * (interval '6 days' / 600) AS t FROM generate_series(1, 600) g
         UNION ALL
         SELECT 600 + k, ((current_date - 3)::timestamp AT TIME ZONE 'Asia/Kathmandu') + (k - 2.5) * interval '1 minute' FROM generate_series(1, 4) k),
       ids AS (
         SELECT g, t, md5('c' || g)::uuid AS cascade_id, md5('r' || g)::uuid AS recipient_id, md5('q' || g)::uuid AS request_id,
                CASE WHEN g % 2 = 0 THEN $2 ELSE $3 END AS location_id,
                CASE WHEN g % 5 = 0 AND t + (g % 4) * interval '1 day' + interval '30 minutes' < now() THEN t + (g % 4) * interval '1 day' + interval '30 minutes' END AS rated_at
           FROM src),
       c AS (
         INSERT INTO cascades (id, organization_id, location_id, status, recipients_total, active_recipients, created_at, finished_at)
         SELECT cascade_id, $1, location_id, 'finished', 1, 0, t, t + interval '1 day' FROM ids RETURNING 1),
       r AS (
         INSERT INTO recipients (id, cascade_id, organization_id, position, name, email, phone, status, finish_reason, finished_at, review_request_id)
         SELECT recipient_id, cascade_id, $1, 0, 'Seed ' || g, 'seed' || g || '@example.com', '+7901' || lpad(g::text, 7, '0'), 'finished', 'exhausted', t + interval '1 day', request_id FROM ids RETURNING 1),
       rr AS (
         INSERT INTO review_requests (id, organization_id, token, location_id, recipient_id, status, created_at, opened_at, rated_at, public_links_shown_at)
         SELECT request_id, $1, replace(request_id::text, '-', ''), location_id, recipient_id, 'created', t,
                CASE WHEN g % 11 = 0 THEN t WHEN rated_at IS NOT NULL THEN rated_at WHEN g % 3 = 1 THEN t + interval '2 hours' END, rated_at, rated_at
           FROM ids RETURNING 1),
       ra AS (
         INSERT INTO ratings (review_request_id, organization_id, rating, created_at)
         SELECT request_id, $1, 1 + (g / 5) % 5, rated_at FROM ids WHERE rated_at IS NOT NULL RETURNING 1),
       cl AS (
         INSERT INTO public_link_clicks (review_request_id, organization_id, provider, url, clicked_at)
         SELECT request_id, $1, 'google', 'https://g.example/review', rated_at + interval '5 minutes' FROM ids WHERE rated_at IS NOT NULL AND g % 2 = 0 RETURNING 1)
       INSERT INTO recipient_steps (id, recipient_id, cascade_id, organization_id, step_order, channel, delay_minutes, status, sent_channel, sent_at, delivered_at)
       SELECT md5('s' || g || '-' || s)::uuid, recipient_id, cascade_id, $1, s, CASE s WHEN 0 THEN 'EMAIL' ELSE 'SMS' END, s * 1440,
              CASE WHEN s = 0 AND g % 7 = 0 THEN 'failed' WHEN s = 1 AND (g % 4 <> 0 OR t + interval '1 day' > now()) THEN 'skipped' ELSE 'sent' END,
              CASE s WHEN 0 THEN 'EMAIL' ELSE 'SMS' END,
              CASE WHEN s = 0 AND g % 7 <> 0 THEN t + interval '1 minute' WHEN s = 1 AND g % 4 = 0 AND t + interval '1 day' <= now() THEN t + interval '1 day' END,
              CASE WHEN s = 0 AND g % 7 <> 0 AND g % 3 = 0 THEN t + interval '3 minutes' WHEN s = 1 AND g % 8 = 0 AND t + interval '1 day' <= now() THEN t + interval '1 day 1 minute' END
         FROM ids, generate_series(0, 1) s`,
      [ORG, LOCATION, OTHER_LOCATION],
    );
  });
  afterAll(async () => {
    await h.close();
  });

  it('rolls up the days older than a day; the overview then equals the live computation in every zone and range', async () => {
    const before = await bothWays('UTC', 29, 0);
    expect(before.rolled).toEqual(before.live);
    expect(before.live.total).toMatchObject({ requests: 605 });
    expect(before.live.ratingDays.length).toBeGreaterThan(3);
    expect(before.live.byChannel.map((c) => c.channel)).toEqual(['EMAIL', 'SMS']);

    await rollUpAll();
    const { rows } = await h.pool.query('SELECT sum(requests)::int AS requests FROM overview_funnel_rollup WHERE organization_id = $1', [ORG]);
    // Every request made more than ROLLUP_AGE_HOURS ago is in the counters (the seeded ones: 600 × 5/6 of their six days, give or take a bucket).
    expect(rows[0].requests).toBeGreaterThan(480);
    await expectSameAsLive();
    // The four requests around midnight in Kathmandu fall on either side of it there.
    const atMidnight = await h.pool.query(`SELECT created_at FROM review_requests WHERE id = ANY($1::uuid[]) ORDER BY created_at`, [[601, 602, 603, 604].map((g) => md5Uuid(`q${g}`))]);
    const kathmanduDays = atMidnight.rows.map((row) => new Intl.DateTimeFormat('en-CA', { timeZone: 'Asia/Kathmandu' }).format(row.created_at));
    expect(new Set(kathmanduDays).size).toBe(2);
  });

  it('a 30-day overview reads the counters: rows changed behind the service’s back do not show until they are rolled up again', async () => {
    await rollUpAll();
    const reference = await bothWays('Asia/Kathmandu', 29, 0);
    // A direct change (no stale mark): only the live computation sees it.
    await h.pool.query(`UPDATE ratings SET rating = 6 - rating WHERE organization_id = $1 AND created_at < now() - interval '2 days' AND rating <> 3`, [ORG]);
    const tampered = await bothWays('Asia/Kathmandu', 29, 0);
    expect(tampered.rolled).toEqual(reference.rolled);
    expect(tampered.live.ratingCounts).not.toEqual(reference.live.ratingCounts);
    await h.pool.query(`UPDATE ratings SET rating = 6 - rating WHERE organization_id = $1 AND created_at < now() - interval '2 days' AND rating <> 3`, [ORG]);
    // What is computed live for a 30-day range: the partial buckets at its ends and the last ROLLUP_AGE_HOURS (and a bucket).
    const { rows } = await h.pool.query(`SELECT rolled_through FROM overview_rollup_horizons WHERE organization_id = $1`, [ORG]);
    const from = Date.now() - 30 * 86_400_000;
    const parts = overviewParts(from, Date.now(), rows[0].rolled_through.getTime(), []);
    const liveMs = parts.live.from.reduce((sum, start, i) => sum + parts.live.to[i].getTime() - start.getTime(), 0);
    expect(liveMs).toBeLessThanOrEqual((ROLLUP_AGE_HOURS + 1) * HOUR_MS + 2 * BUCKET_MS);
  });

  it('late changes through the service (a step sent, the form opened, a rating, a click) mark their bucket: the overview stays equal to the live computation', async () => {
    await rollUpAll();
    // The second step of the request made "three days ago" goes out now: the results path marks it.
    expect(await marks()).toBe(0);
    await h.pool.query(`UPDATE recipient_steps SET due_at = now() WHERE recipient_id = (SELECT recipient_id FROM review_requests WHERE id = $1) AND status = 'scheduled'`, [lateStepRequest]);
    await h.pool.query('SELECT pg_notify($1, $2)', [DUE_CHANNEL, String(Date.now())]);
    await waitFor(async () => (await h.pool.query(`SELECT 1 FROM recipient_steps s JOIN review_requests rr ON rr.recipient_id = s.recipient_id WHERE rr.id = $1 AND s.channel = 'SMS' AND s.sent_at IS NOT NULL`, [lateStepRequest])).rowCount === 1, { what: 'late step sent', timeoutMs: 30_000 });
    expect(await marks()).toBeGreaterThan(0);
    await expectSameAsLive();

    // A request three days old, never opened: opened, then rated, then its public link clicked.
    const { rows } = await h.pool.query(
      `SELECT token FROM review_requests WHERE organization_id = $1 AND opened_at IS NULL AND rated_at IS NULL AND recipient_id IS NOT NULL AND created_at < now() - interval '3 days' ORDER BY created_at DESC LIMIT 1`,
      [ORG],
    );
    const token = rows[0].token;
    await rollUpAll();
    const before = await bothWays('UTC', 29, 0);
    await h.scheduler.reviews.getForm(token, true);
    expect(await marks()).toBe(1);
    await expectSameAsLive();
    await h.scheduler.reviews.submitRating(token, 4);
    expect(await marks()).toBe(2);
    expect((await h.scheduler.reviews.recordPublicLinkClick({ token, index: 0 })).recorded).toBe(true);
    expect(await marks()).toBe(3);
    const after = await bothWays('UTC', 29, 0);
    expect(after.rolled).toEqual(after.live);
    expect(after.rolled.total).toMatchObject({ opened: before.live.total!.opened + 1, rated: before.live.total!.rated + 1, publicLinkClicked: before.live.total!.publicLinkClicked + 1 });
    await expectSameAsLive();

    // The next round rolls the marked buckets up again and deletes the marks.
    await rollUpAll();
    await expectSameAsLive();
  });

  it('anonymizing recipients (erasure, retention) changes no figure and marks nothing', async () => {
    await rollUpAll();
    const before = await bothWays('America/New_York', 29, 0);
    const { rows } = await h.pool.query(`SELECT id FROM recipients WHERE organization_id = $1 AND name LIKE 'Seed %' ORDER BY id LIMIT 50`, [ORG]);
    const client = await h.pool.connect();
    try {
      await client.query('BEGIN');
      await anonymizeRecipients(client, ORG, rows.map((row) => row.id), { outbox: false });
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect((await h.pool.query(`SELECT count(*)::int AS n FROM recipients WHERE id = ANY($1::uuid[]) AND anonymized_at IS NOT NULL`, [rows.map((row) => row.id)])).rows[0].n).toBe(50);
    expect(await marks()).toBe(0);
    const after = await bothWays('America/New_York', 29, 0);
    expect(after.rolled).toEqual(before.rolled);
    expect(after.live).toEqual(before.live);
  });

  it('the live computation looks up clicks for rated requests only, and counts the channels\' steps without a sort and an aggregate per request', async () => {
    type PlanNode = { 'Node Type': string; 'Relation Name'?: string; 'Actual Loops': number; Plans?: PlanNode[] };
    const nodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodes)];
    const range = [ORG, [new Date(Date.now() - 7 * 86_400_000)], [new Date(Date.now() + 60_000)]];
    const { rows: [counts] } = await h.pool.query(
      `SELECT count(*)::int AS requests, count(*) FILTER (WHERE rated_at IS NOT NULL)::int AS rated FROM review_requests WHERE organization_id = $1 AND created_at >= $2 AND created_at < $3`,
      [ORG, range[1][0], range[2][0]],
    );
    expect(counts.rated).toBeGreaterThan(0);
    expect(counts.rated).toBeLessThan(counts.requests / 2);
    for (const statement of [FUNNEL_FACTS, CHANNEL_FACTS]) {
      const { rows } = await h.pool.query(`EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) ${statement}`, range);
      const plan = nodes(rows[0]['QUERY PLAN'][0].Plan);
      // The clicks' subplan runs once per rated request (it ran for every request).
      const clicks = plan.filter((node) => node['Relation Name'] === 'public_link_clicks');
      expect(clicks.length).toBeGreaterThan(0);
      for (const node of clicks) expect(node['Actual Loops']).toBeLessThanOrEqual(counts.rated);
      // Per request, only the steps' index scan: no sort or aggregate run as many times as there are requests.
      const perRequest = plan.filter((node) => node['Actual Loops'] >= counts.requests && ['Aggregate', 'Sort'].includes(node['Node Type']) && node['Relation Name'] === undefined);
      expect({ statement: statement.slice(0, 40), perRequest: perRequest.map((node) => node['Node Type']) }).toEqual({ statement: statement.slice(0, 40), perRequest: statement === FUNNEL_FACTS ? ['Aggregate'] : [] });
    }
  });

  it('the live computation looks a request\'s steps and rating up by its keys whatever the planner prefers: no join reads recipient_steps or ratings as a whole', async () => {
    // With nested loops costed out, a statement whose steps' lookup PostgreSQL may flatten into a join
    // picks a hash or merge join over the whole table (what it chose on a 5 M history); a lookup that
    // cannot be flattened stays a parameterized index scan.
    type PlanNode = { 'Node Type': string; 'Relation Name'?: string; 'Index Cond'?: string; 'Recheck Cond'?: string; Plans?: PlanNode[] };
    const nodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodes)];
    const client = await h.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL enable_nestloop = off');
      for (const [statement, table] of [[FUNNEL_FACTS, 'recipient_steps'], [CHANNEL_FACTS, 'recipient_steps'], [RATING_FACTS, 'ratings']]) {
        const { rows } = await client.query(`EXPLAIN (FORMAT JSON) ${statement}`, [ORG, [new Date(Date.now() - 86_400_000)], [new Date()]]);
        const steps = nodes(rows[0]['QUERY PLAN'][0].Plan).filter((node) => node['Relation Name'] === table);
        expect(steps.length).toBeGreaterThan(0);
        // Each read of the table is by one recipient's key, the recipient coming from the request read.
        for (const node of steps) {
          expect({ statement: statement.slice(0, 40), node: node['Node Type'], cond: node['Index Cond'] ?? node['Recheck Cond'] })
            .toEqual({ statement: statement.slice(0, 40), node: expect.stringMatching(/^(Index Scan|Index Only Scan|Bitmap Heap Scan)$/), cond: expect.stringMatching(/(recipient_id|review_request_id) = /) });
        }
      }
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  it('overviewParts: the range is read from whole rolled-up buckets but the stale ones, the rest live', () => {
    const at = (minutes: number) => Date.UTC(2026, 0, 10) + minutes * 60_000;
    // A range starting and ending mid-bucket, rolled up to 10:00, one stale bucket at 02:00.
    const parts = overviewParts(at(-20), at(12 * 60 + 5), at(10 * 60), [at(120)]);
    expect(parts.rolledFrom).toBe(at(-15));
    expect(parts.rolledTo).toBe(at(600));
    expect(parts.stale).toEqual([at(120)]);
    expect(parts.live.from.map((d) => d.getTime())).toEqual([at(-20), at(120), at(600)]);
    expect(parts.live.to.map((d) => d.getTime())).toEqual([at(-15), at(135), at(12 * 60 + 5)]);
    // Nothing rolled up yet (or the range is after the horizon): all live.
    expect(overviewParts(at(0), at(60), null, []).live.from.map((d) => d.getTime())).toEqual([at(0)]);
    expect(overviewParts(at(700), at(800), at(600), []).live.to.map((d) => d.getTime())).toEqual([at(800)]);
  });
});

/** md5(text)::uuid, as the seed computes its ids. */
function md5Uuid(text: string): string {
  const hex = createHash('md5').update(text).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
