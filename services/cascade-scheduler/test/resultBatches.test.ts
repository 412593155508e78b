import { busV1, STEP_RESULT_BATCH_SUBJECT } from '@rrs/proto';
import { testLogger, waitFor } from '@rrs/testkit';
import { consumeStepResults } from '../src';
import { LOCATION, ORG, recipientsInput, resultConsumerFixture } from './harness';

describe('result batches are applied one at a time, unless one stalls (Postgres + JetStream)', () => {
  const f = resultConsumerFixture();

  const sentResult = (stepId: string): busV1.StepResult => ({
    stepId, attemptId: `${stepId}:1`, channel: 'EMAIL', outcome: busV1.StepOutcome.STEP_OUTCOME_SENT,
    reason: '', providerMessageId: `p-${stepId}`, parts: 1, at: new Date(), organizationId: ORG, traceContext: {}, provider: '',
  });
  const publish = (stepId: string) =>
    f.bus.bus.publish(STEP_RESULT_BATCH_SUBJECT, busV1.StepResultBatch.encode({ results: [sentResult(stepId)] }).finish(), { msgId: `${stepId}:1:SENT` });
  const statusOf = async (stepId: string) => (await f.h.pool.query<{ status: string }>('SELECT status FROM recipient_steps WHERE id = $1', [stepId])).rows[0].status;

  it('applies a later result while an earlier batch waits for a recipient lock', async () => {
    const { result } = await f.h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: 'stalled batch', flowId: '', channel: 'EMAIL', externalId: 'stalled-1',
      recipients: recipientsInput(2, (k) => ({ email: `stalled-${k}@example.com` })),
    });
    const { rows } = await f.h.pool.query<{ id: string; recipient_id: string }>(
      `UPDATE recipient_steps SET status = 'dispatched', attempt = 1, dispatched_at = now() WHERE cascade_id = $1 RETURNING id, recipient_id`,
      [result.id],
    );
    const [locked, free] = rows;
    f.sub = await consumeStepResults(f.bus.bus, f.h.pool, testLogger(), { minuteMs: 50 });

    // Another transaction (a dispatcher round, say) holds the first recipient's row.
    const holder = await f.h.pool.connect();
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

  it('holds results for the linger, names their steps as held meanwhile, then applies them together', async () => {
    const { result } = await f.h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: 'linger', flowId: '', channel: 'EMAIL', externalId: 'linger-1',
      recipients: recipientsInput(2, (k) => ({ email: `linger-${k}@example.com` })),
    });
    const { rows } = await f.h.pool.query<{ id: string }>(
      `UPDATE recipient_steps SET status = 'dispatched', attempt = 1, dispatched_at = now() WHERE cascade_id = $1 RETURNING id`,
      [result.id],
    );
    // The only consumer of the durable: the previous test's would take these results.
    await f.sub?.drain();
    const sub = await consumeStepResults(f.bus.bus, f.h.pool, testLogger(), { minuteMs: 50, lingerMs: 400 });
    f.sub = sub;
    const started = Date.now();
    await publish(rows[0].id);
    await waitFor(() => sub.heldSteps().has(rows[0].id), { what: 'the first result received and held' });
    await publish(rows[1].id);
    await waitFor(() => sub.heldSteps().size === 2, { what: 'both results held' });
    expect(await statusOf(rows[0].id)).toBe('dispatched');
    await waitFor(async () => (await statusOf(rows[0].id)) === 'sent' && (await statusOf(rows[1].id)) === 'sent', { what: 'both applied after the linger', timeoutMs: 5_000 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
    await waitFor(() => sub.heldSteps().size === 0, { what: 'nothing held once applied' });
  });
});
