import { historyScans, recordStatements, testLogger, waitFor, type StatementRecorder } from '@rrs/testkit';
import { AddressHasher, DEVELOPMENT_PERSON_HASH_KEY, overviewRollupRound, retentionRound, SCHEMA } from '../src';
import { LOCATION, ORG, OTHER_ORG, startHarness, type Harness } from './harness';

/**
 * Costs that do not grow with history (issue 35): every statement the scheduler ran while serving the
 * API and the console (start, the send path, results, a rating and feedback, a click, GET
 * /cascades/{id}, the lists, the ratings inbox and feed, the overview and its roll-up rounds, a retention round) is EXPLAINed on a database
 * seeded with a year of history; none may read a history table whole (a sequential scan, or an index
 * scanned without a condition).
 */
const HISTORY_TABLES = new Set([
  'cascades', 'recipients', 'recipient_steps', 'review_requests', 'ratings', 'feedback', 'outbox', 'person_activity',
  'public_link_clicks', 'rating_history', 'rating_alerts', 'bot_link_codes', 'suppressions',
  // Operational history the retention rounds prune.
  'step_results', 'rating_digests', 'staff_link_codes',
  // The overview's counters grow by the quarter hour with the history they count.
  'overview_funnel_rollup', 'overview_channel_rollup', 'overview_rating_rollup', 'overview_stale_buckets',
]);
const SEEDED = 30_000;

