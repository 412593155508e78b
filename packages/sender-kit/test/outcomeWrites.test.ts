import { busV1, STEP_RESULT_BATCH_SUBJECT } from '@rrs/proto';
import { createPool, type Bus, type Pool, type Subscription } from '@rrs/runtime';
import { createTestBus, createTestDatabase, testContext, testLogger, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { openSendLog, RetryableSendError, SendLog, startSender, StepResultPublisher, type SendContext, type SendResult, type SendStep } from '../src';
import { collectResults, dueStep, publishStep } from './support/steps';

const Outcome = busV1.StepOutcome;
const SCHEMA = 'outcome_writes_test';
const ACK_WAIT_MS = 1_500;

/** What the pg driver throws for a backend terminated under it (the database restarting, an operator). */
const databaseGone = () => Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });

/** The real send log, with writes that fail while a test says so; it counts the claims it is asked for. */
class FlakySendLog extends SendLog {
  claims = 0;
  failClaimsUntil = 0;
  failCompletesUntil = 0;
  failDeadLetters = 0;
  failReleases = 0;

  override async claim(step: busV1.StepDue, leaseMs: number) {
    this.claims++;
    if (Date.now() < this.failClaimsUntil) throw databaseGone();
    return super.claim(step, leaseMs);
  }
  override async complete(stepId: string, result: SendResult) {
    if (Date.now() < this.failCompletesUntil) throw databaseGone();
    return super.complete(stepId, result);
  }
  override async failDeadLettered(step: busV1.StepDue, result: SendResult, reason: string, deliveries: number) {
    if (this.failDeadLetters-- > 0) throw databaseGone();
    return super.failDeadLettered(step, result, reason, deliveries);
  }
  /** Before the fix the sender wrote the dead letter with this; it fails the same way. */
  override async deadLetter(step: busV1.StepDue, reason: string, deliveries: number) {
    if (this.failDeadLetters-- > 0) throw databaseGone();
    return super.deadLetter(step, reason, deliveries);
  }
  override async release(stepId: string, options?: { maybeDelivered?: boolean }) {
    if (this.failReleases-- > 0) throw databaseGone();
    return super.release(stepId, options);
  }
}

