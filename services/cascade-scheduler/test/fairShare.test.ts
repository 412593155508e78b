import { createPool, inCoalescedTransaction, Notifier, type Pool, type PoolClient } from '@rrs/runtime';
import { testLogger, waitFor } from '@rrs/testkit';
import { AddressHasher, ConfiguredChannels, DEVELOPMENT_PERSON_HASH_KEY, SCHEMA, startDispatcher, type RunningDispatcher } from '../src';
import { CLAIM_PLANNER_SETTINGS, claimDueSteps, claimStatement, type ClaimOptions } from '../src/sql/dueSteps';
import { LOCATION, ORG, OTHER_ORG, recipientsInput, startHarness, startScriptedSender, type Harness } from './harness';

/** Time-ordered ids, as the service's UUIDv7s. */
const V7 = `(lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || substr(md5(random()::text || i::text), 1, 20))::uuid`;

/**
 * `n` one-step EMAIL recipients of one bulk cascade of `org`, every step due a minute ago (older than
 * anything started now) — or, with `status: 'sent'`, sent a year ago (history). Statistics are refreshed
 * unless `analyze` is false (a backlog that arrived after the last ANALYZE).
 */
async function seedBulkDue(pool: Pool, org: string, n: number, options: { status?: 'scheduled' | 'sent'; analyze?: boolean; due?: string } = {}): Promise<string> {
  const status = options.status ?? 'scheduled';
  const due = options.due ?? (status === 'scheduled' ? `now() - interval '1 minute'` : `now() - interval '1 year'`);
  const { rows } = await pool.query<{ id: string }>(
    `WITH c AS (INSERT INTO cascades (id, organization_id, location_id, status, recipients_total, active_recipients) VALUES (gen_random_uuid(), $1, 'loc', 'running', $2, $2) RETURNING id),
          g AS (SELECT i, ${V7} AS rid, ${V7} AS rrid FROM generate_series(0, $2 - 1) AS i),
          rr AS (INSERT INTO review_requests (id, organization_id, token, location_id, recipient_id) SELECT rrid, $1, md5(rrid::text), 'loc', rid FROM g),
          r AS (INSERT INTO recipients (id, cascade_id, organization_id, position, email, status, review_request_id) SELECT rid, (SELECT id FROM c), $1, i, 'bulk' || i || '@example.com', 'running', rrid FROM g),
          s AS (INSERT INTO recipient_steps (id, recipient_id, cascade_id, organization_id, step_order, channel, delay_minutes, status, sent_channel, bulk, due_at)
                SELECT ${V7}, rid, (SELECT id FROM c), $1, 1, 'EMAIL', 0, '${status}', 'EMAIL', true, ${due} + make_interval(secs => i / 1000000.0) FROM g)
     SELECT id FROM c`,
    [org, n],
  );
  if (options.analyze ?? true) await pool.query('ANALYZE recipient_steps');
  return rows[0].id;
}

