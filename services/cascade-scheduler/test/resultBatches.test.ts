import { busV1, STEP_RESULT_BATCH_SUBJECT } from '@rrs/proto';
import type { Subscription } from '@rrs/runtime';
import { createTestBus, testLogger, waitFor, type TestBus } from '@rrs/testkit';
import { consumeStepResults } from '../src';
import { LOCATION, ORG, recipientsInput, startHarness, type Harness } from './harness';

describe('result batches are applied one at a time, unless one stalls (Postgres + JetStream)', () => {
  let h: Harness;
  let bus: TestBus;
  let sub: Subscription | undefined;

  beforeAll(async () => {
    h = await startHarness({ deps: { noDispatcher: true } });
    // Its own bus prefix, so the harness scheduler's own results consumer never sees these results.
    bus = await createTestBus('jetstream');
    await bus.bus.ensureStreams();
  });
  afterAll(async () => {
    await sub?.drain();
    await bus.cleanup();
    await h.close();
  });

  const sentResult = (stepId: string): busV1.StepResult => ({
    stepId, attemptId: `${stepId}:1`, channel: 'EMAIL', outcome: busV1.StepOutcome.STEP_OUTCOME_SENT,
    reason: '', providerMessageId: `p-${stepId}`, parts: 1, at: new Date(), organizationId: ORG, traceContext: {}, provider: '',
  });
  const publish = (stepId: string) =>
    bus.bus.publish(STEP_RESULT_BATCH_SUBJECT, busV1.StepResultBatch.encode({ results: [sentResult(stepId)] }).finish(), { msgId: `${stepId}:1:SENT` });
  const statusOf = async (stepId: string) => (await h.pool.query<{ status: string }>('SELECT status FROM recipient_steps WHERE id = $1', [stepId])).rows[0].status;

  it('applies a later result while an earlier batch waits for a recipient lock', async () => {
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: 'stalled batch', flowId: '', channel: 'EMAIL', externalId: 'stalled-1',
      recipients: recipientsInput(2, (k) => ({ email: `stalled-${k}@example.com` })),
    });
    const { rows } = await h.pool.query<{ id: string; recipient_id: string }>(
      `UPDATE recipient_steps SET status = 'dispatched', attempt = 1, dispatched_at = now() WHERE cascade_id = $1 RETURNING id, recipient_id`,
      [result.id],
    );
    const [locked, free] = rows;
    sub = await consumeStepResults(bus.bus, h.pool, testLogger(), { minuteMs: 50 });

    // Another transaction (a dispatcher round, say) holds the first recipient's row.
    const holder = await h.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM recipients WHERE id = $1 FOR UPDATE', [locked.recipient_id]);
      await publish(locked.id);
      await new Promise((resolve) => setTimeout(resolve, 50));
      await publish(free.id);
      await waitFor(async () => (await statusOf(free.id)) === 'sent', { what: 'the second result applied beside the stalled batch', timeoutMs: 5_000 });
      // Applied by the stall rule (a second batch after STALLED_BATCH_MS), while the lock is still held.
      expect(await statusOf(locked.id)).toBe('dispatched');
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    await waitFor(async () => (await statusOf(locked.id)) === 'sent', { what: 'the stalled result applied once the lock is gone' });
  });
});
