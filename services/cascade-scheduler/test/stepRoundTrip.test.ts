import { busV1 } from '@rrs/proto';
import { createPool, type Pool } from '@rrs/runtime';
import { SinkOutbox } from '@rrs/sender-kit';
import { startEmailSender } from '@rrs/channel-email';
import { createTestBus, createTestDatabase, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { publishDueStep, startScheduler, SCHEMA } from '../src';

/** A step published by the scheduler reaches a sender over the bus, and its result comes back. */
describe.each(['memory', 'jetstream'] as const)('step round trip on the %s bus', (kind) => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  const ctx = testContext(`roundtrip-${kind}`);
  const outbox = new SinkOutbox();
  const results: busV1.StepResult[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus(kind);
    await tb.bus.ensureStreams();
    await startScheduler({ databaseUrl: db.url, natsUrl: 'nats://unused', busPrefix: tb.prefix, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx, {
      bus: tb.bus,
      onStepResult: async (r) => {
        results.push(r);
      },
    });
    await startEmailSender({ natsUrl: 'nats://unused', busPrefix: tb.prefix, concurrency: 4 }, ctx, { bus: tb.bus, outbox });
    pool = createPool({ url: db.url, schema: SCHEMA });
  });
  afterAll(async () => {
    await pool.end();
    await ctx.stop();
    await tb.cleanup();
    await db.drop();
  });

  const step = (id: string): busV1.StepDue => ({
    stepId: id,
    attemptId: `${id}:1`,
    attempt: 1,
    organizationId: '0190e0e0-0000-7000-8000-000000000001',
    cascadeId: 'c1',
    recipientId: 'r1',
    channel: 'EMAIL',
    recipient: { name: 'Anna', email: 'anna@example.com', phone: '' },
    location: { id: 'l1', name: 'Coffee on Tverskaya', address: '', city: '' },
    template: { subject: 'How was {{location}}?', body: 'Hi {{name}}, rate us: {{link}}' },
    reviewUrl: 'http://localhost:8080/r/tok1',
    unsubscribeUrl: 'http://localhost:8080/u/tok1',
    locale: 'en',
    dueAt: new Date(),
    dispatchedAt: new Date(),
  });

  it('delivers the step to the email sender and records its SENT result', async () => {
    const first = await publishDueStep(tb.bus, step('s1'));
    expect(first.duplicate).toBe(false);
    const row = await waitFor(async () => (await pool.query('SELECT step_id, outcome, channel FROM step_results WHERE attempt_id = $1', ['s1:1'])).rows[0], { what: 'step result row' });
    expect(row).toEqual({ step_id: 's1', outcome: 'STEP_OUTCOME_SENT', channel: 'EMAIL' });
    expect(outbox.list().filter((m) => m.stepId === 's1')).toEqual([
      expect.objectContaining({ channel: 'EMAIL', to: 'anna@example.com', subject: 'How was Coffee on Tverskaya?', text: 'Hi Anna, rate us: http://localhost:8080/r/tok1' }),
    ]);
    expect(results.map((r) => r.stepId)).toContain('s1');
  });

  it('drops a re-published attempt, so the message is not sent twice', async () => {
    await publishDueStep(tb.bus, step('s2'));
    const again = await publishDueStep(tb.bus, step('s2'));
    expect(again.duplicate).toBe(true);
    await waitFor(async () => (await pool.query('SELECT 1 FROM step_results WHERE attempt_id = $1', ['s2:1'])).rowCount === 1, { what: 's2 result' });
    // s3 is published after s2: once its result is in, anything left of s2 would have been delivered too.
    await publishDueStep(tb.bus, step('s3'));
    await waitFor(async () => (await pool.query('SELECT 1 FROM step_results WHERE attempt_id = $1', ['s3:1'])).rowCount === 1, { what: 's3 result' });
    expect(outbox.list().filter((m) => m.stepId === 's2')).toHaveLength(1);
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM step_results WHERE step_id = $1', ['s2']);
    expect(rows[0].n).toBe(1);
  });
});