/** Rows and shared blocks of a statement run under EXPLAIN ANALYZE, rolled back. */
async function claimBlocks(pool: Pool, text: string, values: unknown[]): Promise<{ rows: number; blocks: number }> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ 'QUERY PLAN': Array<{ Plan: { 'Actual Rows': number; 'Shared Hit Blocks': number; 'Shared Read Blocks': number } }> }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${text}`, values);
    await client.query('ROLLBACK');
    const plan = rows[0]['QUERY PLAN'][0].Plan;
    return { rows: plan['Actual Rows'], blocks: plan['Shared Hit Blocks'] + plan['Shared Read Blocks'] };
  } finally {
    client.release();
  }
}

/**
 * A claim as the dispatcher makes it (claimDueSteps, its planner settings and all), in a transaction rolled
 * back; the blocks of the steps' table (its rows, not its indexes) it read: the backend's count before and
 * after it, in one transaction (a backend's counts are flushed, and restart, only between transactions).
 */
async function claimTableBlocks(pool: Pool, options: ClaimOptions): Promise<{ claimed: number; blocks: number }> {
  const blocksRead = async (client: PoolClient) => Number((await client.query<{ blocks: string }>(`SELECT pg_stat_get_xact_blocks_fetched('recipient_steps'::regclass) AS blocks`)).rows[0].blocks);
  return inCoalescedTransaction(pool, async (client) => {
    const before = await blocksRead(client);
    const claim = await claimDueSteps(client, options);
    const after = await blocksRead(client);
    throw Object.assign(new Error('rolled back'), { measured: { claimed: claim.claimed.length, blocks: after - before } });
  }).catch((err: { measured?: { claimed: number; blocks: number } }) => {
    if (!err.measured) throw err;
    return err.measured;
  });
}

describe('fair share (Postgres + JetStream)', () => {
  let h: Harness;
  const extra: Array<{ pool: Pool; notifier: Notifier; dispatcher?: RunningDispatcher }> = [];

  beforeAll(async () => {
    h = await startHarness({ minuteMs: 40, deps: { noDispatcher: true } });
  });
  afterAll(async () => {
    for (const e of extra) {
      await e.dispatcher?.stop();
      await e.notifier.stop();
      await e.pool.end();
    }
    await h.close();
  });

  async function dispatcher(options: { batchSize: number; inFlight: { max: number; min: number; targetMs: number } | null; loops?: number; onRound?: () => void; afterPublish?: () => Promise<void> }): Promise<RunningDispatcher> {
    const pool = createPool({ url: h.db.url, schema: SCHEMA, logger: testLogger() });
    const notifier = new Notifier(h.db.url, SCHEMA, testLogger());
    const entry: (typeof extra)[number] = { pool, notifier };
    extra.push(entry);
    entry.dispatcher = await startDispatcher({
      pool, bus: h.tb.bus, notifier, logger: testLogger(), minuteMs: 40, publicBaseUrl: 'http://reviews.test',
      channels: new ConfiguredChannels(h.profiles), hasher: new AddressHasher(DEVELOPMENT_PERSON_HASH_KEY), batchSize: options.batchSize, inFlight: options.inFlight, loops: options.loops,
      beforeRound: async () => options.onRound?.(),
      afterPublish: options.afterPublish && (() => options.afterPublish!()),
    });
    await notifier.start();
    return entry.dispatcher;
  }

  const startSmall = async (tag: string, channel = 'EMAIL', recipients = 1) =>
    (await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: tag, flowId: '', channel, externalId: tag,
      recipients: recipientsInput(recipients, (k) => ({ email: `${tag}-${k}@example.com`, phone: `+7900100${String(k).padStart(4, '0')}` })),
    })).result.id;

  const stepOf = async (cascadeId: string) =>
    (await h.pool.query<{ status: string; dispatched_at: Date | null }>('SELECT status, dispatched_at FROM recipient_steps WHERE cascade_id = $1', [cascadeId])).rows;

  it("a small organization's step is dispatched while another organization has 100 000 due", async () => {
    const bulk = await seedBulkDue(h.pool, OTHER_ORG, 100_000);
    const small = await startSmall('order-closed');
    const sender = await startScriptedSender(h.tb.bus, ['EMAIL']);
    const d = await dispatcher({ batchSize: 500, inFlight: { max: 1000, min: 128, targetMs: 250 } });
    await waitFor(async () => (await stepOf(small))[0].dispatched_at !== null, { what: "the small organization's step dispatched", timeoutMs: 20_000 });
    await d.stop();
    await sender.stop();
    const [{ dispatched_at: at }] = await stepOf(small);
    const { rows } = await h.pool.query<{ before: number; sent: number; scheduled: number }>(
      `SELECT count(*) FILTER (WHERE dispatched_at <= $2)::int AS before, count(*) FILTER (WHERE status IN ('dispatched', 'sent'))::int AS sent,
              count(*) FILTER (WHERE status = 'scheduled')::int AS scheduled
         FROM recipient_steps WHERE cascade_id = $1`,
      [bulk, at],
    );
    // Ahead of it: at most the first round of each claim loop (2 × 500), never the other's backlog.
    expect(rows[0].before).toBeLessThanOrEqual(1000);
    expect(rows[0].sent + rows[0].scheduled).toBe(100_000);
    expect(rows[0].scheduled).toBeGreaterThan(90_000);
  });

  it("within an organization, a small request's step goes ahead of a bulk one's", async () => {
    const bulk = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: 'csv', flowId: '', channel: 'EMAIL', externalId: 'csv',
      recipients: recipientsInput(40, (k) => ({ email: `csv-${k}@example.com` })),
    });
    const small = await startSmall('review-request');
    const sender = await startScriptedSender(h.tb.bus, ['EMAIL']);
    const d = await dispatcher({ batchSize: 10, inFlight: null, loops: 1 });
    await waitFor(async () => (await stepOf(bulk.result.id)).every((s) => s.status === 'sent'), { what: 'the bulk cascade sent', timeoutMs: 20_000 });
    await d.stop();
    await sender.stop();
    const [{ dispatched_at: smallAt }] = await stepOf(small);
    const bulkAt = (await stepOf(bulk.result.id)).map((s) => s.dispatched_at!.getTime());
    // The bulk cascade's steps were due first; the small one's went in the first round all the same.
    expect(smallAt!.getTime()).toBeLessThanOrEqual(Math.min(...bulkAt));
  });

  it("a small request's steps go on the channel's small requests' subject, a bulk one's on the channel's own: an order is never queued in the stream behind the bulk", async () => {
    const bulk = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: 'csv-lanes', flowId: '', channel: 'EMAIL', externalId: 'csv-lanes',
      recipients: recipientsInput(11, (k) => ({ email: `lanes-${k}@example.com` })),
    });
    const small = await startSmall('lanes-order', 'EMAIL', 10);
    const sender = await startScriptedSender(h.tb.bus, ['EMAIL']);
    const d = await dispatcher({ batchSize: 50, inFlight: { max: 1000, min: 128, targetMs: 100 } });
    const ids = async (cascadeId: string) => (await h.pool.query<{ id: string }>('SELECT id FROM recipient_steps WHERE cascade_id = $1', [cascadeId])).rows.map((row) => row.id);
    const [bulkIds, smallIds] = [await ids(bulk.result.id), await ids(small)];
    await waitFor(() => [...bulkIds, ...smallIds].every((id) => sender.received.some((step) => step.stepId === id)), { what: 'both cascades received', timeoutMs: 20_000 });
    await d.stop();
    await sender.stop();
    expect(bulkIds.filter((id) => sender.smallSubject.has(id))).toEqual([]);
    expect(smallIds.filter((id) => !sender.smallSubject.has(id))).toEqual([]);
    expect(smallIds).toHaveLength(10);
  });

  it('dispatches at most the in-flight bound of a channel (following its pace); the rest waits in PostgreSQL and goes out, once each, as results come back', async () => {
    const cascade = await startSmall('bounded', 'SMS', 400);
    let rounds = 0;
    // One claim loop: two claimers (loops or replicas) compute the room from what is committed, so two
    // claiming at the same instant may together go over the bound by a round's room (docs/operations.md).
    const d = await dispatcher({ batchSize: 100, inFlight: { max: 150, min: 128, targetMs: 250 }, loops: 1, onRound: () => void rounds++ });
    const count = async () =>
      (await h.pool.query<{ status: string; n: number }>('SELECT status, count(*)::int AS n FROM recipient_steps WHERE cascade_id = $1 GROUP BY status', [cascade])).rows.reduce(
        (m: Record<string, number>, r) => ({ ...m, [r.status]: r.n }),
        {},
      );
    // No sender answers: the channel looks stalled, so its bound falls to the minimum (128) — never over the maximum (150).
    await waitFor(async () => ((await count()).dispatched ?? 0) >= 128, { what: 'the minimum in flight' });
    const after = rounds;
    await waitFor(() => rounds >= after + 6, { what: 'more dispatch rounds' });
    const held = await count();
    expect(held.dispatched).toBeGreaterThanOrEqual(128);
    expect(held.dispatched).toBeLessThanOrEqual(150);
    expect(held.dispatched + held.scheduled).toBe(400);
    const later = rounds;
    await waitFor(() => rounds >= later + 6, { what: 'more dispatch rounds' });
    expect(await count()).toEqual(held);
    const sender = await startScriptedSender(h.tb.bus, ['SMS']);
    await waitFor(async () => (await count()).sent === 400, { what: 'every SMS sent', timeoutMs: 20_000 });
    await d.stop();
    await sender.stop();
    const bounded = sender.received.filter((s) => s.recipient?.email.startsWith('bounded-') || s.recipient?.phone.startsWith('+7900100'));
    expect(bounded).toHaveLength(400);
    expect(new Set(bounded.map((s) => s.stepId)).size).toBe(400);
  });
  it('a round the bound cut does not go again at once: with no results back, the next one waits for the room poll (a round at once finds no room)', async () => {
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status IN ('scheduled', 'dispatched')`);
    // Seeded, not started: this test's steps must not take from the organization's recipient budget.
    const cascade = await seedBulkDue(h.pool, OTHER_ORG, 300);
    const rounds: Array<{ at: number; dispatched: number }> = [];
    const published: number[] = [];
    let running: RunningDispatcher | undefined;
    // 100 a round, 128 in flight at most; no sender answers, so the bound holds after 100 + 28.
    const d = await dispatcher({
      batchSize: 100, inFlight: { max: 128, min: 128, targetMs: 250 }, loops: 1,
      onRound: () => void rounds.push({ at: Date.now(), dispatched: running?.dispatchedCount ?? 0 }),
      afterPublish: async () => void published.push(Date.now()),
    });
    running = d;
    await waitFor(() => rounds.some((round) => round.dispatched === 128), { what: 'the round after the one the bound cut' });
    await d.stop();
    const { rows } = await h.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM recipient_steps WHERE cascade_id = $1 AND status = 'dispatched'`, [cascade]);
    expect(rows[0].n).toBe(128);
    // The cut round published its 28 (the second publish); before, the next round began as soon as it had
    // committed, found no room and only then waited.
    const next = rounds.find((round) => round.dispatched === 128)!;
    expect(published).toHaveLength(2);
    expect(next.at - published[1]).toBeGreaterThanOrEqual(90);
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status IN ('scheduled', 'dispatched')`);
  });

  it('a claim adds at most the bound\'s minimum to a channel, with nothing in flight too: steps claimed at one instant have one age, which tells nothing of the pace', async () => {
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status IN ('scheduled', 'dispatched')`);
    await seedBulkDue(h.pool, OTHER_ORG, 1_000);
    for (const fair of [true, false]) {
      const client = await h.pool.connect();
      try {
        await client.query('BEGIN');
        const claim = await claimDueSteps(client, { limit: 500, inFlight: { max: 1000, min: 128, targetMs: 100 }, fair });
        await client.query('ROLLBACK');
        // Before, the whole batch (500): two claim loops put 1 000 steps in flight at once, and the next
        // organization's step waited behind all of them.
        expect({ fair, claimed: claim.claimed.length, limited: claim.limited }).toEqual({ fair, claimed: 128, limited: true });
      } finally {
        client.release();
      }
    }
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status = 'scheduled'`);
  });

  it("at or over a channel's bound, small requests' steps are claimed past it in their own lane of the headroom; bulk ones wait for room", async () => {
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status IN ('scheduled', 'dispatched')`);
    // Another organization's bulk: 200 in flight, over the bound of 150 (min = max, whatever the pace), as
    // while a busy scheduler applies results late; 100 more due.
    const bulk = await seedBulkDue(h.pool, OTHER_ORG, 300);
    await h.pool.query(
      `UPDATE recipient_steps SET status = 'dispatched', dispatched_at = now() WHERE id IN (SELECT id FROM recipient_steps WHERE cascade_id = $1 ORDER BY due_at LIMIT 200)`,
      [bulk],
    );
    // Orders of this organization: five small requests of 8, 40 steps due now.
    const orders: string[] = [];
    for (let i = 0; i < 5; i++) orders.push(await startSmall(`order-${i}`, 'EMAIL', 8));
    const claimWith = async (smallHeadroom: number) => {
      const client = await h.pool.connect();
      try {
        await client.query('BEGIN');
        const claim = await claimDueSteps(client, { limit: 500, inFlight: { max: 150, min: 150, targetMs: 100, smallHeadroom }, fair: true });
        const { rows } = await client.query<{ organization_id: string; bulk: boolean }>('SELECT organization_id, bulk FROM recipient_steps WHERE id = ANY($1::uuid[])', [claim.claimed.map((c) => c.stepId)]);
        await client.query('ROLLBACK');
        return { claimed: claim.claimed.length, small: rows.filter((r) => !r.bulk && r.organization_id === ORG).length, limited: claim.limited };
      } finally {
        client.release();
      }
    };
    // Before, nothing: an order waited until the other organization's bulk drained below the bound.
    expect(await claimWith(32)).toEqual({ claimed: 32, small: 32, limited: true });
    expect(await claimWith(0)).toEqual({ claimed: 0, small: 0, limited: true });
    // The lane bounds them too: with 30 small steps in flight, 2 more go.
    await h.pool.query(
      `UPDATE recipient_steps SET status = 'dispatched', dispatched_at = now() WHERE id IN (SELECT id FROM recipient_steps WHERE cascade_id = ANY($1::uuid[]) ORDER BY due_at LIMIT 30)`,
      [orders],
    );
    expect(await claimWith(32)).toEqual({ claimed: 2, small: 2, limited: true });
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status IN ('scheduled', 'dispatched')`);
  });

  it("a process's claim loops leave out each other's claims not yet committed, so together they stay within the bound", async () => {
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status IN ('scheduled', 'dispatched')`);
    const cascade = await startSmall('two-loops', 'SMS', 400);
    let rounds = 0;
    let holding = false;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // The first round to publish holds its transaction open (its steps claimed, not committed) while the
    // other loop goes on claiming. No sender answers, so nothing in flight ever comes back.
    const d = await dispatcher({
      batchSize: 100, inFlight: { max: 150, min: 128, targetMs: 250 }, loops: 2, onRound: () => void rounds++,
      afterPublish: async () => {
        if (holding) return;
        holding = true;
        await released;
      },
    });
    await waitFor(() => holding, { what: 'a round holding its claim uncommitted' });
    const at = rounds;
    await waitFor(() => rounds >= at + 3, { what: "the other loop's rounds" });
    release();
    const later = rounds;
    await waitFor(() => rounds >= later + 4, { what: 'more dispatch rounds' });
    await d.stop();
    const { rows } = await h.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM recipient_steps WHERE cascade_id = $1 AND status = 'dispatched'`, [cascade]);
    // Before, the other loop saw nothing in flight and took its own room: 200 in flight, then 250.
    expect(rows[0].n).toBeGreaterThanOrEqual(128);
    expect(rows[0].n).toBeLessThanOrEqual(150);
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status IN ('scheduled', 'dispatched')`);
  });

  it('with a long history of finished steps, the fair claim locks each candidate by its key, never walking a due index per step claimed', async () => {
    // A long history (steps sent a year ago) analyzed while nothing was due, then a backlog the statistics
    // have not seen yet: the planner believes almost no step is scheduled.
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status = 'scheduled'`);
    await seedBulkDue(h.pool, OTHER_ORG, 200_000, { status: 'sent' });
    await seedBulkDue(h.pool, OTHER_ORG, 5_000, { analyze: false });
    type PlanNode = { 'Relation Name'?: string; 'Index Name'?: string; 'Index Cond'?: string; Filter?: string; Plans?: PlanNode[] };
    const { text, values } = claimStatement({ limit: 500, inFlight: { max: 1000, min: 128, targetMs: 250 }, fair: true });
    const stepReads = async () => {
      const { rows } = await h.pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${text}`, values);
      const reads: PlanNode[] = [];
      const walk = (node: PlanNode) => {
        if (node['Relation Name'] === 'recipient_steps') reads.push(node);
        for (const child of node.Plans ?? []) walk(child);
      };
      walk(rows[0]['QUERY PLAN'][0].Plan);
      return reads;
    };
    // Whatever the statistics, each candidate is looked up by its key (one row) and its status checked on
    // the locked row — never found by walking a due index per candidate (the whole backlog per step).
    const locks = (await stepReads()).filter((node) => `${node['Index Cond'] ?? ''} ${node.Filter ?? ''}`.includes('fair.id'));
    expect(locks.map((node) => ({ index: node['Index Name'], cond: node['Index Cond'], filter: node.Filter }))).toEqual([{ index: 'recipient_steps_pkey', cond: '(id = fair.id)', filter: undefined }]);
    // The same once the statistics have seen the backlog.
    await h.pool.query('ANALYZE recipient_steps');
    const analyzed = (await stepReads()).filter((node) => `${node['Index Cond'] ?? ''} ${node.Filter ?? ''}`.includes('fair.id'));
    expect(analyzed.map((node) => node['Index Name'])).toEqual(['recipient_steps_pkey']);
  });

  it('the fair claim walks the dead entries of the steps dispatched since the last vacuum once, not again for each section it reads', async () => {
    // Autovacuum off for this table here: the dead entries must stay for the measurement.
    await h.pool.query('ALTER TABLE recipient_steps SET (autovacuum_enabled = false)');
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status = 'scheduled'`);
    await h.pool.query('VACUUM recipient_steps');
    // 30 000 steps of one queue dispatched since the last vacuum (their entries stay in the partial queue
    // index), then 50 still due behind them.
    await seedBulkDue(h.pool, OTHER_ORG, 30_000);
    await h.pool.query(`UPDATE recipient_steps SET status = 'dispatched', dispatched_at = now() WHERE status = 'scheduled'`);
    await seedBulkDue(h.pool, OTHER_ORG, 50);
    const blocksOf = (text: string, values: unknown[]) => claimBlocks(h.pool, text, values);
    // One walk of the dead prefix: the queue index's first live entry (its pages, and the heap's to see each entry dead).
    const firstLive = `SELECT organization_id FROM recipient_steps WHERE status = 'scheduled' ORDER BY organization_id, sent_channel, bulk, due_at LIMIT 1`;
    await blocksOf(firstLive, []);
    const walk = (await blocksOf(firstLive, [])).blocks;
    const { text, values } = claimStatement({ limit: 500, inFlight: null, fair: true });
    await blocksOf(text, values);
    const claim = await blocksOf(text, values);
    expect(claim.rows).toBe(50);
    // At least the dead entries' index pages (30 000 entries); with their heap pages when the entries are
    // not yet marked dead (a snapshot older than the update still open elsewhere).
    expect(walk).toBeGreaterThan(100);
    // Each claimed step costs its key's lookup and lock (about 4 blocks); beyond that, one walk. The old
    // statement walked it twice (the section probe, then the candidates' read from the queue's start).
    expect(claim.blocks - 4 * claim.rows).toBeLessThan(1.5 * walk);
    // Each section's candidates are read from the queue index, from the section's first live entry on.
    type PlanNode = { 'Index Name'?: string; 'Index Cond'?: string; Plans?: PlanNode[] };
    const { rows: [explained] } = await h.pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${text}`, values);
    const sectionReads: PlanNode[] = [];
    const visit = (node: PlanNode) => {
      if (/small_from|bulk_from/.test(node['Index Cond'] ?? '')) sectionReads.push(node);
      for (const child of node.Plans ?? []) visit(child);
    };
    visit(explained['QUERY PLAN'][0].Plan);
    expect(sectionReads.map((node) => node['Index Name'])).toEqual(['recipient_steps_due_by_queue', 'recipient_steps_due_by_queue']);
    await h.pool.query('ALTER TABLE recipient_steps RESET (autovacuum_enabled)');
  });

  it('the fair claim reads a section up to now, not on to its end: steps due in a month cost it nothing', async () => {
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status = 'scheduled'`);
    await h.pool.query('VACUUM recipient_steps');
    // 30 000 steps of one queue due in a month (over 100 pages of the queue index), 5 due now before them.
    await seedBulkDue(h.pool, OTHER_ORG, 30_000, { due: `now() + interval '30 days'` });
    await seedBulkDue(h.pool, OTHER_ORG, 5);
    await h.pool.query('VACUUM recipient_steps');
    const { text, values } = claimStatement({ limit: 500, inFlight: null, fair: true });
    await claimBlocks(h.pool, text, values);
    const claim = await claimBlocks(h.pool, text, values);
    expect(claim.rows).toBe(5);
    // Each claimed step costs its key's lookup and lock (about 4 blocks), the section probes a few. The
    // old bounds, row comparisons on (bulk, due_at), positioned the read but did not end it: it went on
    // through every future entry of the section (at 1 M future steps, ~8 000 blocks and 350–500 ms a
    // claim, which made bench/lateness.mjs's timers p99 259–304 ms).
    expect(claim.blocks - 4 * claim.rows).toBeLessThan(60);
  });

  it('a claim passes the in-flight entries of the steps sent since the last vacuum, not reading their rows again claim after claim', async () => {
    await h.pool.query('ALTER TABLE recipient_steps SET (autovacuum_enabled = false)');
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status IN ('scheduled', 'dispatched')`);
    await h.pool.query('VACUUM recipient_steps');
    // Statistics that count thousands of steps in flight among a history of sent ones (what ANALYZE saw on a
    // busy channel a while ago); 100 in flight now. Left to itself, the planner reads the in-flight index
    // with a bitmap scan, or the whole table.
    await seedBulkDue(h.pool, OTHER_ORG, 30_000, { status: 'sent', analyze: false });
    const earlier = await seedBulkDue(h.pool, OTHER_ORG, 3_000, { analyze: false });
    // (Dispatched in an order of their own: the dispatch times follow the rows' order on disk loosely, as claims interleave.)
    await h.pool.query(`UPDATE recipient_steps SET status = 'dispatched', dispatched_at = now() - random() * interval '1 minute' WHERE cascade_id = $1`, [earlier]);
    await h.pool.query('ANALYZE recipient_steps');
    await h.pool.query(`UPDATE recipient_steps SET status = 'sent' WHERE id IN (SELECT id FROM recipient_steps WHERE cascade_id = $1 ORDER BY id LIMIT 2900)`, [earlier]);
    // 30 000 steps dispatched and sent since the last vacuum: each left an entry in the in-flight index.
    const sent = await seedBulkDue(h.pool, OTHER_ORG, 30_000, { analyze: false });
    await h.pool.query(`UPDATE recipient_steps SET status = 'dispatched', dispatched_at = now() WHERE cascade_id = $1`, [sent]);
    await h.pool.query(`UPDATE recipient_steps SET status = 'sent' WHERE cascade_id = $1`, [sent]);
    await seedBulkDue(h.pool, OTHER_ORG, 50, { analyze: false });
    const claimHeapBlocks = () => claimTableBlocks(h.pool, { limit: 500, inFlight: { max: 5000, min: 1000, targetMs: 100, smallHeadroom: 32 }, fair: true });
    // The first claims read the sent steps' rows and mark their entries dead — once no transaction can
    // still see those rows (a loaded machine's slow round elsewhere may hold that back for a while): from
    // then on a claim reads its claimed steps' rows (a lock and a status check each), the 100 in flight and
    // a few probes' — not the pages of the 30 000 sent steps again (~500 more a claim here, thousands on a
    // busy day's table). Read with a bitmap scan, the entries are never marked and no claim gets there.
    const bound = 4 * 50 + 100 + 100;
    const claims: Array<{ claimed: number; blocks: number }> = [];
    await waitFor(async () => {
      const claim = await claimHeapBlocks();
      claims.push(claim);
      return claim.blocks < bound || undefined;
    }, { what: `a claim reading fewer than ${bound} blocks of the table`, timeoutMs: 20_000, intervalMs: 200 });
    expect(claims.every((claim) => claim.claimed === 50)).toBe(true);
    await h.pool.query('ALTER TABLE recipient_steps RESET (autovacuum_enabled)');
  });

  it('a claim is never compiled by JIT, whatever its connection says: its planner settings cost the sorts it cannot avoid past jit_above_cost', async () => {
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status IN ('scheduled', 'dispatched')`);
    await seedBulkDue(h.pool, OTHER_ORG, 200);
    const { text, values } = claimStatement({ limit: 50, inFlight: { max: 1000, min: 256, targetMs: 100, smallHeadroom: 32 }, fair: true });
    const client = await h.pool.connect();
    try {
      await client.query('BEGIN');
      // PostgreSQL's default, as on a pool other than the scheduler's own (which turns JIT off for the session).
      await client.query('SET LOCAL jit = on');
      for (const setting of CLAIM_PLANNER_SETTINGS.before) await client.query(setting);
      const { rows } = await client.query<{ 'QUERY PLAN': Array<{ JIT?: unknown; Plan: { 'Total Cost': number } }> }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values);
      const [explained] = rows[0]['QUERY PLAN'];
      // The sorts the claim cannot avoid cost it past jit_above_cost (100 000) under enable_sort = off…
      expect(explained.Plan['Total Cost']).toBeGreaterThan(100_000);
      // …and it ran without compiling (~500 ms for a 1 ms claim).
      expect(explained.JIT).toBeUndefined();
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status = 'scheduled'`);
  });

  it('statistics taken while no step was scheduled do not send the fair claim to the due index: it reads each section off the queue index, a room at a time', async () => {
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status IN ('scheduled', 'dispatched')`);
    await h.pool.query('VACUUM recipient_steps');
    // A history of sent steps analyzed while none was scheduled (an idle table between two sends, as
    // autovacuum leaves it): the statistics count next to no scheduled step. Then a bulk of 30 000 comes
    // due beside another organization's order. Read off the due index (its entries in due order, every
    // organization's), a section's room took every due step's row and a sort: 30 000 rows, ~35 ms a
    // claim, every claim of the send (bench/fairness.mjs at 100 000, A beside B ×0.56 of A alone).
    await seedBulkDue(h.pool, OTHER_ORG, 30_000, { status: 'sent', analyze: false });
    await h.pool.query('ANALYZE recipient_steps');
    await seedBulkDue(h.pool, OTHER_ORG, 30_000, { analyze: false });
    await seedBulkDue(h.pool, ORG, 1, { analyze: false });
    const measured = await claimTableBlocks(h.pool, { limit: 500, inFlight: { max: 1000, min: 256, targetMs: 100, smallHeadroom: 32 }, fair: true });
    expect(measured.claimed).toBeGreaterThan(100);
    // Each claimed step costs its key's lookup and lock (a few blocks), the probes and the in-flight read a few more.
    expect(measured.blocks).toBeLessThan(5 * measured.claimed + 200);
    await h.pool.query(`UPDATE recipient_steps SET status = 'skipped' WHERE status = 'scheduled'`);
  });
});
