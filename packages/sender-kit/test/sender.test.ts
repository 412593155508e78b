import { busV1 } from '@rrs/proto';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { openSendLog, PermanentSendError, RetryableSendError, retryDelayMs, startSender, type SendLog, type SendStep } from '../src';
import { collectResults, dueStep, publishStep } from './support/steps';

const Outcome = busV1.StepOutcome;

describe('startSender over JetStream with a Postgres send log', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let sendLog: SendLog;
  const ctx = testContext('sender-test');
  let results: busV1.StepResult[];

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    await tb.bus.ensureStreams();
    pool = createPool({ url: db.url, schema: 'sender_test' });
    sendLog = (await openSendLog({ databaseUrl: db.url, schema: 'sender_test', pool }, ctx)).log;
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

  const resultsFor = (stepId: string) => results.filter((r) => r.stepId === stepId);

  async function run(channel: string, send: SendStep, extra: { maxDeliver?: number } = {}) {
    const sub = await startSender({ bus: tb.bus, channel, send, sendLog, logger: ctx.logger, maxDeliver: extra.maxDeliver ?? 5, ackWaitMs: 5_000, baseBackoffMs: 50, maxBackoffMs: 200 });
    return sub;
  }

  it('sends a due step once, records it, and publishes SENT', async () => {
    const calls: string[] = [];
    const sub = await run('alpha', async (step, sendContext) => {
      calls.push(sendContext.idempotencyKey);
      return { outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: `p-${step.stepId}` };
    });
    const step = dueStep('ALPHA');
    await publishStep(tb.bus, step);
    const [result] = await waitFor(() => resultsFor(step.stepId).length === 1 && resultsFor(step.stepId));
    expect(result).toMatchObject({ stepId: step.stepId, attemptId: step.attemptId, channel: 'ALPHA', outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: `p-${step.stepId}`, organizationId: 'org-1' });
    expect(calls).toEqual([step.stepId]);
    const row = await pool.query('SELECT state, outcome FROM send_log WHERE step_id = $1', [step.stepId]);
    expect(row.rows).toEqual([{ state: 'done', outcome: 'STEP_OUTCOME_SENT' }]);
    await sub.drain();
  });

  it("takes a small request's step while its window is full of bulk steps in progress (each from its own consumer), and tells the provider call it goes ahead", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const started: string[] = [];
    const ahead = new Map<string, boolean | undefined>();
    const bulkIds = new Set<string>();
    const sub = await startSender({
      bus: tb.bus, channel: 'kappa', sendLog, logger: ctx.logger, concurrency: 2, ackWaitMs: 5_000,
      send: async (step, sendContext) => {
        started.push(step.stepId);
        ahead.set(step.stepId, sendContext.ahead);
        if (bulkIds.has(step.stepId)) await held;
        return { outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: `p-${step.stepId}` };
      },
    });
    try {
      const bulk = [dueStep('KAPPA'), dueStep('KAPPA'), dueStep('KAPPA')];
      for (const step of bulk) bulkIds.add(step.stepId);
      for (const step of bulk) await publishStep(tb.bus, step);
      await waitFor(() => started.length === 2, { what: 'the bulk window full' });
      const small = dueStep('KAPPA');
      await publishStep(tb.bus, small, { small: true });
      await waitFor(() => resultsFor(small.stepId).length === 1, { what: "the small request's step sent" });
      // The window of bulk steps is still full, and the third bulk step still waits in the stream.
      expect(started.slice(0, 2).sort()).toEqual([bulk[0].stepId, bulk[1].stepId].sort());
      expect(started.slice(2)).toEqual([small.stepId]);
      release();
      await waitFor(() => bulk.every((step) => resultsFor(step.stepId).length === 1), { what: 'the bulk steps sent' });
      // The provider adapter is told which call is a small request's: it goes ahead in the adapter's queue.
      expect(ahead.get(small.stepId)).toBe(true);
      expect(bulk.map((step) => ahead.get(step.stepId))).toEqual([false, false, false]);
    } finally {
      release();
      await sub.drain();
    }
  });

  it("a small request's step published before any sender read its subject (a scheduler upgraded first) is sent once a sender starts", async () => {
    const small = dueStep('LAMBDA');
    await publishStep(tb.bus, small, { small: true });
    const sub = await run('lambda', async (step) => ({ outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: `p-${step.stepId}` }));
    try {
      await waitFor(() => resultsFor(small.stepId).length === 1, { what: 'the waiting step sent' });
      expect(resultsFor(small.stepId)[0]).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT });
    } finally {
      await sub.drain();
    }
  });

  it('never sends a redelivered step twice (same step, published again as a new attempt)', async () => {
    let calls = 0;
    const sub = await run('beta', async () => {
      calls += 1;
      return { outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: 'p-1' };
    });
    const first = dueStep('BETA');
    await publishStep(tb.bus, first);
    await waitFor(() => resultsFor(first.stepId).length === 1);
    const again = dueStep('BETA', { stepId: first.stepId, attempt: 2 });
    await publishStep(tb.bus, again);
    await waitFor(() => resultsFor(first.stepId).length === 2);
    expect(calls).toBe(1);
    // The outcome reported again is the recorded one.
    expect(resultsFor(first.stepId).map((r) => r.outcome)).toEqual([Outcome.STEP_OUTCOME_SENT, Outcome.STEP_OUTCOME_SENT]);
    await waitFor(async () => (await tb.bus.pending('STEPS', 'sender-beta')) === 0);
    await sub.drain();
  });

  it('naks a retryable failure with backoff honouring Retry-After, then sends', async () => {
    const seen: number[] = [];
    const sub = await run('gamma', async () => {
      seen.push(Date.now());
      if (seen.length === 1) throw new RetryableSendError('provider_rate_limited', '429', { retryAfterMs: 700 });
      return { outcome: Outcome.STEP_OUTCOME_SENT };
    });
    const step = dueStep('GAMMA');
    await publishStep(tb.bus, step);
    await waitFor(() => resultsFor(step.stepId).length === 1);
    expect(seen).toHaveLength(2);
    expect(seen[1] - seen[0]).toBeGreaterThanOrEqual(650);
    expect(resultsFor(step.stepId)[0].outcome).toBe(Outcome.STEP_OUTCOME_SENT);
    await sub.drain();
  });

  it('terminates a permanent failure with FAILED and its reason, without retrying', async () => {
    let calls = 0;
    const sub = await run('delta', async () => {
      calls += 1;
      throw new PermanentSendError('invalid_phone', 'provider says the number is malformed');
    });
    const step = dueStep('DELTA');
    await publishStep(tb.bus, step);
    const [result] = await waitFor(() => resultsFor(step.stepId).length === 1 && resultsFor(step.stepId));
    expect(result).toMatchObject({ outcome: Outcome.STEP_OUTCOME_FAILED, reason: 'invalid_phone' });
    await new Promise((res) => setTimeout(res, 300));
    expect(calls).toBe(1);
    expect(await tb.bus.pending('STEPS', 'sender-delta')).toBe(0);
    await sub.drain();
  });

  it('after the last delivery reports FAILED max_deliveries and writes a dead letter', async () => {
    let calls = 0;
    const sub = await run('epsilon', async () => {
      calls += 1;
      throw new Error('provider down');
    }, { maxDeliver: 3 });
    const step = dueStep('EPSILON');
    await publishStep(tb.bus, step);
    const [result] = await waitFor(() => resultsFor(step.stepId).length === 1 && resultsFor(step.stepId), { timeoutMs: 15_000 });
    expect(result).toMatchObject({ outcome: Outcome.STEP_OUTCOME_FAILED, reason: 'max_deliveries' });
    expect(calls).toBe(3);
    const dl = await pool.query('SELECT step_id, reason, deliveries, step FROM dead_letters WHERE step_id = $1', [step.stepId]);
    expect(dl.rows).toHaveLength(1);
    expect(dl.rows[0]).toMatchObject({ reason: 'sender_error', deliveries: 3 });
    expect(busV1.StepDue.decode(dl.rows[0].step).stepId).toBe(step.stepId);
    await sub.drain();
  });

  it('computes retry delays: exponential, capped, never below Retry-After', () => {
    expect(retryDelayMs(1, undefined, 1_000, 60_000)).toBe(1_000);
    expect(retryDelayMs(3, undefined, 1_000, 60_000)).toBe(4_000);
    expect(retryDelayMs(20, undefined, 1_000, 60_000)).toBe(60_000);
    expect(retryDelayMs(1, 30_000, 1_000, 60_000)).toBe(30_000);
  });
});
