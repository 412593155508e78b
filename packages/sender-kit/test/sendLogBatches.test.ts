import { busV1 } from '@rrs/proto';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestDatabase, testContext, type TestDatabase } from '@rrs/testkit';
import { openSendLog, SendLog, type Claim } from '../src';
import { dueStep } from './support/steps';

const Outcome = busV1.StepOutcome;
const SCHEMA = 'send_log_batches_test';

/** The send log on a pool whose statements are counted. */
function countedLog(pool: Pool): { log: SendLog; statements: () => number } {
  let statements = 0;
  const counted = new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop === 'query') {
        return (...args: unknown[]) => {
          statements++;
          return (target.query as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { log: new SendLog(counted), statements: () => statements };
}

describe('the send log writes claims and completions in batches', () => {
  let db: TestDatabase;
  let pool: Pool;
  const ctx = testContext('send-log-batches-test');

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: SCHEMA });
    await openSendLog({ databaseUrl: db.url, schema: SCHEMA, pool }, ctx);
  });
  afterAll(async () => {
    await ctx.stop();
    await pool.end();
    await db.drop();
  });

  it('claims the steps asked for together with one statement, and records their outcomes with one more', async () => {
    const { log, statements } = countedLog(pool);
    const steps = Array.from({ length: 40 }, () => dueStep('BATCH_A'));
    const claims = await Promise.all(steps.map((step) => log.claim(step, 30_000)));
    expect(claims.every((claim) => claim.kind === 'send' && !claim.resumed && claim.maybeWith.length === 0)).toBe(true);
    expect(statements()).toBe(1);
    await Promise.all(steps.map((step, i) => log.complete(step.stepId, { outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: `p-${i}`, parts: 1, provider: 'sink' })));
    expect(statements()).toBe(2);
    const { rows } = await pool.query<{ state: string; n: number }>(`SELECT state, count(*)::int AS n FROM send_log WHERE channel = 'BATCH_A' GROUP BY state`);
    expect(rows).toEqual([{ state: 'done', n: 40 }]);
    // Each step's own outcome, not a neighbour's.
    const again = await Promise.all(steps.map((step) => log.claim(step, 30_000)));
    again.forEach((claim, i) => expect(claim).toEqual({ kind: 'done', result: { outcome: Outcome.STEP_OUTCOME_SENT, reason: undefined, providerMessageId: `p-${i}`, parts: 1, provider: 'sink' } }));
  });

  it('answers each step of a mixed batch by its own row: done, leased, lease ended, retry, new, and a step asked twice', async () => {
    const { log, statements } = countedLog(pool);
    const [done, leased, expired, retry, fresh] = Array.from({ length: 5 }, () => dueStep('BATCH_B'));
    await log.claim(done, 30_000);
    await log.complete(done.stepId, { outcome: Outcome.STEP_OUTCOME_FAILED, reason: 'provider_rejected' });
    await log.claim(leased, 30_000);
    await log.claim(expired, 30_000);
    await log.release(expired.stepId, { maybeDelivered: true, provider: 'smsc' });
    await log.claim(retry, 30_000);
    await log.release(retry.stepId);
    const before = statements();

    const asked = [done, leased, expired, retry, fresh, fresh];
    const claims = await Promise.all(asked.map((step) => log.claim(step, 30_000)));
    const [doneClaim, leasedClaim, expiredClaim, retryClaim, freshClaim, freshAgain] = claims;
    expect(doneClaim).toEqual({ kind: 'done', result: { outcome: Outcome.STEP_OUTCOME_FAILED, reason: 'provider_rejected', providerMessageId: undefined, parts: 0, provider: undefined } });
    expect(leasedClaim).toMatchObject({ kind: 'busy' });
    expect((leasedClaim as Extract<Claim, { kind: 'busy' }>).retryInMs).toBeGreaterThan(20_000);
    expect(expiredClaim).toEqual({ kind: 'send', resumed: true, maybeWith: ['smsc'] });
    expect(retryClaim).toEqual({ kind: 'send', resumed: false, maybeWith: [] });
    expect(freshClaim).toEqual({ kind: 'send', resumed: false, maybeWith: [] });
    // The same step twice never shares a statement: the second finds the first one's live lease.
    expect(freshAgain).toMatchObject({ kind: 'busy' });
    // The batch (a claim, and a read of the rows it could not claim), then the repeated step's own batch.
    expect(statements() - before).toBe(4);
    const attempts = await pool.query<{ step_id: string; attempts: number }>('SELECT step_id, attempts FROM send_log WHERE step_id = ANY($1)', [[expired.stepId, retry.stepId, fresh.stepId, leased.stepId]]);
    expect(Object.fromEntries(attempts.rows.map((row) => [row.step_id, row.attempts]))).toEqual({ [expired.stepId]: 2, [retry.stepId]: 2, [fresh.stepId]: 1, [leased.stepId]: 1 });
  });

  it('fails every claim of a batch whose statement fails, and sends none of them', async () => {
    let failing = true;
    const flaky = new Proxy(pool, {
      get(target, prop, receiver) {
        if (prop === 'query') {
          return (...args: unknown[]) => (failing ? Promise.reject(new Error('connection terminated')) : (target.query as (...a: unknown[]) => unknown).apply(target, args));
        }
        const value = Reflect.get(target, prop, receiver) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const log = new SendLog(flaky);
    const steps = Array.from({ length: 5 }, () => dueStep('BATCH_C'));
    const outcomes = await Promise.allSettled(steps.map((step) => log.claim(step, 30_000)));
    expect(outcomes.every((outcome) => outcome.status === 'rejected')).toBe(true);
    const { rows } = await pool.query(`SELECT 1 FROM send_log WHERE channel = 'BATCH_C'`);
    expect(rows).toHaveLength(0);
    failing = false;
    const claims = await Promise.all(steps.map((step) => log.claim(step, 30_000)));
    expect(claims.every((claim) => claim.kind === 'send')).toBe(true);
  });
});

/*
 * A batch of completions touches ~100 rows of a send log that only grows. With PostgreSQL's default
 * random_page_cost the planner hashes the whole table for them (a seq scan per batch, its cost growing
 * with the table); the send log's own sessions run with runtime's SSD_PLANNER_SETTINGS and probe the
 * primary key.
 */
describe('the send log on its own pool probes its primary key for a batch', () => {
  const PLANNER_SCHEMA = 'send_log_planner_test';
  let db: TestDatabase;
  let ownPool: Pool;
  let defaultPool: Pool;
  const ctx = testContext('send-log-planner-test');

  beforeAll(async () => {
    db = await createTestDatabase();
    ownPool = (await openSendLog({ databaseUrl: db.url, schema: PLANNER_SCHEMA }, ctx)).pool;
    defaultPool = createPool({ url: db.url, schema: PLANNER_SCHEMA });
    // A send log the size the all-in-one's reaches within a few seconds of a 10 000-recipient request:
    // rows claimed, then completed (each completion leaves the claimed version behind until vacuum).
    await ownPool.query(
      `INSERT INTO send_log (step_id, attempt_id, channel, organization_id, state, lease_until)
       SELECT gen_random_uuid()::text, gen_random_uuid()::text, 'EMAIL', gen_random_uuid()::text, 'sending', now() FROM generate_series(1, 8000)`,
    );
    await ownPool.query(
      `UPDATE send_log SET state = 'done', outcome = 'STEP_OUTCOME_SENT', provider_message_id = 'sink-' || step_id, parts = 1,
         provider = 'sink', address = 'customer-' || left(step_id, 8) || '@example.com', updated_at = now()`,
    );
  });
  afterAll(async () => {
    await ctx.stop();
    await defaultPool.end();
    await db.drop();
  });

  const completionPlan = async (pool: Pool): Promise<string> => {
    const ids = (await pool.query<{ step_id: string }>('SELECT step_id FROM send_log ORDER BY step_id LIMIT 128')).rows.map((row) => row.step_id);
    const { rows } = await pool.query<{ 'QUERY PLAN': string }>(
      `EXPLAIN UPDATE send_log SET state = 'done', outcome = u.outcome, updated_at = now()
       FROM unnest($1::text[], $2::text[]) AS u(step_id, outcome) WHERE send_log.step_id = u.step_id`,
      [ids, ids.map(() => 'STEP_OUTCOME_SENT')],
    );
    return rows.map((row) => row['QUERY PLAN']).join('\n');
  };

  it('runs with random_page_cost 1.1, where a session with the default hashes the whole table', async () => {
    expect((await ownPool.query<{ random_page_cost: string }>('SHOW random_page_cost')).rows[0].random_page_cost).toBe('1.1');
    const own = await completionPlan(ownPool);
    expect(own).toContain('Index Scan using send_log_pkey');
    expect(own).not.toContain('Seq Scan on send_log');
    expect(await completionPlan(defaultPool)).toContain('Seq Scan on send_log');
  });
});