/** The test bus, with result publishes failing while `failing` is set. */
function flakyResultsBus(bus: Bus): { bus: Bus; failing: { until: number } } {
  const failing = { until: 0 };
  const proxy = new Proxy(bus, {
    get(target, prop, receiver) {
      if (prop === 'publish') {
        return (subject: string, data: Uint8Array, opts?: unknown) => {
          if (subject === STEP_RESULT_BATCH_SUBJECT && Date.now() < failing.until) return Promise.reject(new Error('nats: connection closed'));
          return (target.publish as (s: string, d: Uint8Array, o?: unknown) => Promise<unknown>)(subject, data, opts);
        };
      }
      const value = Reflect.get(target, prop, receiver) as unknown;
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return { bus: proxy, failing };
}

describe('a write failing after the provider call (send log or result report)', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  const ctx = testContext('outcome-writes-test');
  let results: busV1.StepResult[];
  const subs: Subscription[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    await tb.bus.ensureStreams();
    pool = createPool({ url: db.url, schema: SCHEMA });
    await openSendLog({ databaseUrl: db.url, schema: SCHEMA, pool }, ctx);
    const collected = await collectResults(tb.bus);
    results = collected.results;
    ctx.lifecycle.onStop('results', () => collected.sub.drain());
  });
  afterAll(async () => {
    await Promise.all(subs.map((s) => s.drain()));
    await ctx.stop();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  const resultsFor = (stepId: string) => results.filter((r) => r.stepId === stepId);
  const rowOf = async (stepId: string) => (await pool.query('SELECT state, outcome, reason FROM send_log WHERE step_id = $1', [stepId])).rows[0];

  /** A provider that counts its calls by step and records the context of each. */
  function countingProvider(behaviour?: (call: number, ctx: SendContext) => SendResult | Error | undefined) {
    const calls: Array<{ stepId: string; resumed: boolean }> = [];
    const send: SendStep = async (step, sendContext) => {
      calls.push({ stepId: step.stepId, resumed: sendContext.resumed });
      const answer = behaviour?.(calls.length, sendContext) ?? { outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: `p-${step.stepId}` };
      if (answer instanceof Error) throw answer;
      return answer;
    };
    return { send, calls };
  }

  async function run(channel: string, sendLog: SendLog, send: SendStep, extra: Partial<Parameters<typeof startSender>[0]> = {}) {
    const sub = await startSender({ bus: tb.bus, channel, send, sendLog, logger: ctx.logger, ackWaitMs: ACK_WAIT_MS, baseBackoffMs: 50, maxBackoffMs: 200, maxDeliver: 5, ...extra });
    subs.push(sub);
    return sub;
  }

  it('never calls the provider again when recording its outcome fails: the step is held until the send log takes it', async () => {
    const sendLog = new FlakySendLog(pool);
    const provider = countingProvider();
    await run('HOLD_A', sendLog, provider.send);
    const step = dueStep('HOLD_A');
    // The database goes away just after the provider accepted, for twice the ack wait (and the lease).
    sendLog.failCompletesUntil = Date.now() + 60_000;
    await publishStep(tb.bus, step);
    await waitFor(() => provider.calls.length === 1, { what: 'the provider call' });
    sendLog.failCompletesUntil = Date.now() + 2 * ACK_WAIT_MS;
    // Meanwhile the scheduler publishes the step again as a new attempt: it waits for the held outcome.
    await publishStep(tb.bus, dueStep('HOLD_A', { ...step, attempt: 2, attemptId: `${step.stepId}:2` }));
    await waitFor(() => resultsFor(step.stepId).length === 2, { timeoutMs: 15_000, what: 'both attempts reported' });
    expect(provider.calls).toEqual([{ stepId: step.stepId, resumed: false }]);
    expect(resultsFor(step.stepId).map((r) => [r.attemptId, r.outcome])).toEqual([
      [`${step.stepId}:1`, Outcome.STEP_OUTCOME_SENT],
      [`${step.stepId}:2`, Outcome.STEP_OUTCOME_SENT],
    ]);
    expect(await rowOf(step.stepId)).toEqual({ state: 'done', outcome: 'STEP_OUTCOME_SENT', reason: null });
    // Held in progress, not redelivered: one claim per attempt, although the hold outlasted the ack wait.
    expect(sendLog.claims).toBe(2);
    await waitFor(async () => (await tb.bus.pending('STEPS', 'sender-hold_a')) === 0, { what: 'both messages acked' });
  });

  it('reports a recorded outcome once the bus takes it, without calling the provider again', async () => {
    const sendLog = new FlakySendLog(pool);
    const provider = countingProvider();
    const flaky = flakyResultsBus(tb.bus);
    flaky.failing.until = Date.now() + 2 * ACK_WAIT_MS;
    await run('HOLD_B', sendLog, provider.send, { results: new StepResultPublisher(flaky.bus) });
    const step = dueStep('HOLD_B');
    await publishStep(tb.bus, step);
    await waitFor(async () => (await rowOf(step.stepId))?.state === 'done', { what: 'the outcome recorded' });
    expect(resultsFor(step.stepId)).toHaveLength(0);
    await waitFor(() => resultsFor(step.stepId).length === 1, { timeoutMs: 15_000, what: 'the result reported' });
    expect(resultsFor(step.stepId)[0].outcome).toBe(Outcome.STEP_OUTCOME_SENT);
    expect(provider.calls).toHaveLength(1);
    expect(sendLog.claims).toBe(1);
  });

  it('a sender stopping while it cannot report hands the step back; the next one reports it from the send log', async () => {
    const sendLog = new FlakySendLog(pool);
    const provider = countingProvider();
    const flaky = flakyResultsBus(tb.bus);
    flaky.failing.until = Number.MAX_SAFE_INTEGER;
    const first = await startSender({ bus: tb.bus, channel: 'HOLD_C', send: provider.send, sendLog, results: new StepResultPublisher(flaky.bus), logger: ctx.logger, ackWaitMs: ACK_WAIT_MS, baseBackoffMs: 50, maxBackoffMs: 200, stopGraceMs: 300 });
    const step = dueStep('HOLD_C');
    await publishStep(tb.bus, step);
    await waitFor(async () => (await rowOf(step.stepId))?.state === 'done', { what: 'the outcome recorded' });
    const stopping = Date.now();
    await first.drain();
    expect(Date.now() - stopping).toBeLessThan(5_000);
    expect(resultsFor(step.stepId)).toHaveLength(0);
    await run('HOLD_C', sendLog, provider.send);
    await waitFor(() => resultsFor(step.stepId).length === 1, { timeoutMs: 15_000, what: 'the result reported by the next sender' });
    expect(resultsFor(step.stepId)[0].outcome).toBe(Outcome.STEP_OUTCOME_SENT);
    expect(provider.calls).toHaveLength(1);
  });

  it('reports FAILED max_deliveries and writes one dead letter even when those writes fail at first', async () => {
    const sendLog = new FlakySendLog(pool);
    const provider = countingProvider(() => new RetryableSendError('provider_unavailable', 'provider down'));
    sendLog.failDeadLetters = 3;
    await run('HOLD_D', sendLog, provider.send, { maxDeliver: 2 });
    const step = dueStep('HOLD_D');
    await publishStep(tb.bus, step);
    await waitFor(() => resultsFor(step.stepId).length === 1, { timeoutMs: 15_000, what: 'the FAILED result' });
    expect(resultsFor(step.stepId)[0]).toMatchObject({ outcome: Outcome.STEP_OUTCOME_FAILED, reason: 'max_deliveries' });
    expect(provider.calls).toHaveLength(2);
    expect(await rowOf(step.stepId)).toEqual({ state: 'done', outcome: 'STEP_OUTCOME_FAILED', reason: 'max_deliveries' });
    const letters = await pool.query('SELECT reason, deliveries FROM dead_letters WHERE step_id = $1', [step.stepId]);
    expect(letters.rows).toEqual([{ reason: 'provider_unavailable', deliveries: 2 }]);
  });

  it('retries a step whose release after a retryable failure was not written, once its lease ends, and sends it once', async () => {
    const sendLog = new FlakySendLog(pool);
    const provider = countingProvider((call) => (call === 1 ? new RetryableSendError('provider_rate_limited', '429') : undefined));
    sendLog.failReleases = 1;
    await run('HOLD_E', sendLog, provider.send);
    const step = dueStep('HOLD_E');
    await publishStep(tb.bus, step);
    await waitFor(() => resultsFor(step.stepId).length === 1, { timeoutMs: 15_000, what: 'the result' });
    expect(resultsFor(step.stepId)[0].outcome).toBe(Outcome.STEP_OUTCOME_SENT);
    // The row stayed `sending`, so the next try is made as resumed: the provider may be asked first.
    expect(provider.calls.map((c) => c.resumed)).toEqual([false, true]);
  });

  it('makes the next try "resumed" after a failure that does not prove the provider refused, and not after a refusal', async () => {
    const sendLog = new FlakySendLog(pool);
    const failFirst = (err: Error) => (call: number) => (call % 2 === 1 ? err : undefined);
    const noAnswer = countingProvider(failFirst(new RetryableSendError('provider_timeout', 'no answer within 10000 ms', { maybeDelivered: true })));
    const refused = countingProvider(failFirst(new RetryableSendError('provider_rate_limited', '429')));
    const thrown = countingProvider(failFirst(new Error('socket hang up')));
    await run('HOLD_F', sendLog, noAnswer.send);
    await run('HOLD_G', sendLog, refused.send);
    await run('HOLD_H', sendLog, thrown.send);
    const steps = [dueStep('HOLD_F'), dueStep('HOLD_G'), dueStep('HOLD_H')];
    for (const step of steps) await publishStep(tb.bus, step);
    await waitFor(() => steps.every((s) => resultsFor(s.stepId).length === 1), { timeoutMs: 15_000, what: 'three results' });
    expect(noAnswer.calls.map((c) => c.resumed)).toEqual([false, true]);
    expect(refused.calls.map((c) => c.resumed)).toEqual([false, false]);
    expect(thrown.calls.map((c) => c.resumed)).toEqual([false, true]);
  });

  it('logs a flood of identical failures as one line, then one count line per interval', async () => {
    const sendLog = new FlakySendLog(pool);
    const logger = testLogger('flood');
    const provider = countingProvider();
    sendLog.failClaimsUntil = Number.MAX_SAFE_INTEGER;
    const sub = await startSender({ bus: tb.bus, channel: 'FLOOD', send: provider.send, sendLog, logger, ackWaitMs: ACK_WAIT_MS, baseBackoffMs: 10, maxBackoffMs: 20, maxDeliver: 100, logIntervalMs: 500, concurrency: 16 });
    const steps = Array.from({ length: 40 }, () => dueStep('FLOOD'));
    const outageStarted = Date.now();
    for (const step of steps) await publishStep(tb.bus, step);
    await waitFor(() => sendLog.claims >= 200, { timeoutMs: 15_000, what: '200 failed claims' });
    await new Promise((r) => setTimeout(r, 1_100));
    sendLog.failClaimsUntil = 0;
    const outageMs = Date.now() - outageStarted;
    await waitFor(() => steps.every((s) => resultsFor(s.stepId).length === 1), { timeoutMs: 15_000, what: 'every step sent once the database is back' });
    await sub.drain();
    const failures = logger.lines.map((l) => JSON.parse(l) as { msg: string; err?: { stack: string }; repeated?: number }).filter((l) => l.msg === 'handling the step failed, will retry');
    expect(failures.filter((f) => f.err)).toHaveLength(1);
    expect(failures[0].err!.stack).toContain('terminating connection due to administrator command');
    // The full line, one count line per 500 ms interval of the outage, and the count flushed on stop.
    expect(failures.length).toBeLessThanOrEqual(2 + Math.ceil(outageMs / 500));
    const failedClaims = sendLog.claims - steps.length;
    expect(1 + failures.reduce((sum, f) => sum + (f.repeated ?? 0), 0)).toBe(failedClaims);
    expect(provider.calls).toHaveLength(steps.length);
  });
});