describe('history plans: no statement of the API or the console reads a history table whole', () => {
  let h: Harness;
  let recorder: StatementRecorder;

  beforeAll(async () => {
    // Every statement any client of this process sends (the scheduler's pool included), with its parameters.
    recorder = recordStatements();
    h = await startHarness({ sender: { channels: ['EMAIL'] }, feedbackWindowMinutes: 1 });
    recorder.start();
    await h.scheduler.flows.create({ organizationId: ORG, name: 'email', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] });
  });
  afterAll(async () => {
    recorder.restore();
    await h.close();
  });

  /** A year of finished history for both organizations: cascades of 3 recipients, 3 sent steps each, a rating in 5. */
  async function seedHistory(): Promise<void> {
    await h.pool.query(`
      WITH c AS (
        INSERT INTO cascades (id, organization_id, location_id, status, recipients_total, active_recipients, created_at, finished_at)
        SELECT gen_random_uuid(), CASE WHEN g % 2 = 0 THEN $1::uuid ELSE $2::uuid END, $3, 'finished', 3, 0,
               now() - interval '1 year' + g * (interval '1 year' / $4), now() - interval '1 year' + g * (interval '1 year' / $4) + interval '1 day'
          FROM generate_series(1, $4 / 3) g RETURNING id, organization_id, created_at),
      r AS (
        INSERT INTO recipients (id, cascade_id, organization_id, position, name, email, status, finish_reason, finished_at, review_request_id)
        SELECT gen_random_uuid(), c.id, c.organization_id, p, 'Seed', 'seed' || p || '@example.com', 'finished', 'exhausted', c.created_at + interval '1 day', gen_random_uuid()
          FROM c, generate_series(0, 2) p RETURNING id, cascade_id, organization_id, review_request_id, finished_at),
      rr AS (
        INSERT INTO review_requests (id, organization_id, token, location_id, recipient_id, created_at)
        SELECT r.review_request_id, r.organization_id, replace(r.review_request_id::text, '-', ''), $3, r.id, r.finished_at - interval '1 day' FROM r RETURNING 1)
      INSERT INTO recipient_steps (id, recipient_id, cascade_id, organization_id, step_order, channel, delay_minutes, status, sent_channel, sent_at)
      SELECT gen_random_uuid(), r.id, r.cascade_id, r.organization_id, s, 'EMAIL', 0, 'sent', 'EMAIL', r.finished_at - interval '1 day'
        FROM r, generate_series(0, 2) s`,
      [ORG, OTHER_ORG, LOCATION, SEEDED],
    );
    await h.pool.query(`INSERT INTO ratings (review_request_id, organization_id, rating, created_at, feed_position)
                        SELECT id, organization_id, 1 + (row_number() OVER ())::int % 5, created_at, 1000000 + row_number() OVER () FROM review_requests
                         -- The seeded requests only (their token is the id's 32 hex digits): a real token may be
                         -- free of dashes too, and the scenario's own requests already have their rating.
                         WHERE token ~ '^[0-9a-f]{32}$' AND NOT EXISTS (SELECT 1 FROM ratings WHERE ratings.review_request_id = review_requests.id) AND random() < 0.2`);
    await h.pool.query(`INSERT INTO feedback (review_request_id, organization_id, text, created_at)
                        SELECT review_request_id, organization_id, 'seeded feedback', created_at FROM ratings WHERE rating <= 2 ON CONFLICT DO NOTHING`);
    await h.pool.query('ANALYZE');
  }

  it('every statement recorded while serving reads history through an index', async () => {
    // The recorded scenario: a cascade sent, rated with feedback, clicked; then what the API and console read.
    const { result } = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: '', externalId: 'plan-1', recipients: [{ name: 'Plan', email: 'plan@example.com', phone: '' }] });
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].steps[0].status === 'sent', { what: 'step sent' });
    const { rows } = await h.pool.query('SELECT rr.token, rr.id FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1', [result.id]);
    await h.scheduler.reviews.getForm(rows[0].token, true);
    await h.scheduler.reviews.submitRating(rows[0].token, 2);
    await h.scheduler.reviews.submitFeedback(rows[0].token, 'cold coffee');
    await h.scheduler.reviews.recordPublicLinkClick({ token: rows[0].token, index: 0 }).catch(() => undefined);
    const day = new Date().toISOString().slice(0, 10);
    const monthAgo = new Date(Date.now() - 30 * 86_400_000).toISOString().slice(0, 10);
    await h.scheduler.cascades.get(ORG, result.id);
    await h.scheduler.cascades.list({ organizationId: ORG, limit: 0, after: '', externalId: '', status: '' });
    await h.scheduler.cascades.list({ organizationId: ORG, limit: 0, after: '', externalId: 'plan-1', status: '' });
    await h.scheduler.cascades.list({ organizationId: ORG, limit: 0, after: '', externalId: '', status: '', locationId: LOCATION, fromDay: monthAgo, toDay: day });
    await h.scheduler.reviews.overview({ organizationId: ORG, fromDay: monthAgo, toDay: day, timeZone: 'UTC' });
    // The overview's roll-up rounds (overviewRollup.ts): the request, made "three days ago", is rolled up;
    // a stale mark of its bucket, rolled up again by the next round; the overview then reads the counters.
    await h.pool.query(`UPDATE review_requests SET created_at = now() - interval '3 days' WHERE id = $1`, [rows[0].id]);
    await overviewRollupRound({ pool: h.pool, logger: testLogger() });
    await h.pool.query(`INSERT INTO overview_stale_buckets (organization_id, bucket) SELECT organization_id, date_bin(interval '15 minutes', created_at, timestamptz '2000-01-01 00:00:00+00') FROM review_requests WHERE id = $1`, [rows[0].id]);
    expect((await overviewRollupRound({ pool: h.pool, logger: testLogger() })).restaled).toBe(1);
    await h.scheduler.reviews.overview({ organizationId: ORG, fromDay: monthAgo, toDay: day, timeZone: 'UTC' });
    const ratingsQuery = { organizationId: ORG, maxRating: 0, withFeedback: false, locationId: '', limit: 0, after: '', handled: '', fromDay: '', toDay: '', timeZone: 'UTC', status: '', assignedTo: '' };
    await h.scheduler.reviews.listRatings(ratingsQuery);
    await h.scheduler.reviews.listRatings({ ...ratingsQuery, maxRating: 3, withFeedback: true, fromDay: monthAgo, toDay: day });
    await h.scheduler.reviews.ratingFeed({ organizationId: ORG, after: 0, limit: 100 });
    await h.scheduler.reviews.getRating({ organizationId: ORG, reviewRequestId: rows[0].id });
    await h.scheduler.cascades.cancel(ORG, result.id);
    // A retention round (with a recipient due, so every statement of a batch runs): rounds must not scan history either.
    await h.pool.query(`UPDATE recipients SET finished_at = now() - interval '400 days' WHERE cascade_id = $1`, [result.id]);
    expect((await retentionRound({ pool: h.pool, hasher: new AddressHasher(DEVELOPMENT_PERSON_HASH_KEY), logger: testLogger() })).counts).toMatchObject({ recipients: 1 });
    expect(recorder.statements.size).toBeGreaterThan(20);

    recorder.stop();
    await seedHistory();
    expect(await historyScans(h.db.url, recorder.statements, HISTORY_TABLES, { searchPath: SCHEMA })).toEqual([]);
  });

  it('the tables every send and rating changes are vacuumed by a count of changed rows, not by a fifth of the table (migration 0031)', async () => {
    const { rows } = await h.pool.query<{ relname: string; reloptions: string[] }>(
      `SELECT relname, reloptions FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'r' AND relname = ANY($2::text[]) ORDER BY relname`,
      [SCHEMA, ['person_activity', 'recipient_steps', 'recipients', 'review_requests']],
    );
    expect(rows.map((row) => row.relname)).toEqual(['person_activity', 'recipient_steps', 'recipients', 'review_requests']);
    for (const row of rows) expect(row.reloptions).toEqual(expect.arrayContaining(['autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=50000']));
  });
});
