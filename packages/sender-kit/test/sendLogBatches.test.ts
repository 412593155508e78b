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
