import { busV1 } from '@rrs/proto';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, historyScans, testContext, testLogger, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { DEAD_LETTER_KEEP_DAYS, openSendLog, PRUNE_DEAD_LETTERS_SQL, PRUNE_SEND_LOG_SQL, pruneSendHistory, SEND_HISTORY_PRUNE_BATCH, SEND_LOG_KEEP_DAYS, startSender, type SendLog } from '../src';
import { collectResults, dueStep, publishStep } from './support/steps';

const Outcome = busV1.StepOutcome;
const SCHEMA = 'send_history_test';
const DAY_MS = 86_400_000;

/**
 * The senders' operational history is pruned by age (sendHistory.ts, docs/operations.md "Data
 * lifecycle"): send log rows past SEND_LOG_KEEP_DAYS and dead letters past DEAD_LETTER_KEEP_DAYS go,
 * younger ones stay and still stop a redelivered step from being sent twice; each prune reads by an index.
 */
describe('send history pruning', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let sendLog: SendLog;
  let results: busV1.StepResult[];
  const ctx = testContext('send-history-test');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    await tb.bus.ensureStreams();
    pool = createPool({ url: db.url, schema: SCHEMA });
    sendLog = (await openSendLog({ databaseUrl: db.url, schema: SCHEMA, pool }, ctx)).log;
    const collected = await collectResults(tb.bus);
    results = collected.results;
    ctx.lifecycle.onStop('results', () => collected.sub.drain());
  });
  afterAll(async () => {
    await ctx.stop();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  const resultsFor = (stepId: string) => results.filter((result) => result.stepId === stepId);
  const age = (table: 'send_log' | 'dead_letters', stepId: string, days: number) =>
    pool.query(`UPDATE ${table} SET created_at = now() - $2 * interval '1 day' WHERE step_id = $1`, [stepId, days]);
  const rows = async (stepId: string) =>
    (await pool.query(`SELECT (SELECT count(*)::int FROM send_log WHERE step_id = $1) AS send_log, (SELECT count(*)::int FROM dead_letters WHERE step_id = $1) AS dead_letters`, [stepId])).rows[0];

  it('deletes only send log rows and dead letters past their age; a redelivered step younger than that is still never sent twice', async () => {
    let calls = 0;
    const sub = await startSender({ bus: tb.bus, channel: 'prune', sendLog, logger: ctx.logger, maxDeliver: 5, ackWaitMs: 5_000, send: async (step) => {
      calls++;
      return { outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: `p-${step.stepId}` };
    } });
    const old = dueStep('PRUNE');
    const young = dueStep('PRUNE');
    for (const step of [old, young]) {
      await publishStep(tb.bus, step);
      await waitFor(() => resultsFor(step.stepId).length === 1, { what: 'step sent' });
      await sendLog.deadLetter(step, 'inspected', 1);
    }
    expect(calls).toBe(2);
    await age('send_log', old.stepId, SEND_LOG_KEEP_DAYS + 1);
    await age('dead_letters', old.stepId, DEAD_LETTER_KEEP_DAYS + 1);
    await age('send_log', young.stepId, SEND_LOG_KEEP_DAYS - 1);
    await age('dead_letters', young.stepId, DEAD_LETTER_KEEP_DAYS - 1);

    const logger = testLogger();
    expect(await pruneSendHistory({ pool, logger })).toEqual({ sendLog: 1, deadLetters: 1, more: false });
    expect(await rows(old.stepId)).toEqual({ send_log: 0, dead_letters: 0 });
    expect(await rows(young.stepId)).toEqual({ send_log: 1, dead_letters: 1 });
    expect(logger.lines.some((line) => line.includes('send history pruned') && line.includes('"sendLog":1'))).toBe(true);

    // The scheduler's watchdog dispatches the young step again (a new attempt, the same step id): its
    // recorded outcome is reported again and the provider is not called.
    await publishStep(tb.bus, dueStep('PRUNE', { stepId: young.stepId, attempt: 2 }));
    await waitFor(() => resultsFor(young.stepId).length === 2, { what: 'the outcome reported again' });
    expect(calls).toBe(2);
    expect(resultsFor(young.stepId).map((result) => result.outcome)).toEqual([Outcome.STEP_OUTCOME_SENT, Outcome.STEP_OUTCOME_SENT]);
    // Pruning again finds nothing more.
    expect(await pruneSendHistory({ pool, logger })).toEqual({ sendLog: 0, deadLetters: 0, more: false });
    await sub.drain();
  });

  it('goes in batches of the given size until none past the age is left', async () => {
    const steps = Array.from({ length: 5 }, () => dueStep('BATCHED'));
    for (const step of steps) await sendLog.claim(step, 30_000);
    await pool.query(`UPDATE send_log SET created_at = now() - interval '400 days' WHERE step_id = ANY($1::text[])`, [steps.map((step) => step.stepId)]);
    // A batch of 2, at most 20 a round: one round takes the five.
    expect(await pruneSendHistory({ pool, logger: testLogger(), batchSize: 2 })).toMatchObject({ sendLog: 5 });
    expect((await pool.query(`SELECT count(*)::int AS n FROM send_log WHERE step_id = ANY($1::text[])`, [steps.map((step) => step.stepId)])).rows[0].n).toBe(0);
  });

  it('reads the rows to prune by an index, never the whole table', async () => {
    await pool.query(`INSERT INTO send_log (step_id, attempt_id, channel, organization_id, state, lease_until, created_at)
                      SELECT 's-' || n, 's-' || n || ':1', 'EMAIL', 'org-1', 'done', now(), now() - n * interval '1 hour' FROM generate_series(1, 5000) n`);
    await pool.query(`INSERT INTO dead_letters (step_id, attempt_id, channel, reason, deliveries, step, created_at)
                      SELECT 's-' || n, 's-' || n || ':1', 'EMAIL', 'timeout', 10, '\\x00', now() - n * interval '1 hour' FROM generate_series(1, 5000) n`);
    await pool.query('ANALYZE send_log; ANALYZE dead_letters');
    // Each prune statement planned with sequential scans off: every read goes through an index.
    const statements = new Map<string, unknown[]>([PRUNE_SEND_LOG_SQL, PRUNE_DEAD_LETTERS_SQL].map((sql) => [sql, [SEND_LOG_KEEP_DAYS * DAY_MS, SEND_HISTORY_PRUNE_BATCH]]));
    expect(await historyScans(db.url, statements, ['send_log', 'dead_letters'], { searchPath: SCHEMA })).toEqual([]);
  });

  it('the send log is vacuumed by a count of changed rows, not by a fifth of the table (migration 0005)', async () => {
    const { rows } = await pool.query<{ reloptions: string[] }>(`SELECT reloptions FROM pg_class WHERE relnamespace = $1::regnamespace AND relname = 'send_log'`, [SCHEMA]);
    expect(rows[0].reloptions).toEqual(expect.arrayContaining(['autovacuum_vacuum_scale_factor=0', 'autovacuum_vacuum_threshold=50000']));
  });
});
