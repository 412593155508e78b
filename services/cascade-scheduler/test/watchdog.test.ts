import { busV1, smallStepDurable, stepSubject, STEP_RESULT_BATCH_SUBJECT } from '@rrs/proto';
import { type Bus, type PublishAck } from '@rrs/runtime';
import { openSendLog, startSender, StepResultPublisher } from '@rrs/sender-kit';
import { testContext, waitFor } from '@rrs/testkit';
import { claimTimedOutSteps } from '../src/sql/dueSteps';
import { LOCATION, ORG, recipientsInput, startHarness, startScriptedSender, type Harness } from './harness';

/** The watchdog with the fast clock: a flow minute is 20 ms, a result is awaited 10 minutes (200 ms). */
describe('result watchdog (Postgres + JetStream, fast clock)', () => {
  let h: Harness;
  const ctx = testContext('watchdog-senders');

  beforeAll(async () => {
    h = await startHarness({ minuteMs: 20, config: { stepResultTimeoutMinutes: 10, stepResultMaxAttempts: 3 } });
  });
  afterAll(async () => {
    await ctx.stop();
    await h.close();
  });

  const stepRows = async (cascadeId: string) =>
    (await h.pool.query<{ step_order: number; status: string; attempt: number; reason: string | null; result_timeouts: number; sent_at: Date | null }>(
      'SELECT step_order, status, attempt, reason, result_timeouts, sent_at FROM recipient_steps WHERE cascade_id = $1 ORDER BY step_order',
      [cascadeId],
    )).rows;

  it('redispatches a step whose result was lost; the sender reports it again from its send log and never sends twice', async () => {
    // The first result the sender publishes is lost on the way.
    let dropped = 0;
    const lossy = new Proxy(h.tb.bus, {
      get(target, prop, receiver) {
        if (prop !== 'publish') return Reflect.get(target, prop, receiver);
        return async (subject: string, data: Uint8Array, options?: { msgId?: string }): Promise<PublishAck> => {
          if (subject === STEP_RESULT_BATCH_SUBJECT && dropped === 0) {
            dropped++;
            return { stream: 'STEPS', seq: 0, duplicate: false };
          }
          return target.publish(subject, data, options);
        };
      },
    }) as Bus;
    const sent: busV1.StepDue[] = [];
    const { log } = await openSendLog({ databaseUrl: h.db.url, schema: 'sender_email' }, ctx);
    const sub = await startSender({
      bus: lossy, channel: 'EMAIL', logger: ctx.logger, sendLog: log, ackWaitMs: 5_000,
      send: async (step) => {
        sent.push(step);
        return { outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, providerMessageId: `p-${sent.length}` };
      },
    });
    ctx.lifecycle.onStop('email sender', () => sub.drain());

    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: 'lost', flowId: '', channel: 'EMAIL', externalId: 'lost-1',
      recipients: recipientsInput(1, () => ({ email: 'lost@example.com' })),
    });
    const steps = await waitFor(async () => {
      const rows = await stepRows(result.id);
      return rows[0].status === 'sent' ? rows : undefined;
    }, { what: 'step sent after the watchdog redispatched it', timeoutMs: 10_000 });
    expect(dropped).toBe(1);
    expect(steps[0]).toMatchObject({ status: 'sent', attempt: 2, result_timeouts: 1 });
    expect(sent).toHaveLength(1);
    expect(sent[0].attemptId).toMatch(/:1$/);
    const { rows: results } = await h.pool.query<{ attempt_id: string }>('SELECT attempt_id FROM step_results WHERE step_id = $1', [sent[0].stepId]);
    expect(results.map((r) => r.attempt_id)).toEqual([`${sent[0].stepId}:2`]);
    const c = await h.scheduler.cascades.get(ORG, result.id);
    expect(c.recipients[0]).toMatchObject({ status: 'finished', finishReason: 'exhausted' });
  });

  it('fails a step that never gets a result with no_result after 3 attempts, and the recipient moves on to the next step', async () => {
    const silent: busV1.StepDue[] = [];
    const sms = await h.tb.bus.consume({ stream: 'STEPS', durable: 'test-silent-sms', filterSubject: stepSubject('SMS', { small: true }), concurrency: 8 }, async (msg) => {
      silent.push(busV1.StepDue.decode(msg.data));
      msg.ack();
    });
    ctx.lifecycle.onStop('silent sms', () => sms.drain());
    const max = await startScriptedSender(h.tb.bus, ['MAX']);
    ctx.lifecycle.onStop('max sender', () => max.stop());
    const flow = await h.scheduler.flows.create({
      organizationId: ORG, name: 'sms-then-max', isDefault: false,
      steps: [{ channel: 'SMS', delayMinutes: 0 }, { channel: 'MAX', delayMinutes: 5 }],
    });
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: 'silent', flowId: flow.id, channel: '', externalId: 'silent-1',
      recipients: recipientsInput(1, () => ({ phone: '+79001112233' })),
    });
    const cascade = await waitFor(async () => {
      const got = await h.scheduler.cascades.get(ORG, result.id);
      return got.status === 'finished' ? got : undefined;
    }, { what: 'cascade finished', timeoutMs: 15_000 });
    expect(silent.map((s) => s.attemptId)).toEqual([1, 2, 3].map((n) => `${silent[0].stepId}:${n}`));
    expect(new Set(silent.map((s) => s.stepId)).size).toBe(1);
    const steps = await stepRows(result.id);
    expect(steps[0]).toMatchObject({ status: 'failed', reason: 'no_result', attempt: 3, result_timeouts: 3, sent_at: null });
    expect(steps[1]).toMatchObject({ status: 'sent', attempt: 1 });
    expect(cascade.recipients[0]).toMatchObject({ status: 'finished', finishReason: 'exhausted' });
    expect(cascade.recipients[0].steps[0]).toMatchObject({ status: 'failed', reason: 'no_result' });
    expect(max.received).toHaveLength(1);
  });
  it("never redispatches because of a backlog: while the channel's sender still holds steps, none of them times out", async () => {
    // A sender that has taken the steps (the small requests' consumer every replica of the TELEGRAM sender shares) but is slow to finish.
    let release!: () => void;
    const slow = new Promise<void>((resolve) => (release = resolve));
    const taken: busV1.StepDue[] = [];
    const results = new StepResultPublisher(h.tb.bus);
    const sub = await h.tb.bus.consume({ stream: 'STEPS', durable: smallStepDurable('TELEGRAM'), filterSubject: stepSubject('TELEGRAM', { small: true }), concurrency: 8, ackWaitMs: 60_000 }, async (msg) => {
      const step = busV1.StepDue.decode(msg.data);
      taken.push(step);
      await slow;
      await results.publish(step, { outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, reason: '', parts: 1 });
      msg.ack();
    });
    ctx.lifecycle.onStop('slow telegram sender', () => sub.drain());
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: 'backlog', flowId: '', channel: 'TELEGRAM', externalId: 'backlog-1',
      recipients: recipientsInput(3, (i) => ({ phone: `+7900555000${i}` })),
    });
    await waitFor(() => taken.length === 3, { what: 'the sender took the steps' });
    // Five result timeouts (10 flow minutes each) pass while the sender holds them.
    await new Promise((resolve) => setTimeout(resolve, 5 * 10 * 20));
    expect((await stepRows(result.id)).map((step) => [step.status, step.attempt, step.result_timeouts])).toEqual([['dispatched', 1, 0], ['dispatched', 1, 0], ['dispatched', 1, 0]]);
    // A step whose result the scheduler holds (received, not applied yet) is never claimed as timed out.
    const ids = (await h.pool.query<{ id: string }>('SELECT id FROM recipient_steps WHERE cascade_id = $1 ORDER BY id', [result.id])).rows.map((row) => row.id);
    const client = await h.pool.connect();
    try {
      await client.query('BEGIN');
      const later = new Date(Date.now() + 3_600_000);
      expect(await claimTimedOutSteps(client, later, 10, ['TELEGRAM'], ids)).toEqual([]);
      expect((await claimTimedOutSteps(client, later, 10, ['TELEGRAM'], ids.slice(1))).map((step) => step.stepId)).toEqual([ids[0]]);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    release();
    await waitFor(async () => (await stepRows(result.id)).every((step) => step.status === 'sent'), { what: 'the held steps reported sent' });
    expect((await stepRows(result.id)).map((step) => [step.attempt, step.result_timeouts])).toEqual([[1, 0], [1, 0], [1, 0]]);
    expect(taken).toHaveLength(3);
  });
});
