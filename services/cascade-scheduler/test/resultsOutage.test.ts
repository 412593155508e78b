import { busV1, STEP_RESULT_BATCH_SUBJECT } from '@rrs/proto';
import type { Pool } from '@rrs/runtime';
import { testLogger, waitFor } from '@rrs/testkit';
import { consumeStepResults } from '../src';
import { redeliveryDelayMs, RESULT_BACKOFF, RESULT_MAX_DELIVER } from '../src/stepResultConsumer';
import { LOCATION, ORG, recipientsInput, resultConsumerFixture } from './harness';

/** A pool whose first `failures` connection attempts fail as if PostgreSQL were down; records every attempt. */
function downFor(pool: Pool, failures: number): { pool: Pool; attempts: number[] } {
  const attempts: number[] = [];
  const down = new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop !== 'connect') return Reflect.get(target, prop, receiver);
      return async () => {
        attempts.push(Date.now());
        if (attempts.length <= failures) throw new Error('connect ECONNREFUSED 127.0.0.1:5432');
        return target.connect();
      };
    },
  }) as Pool;
  return { pool: down, attempts };
}

describe('step results during a PostgreSQL outage', () => {
  it('backs off exponentially to 60 s and keeps a result for about 16 hours of redeliveries', () => {
    expect([1, 2, 3, 6, 7, 8, 1000].map((n) => redeliveryDelayMs(n))).toEqual([1_000, 2_000, 4_000, 32_000, 60_000, 60_000, 60_000]);
    expect(RESULT_BACKOFF.maxMs).toBe(60_000);
    let total = 0;
    for (let n = 1; n < RESULT_MAX_DELIVER; n++) total += redeliveryDelayMs(n);
    expect(total / 3_600_000).toBeGreaterThan(16);
  });

  describe('a consumer whose database is down for several deliveries (Postgres + JetStream)', () => {
    const f = resultConsumerFixture();

    it('naks with growing delays while applying fails, then applies the result once the database is back', async () => {
      const { result } = await f.h.scheduler.cascades.start({
        organizationId: ORG, locationId: LOCATION, name: 'outage', flowId: '', channel: 'EMAIL', externalId: 'outage-1',
        recipients: recipientsInput(1, () => ({ email: 'outage@example.com' })),
      });
      // The step as the dispatcher leaves it: published, waiting for its result.
      const { rows } = await f.h.pool.query<{ id: string }>(
        `UPDATE recipient_steps SET status = 'dispatched', attempt = 1, dispatched_at = now() WHERE cascade_id = $1 RETURNING id`,
        [result.id],
      );
      const stepId = rows[0].id;

      const failures = 5;
      const { pool: down, attempts } = downFor(f.h.pool, failures);
      const logger = testLogger();
      f.sub = await consumeStepResults(f.bus.bus, down, logger, { minuteMs: 50, backoff: { baseMs: 40, maxMs: 200 }, maxDeliver: 20 });
      await f.bus.bus.publish(
        STEP_RESULT_BATCH_SUBJECT,
        busV1.StepResultBatch.encode({
          results: [{
            stepId, attemptId: `${stepId}:1`, channel: 'EMAIL', outcome: busV1.StepOutcome.STEP_OUTCOME_SENT,
            reason: '', providerMessageId: 'p-1', parts: 1, at: new Date(), organizationId: ORG, traceContext: {},
          }],
        }).finish(),
        { msgId: `${stepId}:1:SENT` },
      );

      const step = await waitFor(async () => {
        const r = await f.h.pool.query<{ status: string }>('SELECT status FROM recipient_steps WHERE id = $1', [stepId]);
        return r.rows[0].status === 'sent' ? r.rows[0] : undefined;
      }, { what: 'result applied after the outage', timeoutMs: 10_000 });
      expect(step.status).toBe('sent');
      expect(attempts).toHaveLength(failures + 1);
      // Five failures of one cause make one log line (with a count later), not five lines with stacks.
      expect(logger.lines.filter((line) => line.includes('applying step results failed'))).toHaveLength(1);
      const gaps = attempts.slice(1).map((t, i) => t - attempts[i]);
      // 40, 80, 160, 200 (capped), 200 ms; a little early is timer jitter, never a retry storm.
      const expected = [40, 80, 160, 200, 200];
      expect(gaps.map((g, i) => g >= expected[i] - 15)).toEqual(expected.map(() => true));
      const { rows: results } = await f.h.pool.query('SELECT outcome FROM step_results WHERE attempt_id = $1', [`${stepId}:1`]);
      expect(results).toEqual([{ outcome: 'STEP_OUTCOME_SENT' }]);
      const c = await f.h.scheduler.cascades.get(ORG, result.id);
      expect(c.recipients[0]).toMatchObject({ status: 'finished', finishReason: 'exhausted' });
    });

    it('applies a batch of results (steps.result.batch) once the database is back, and only then acks it', async () => {
      await f.sub?.drain();
      const { result } = await f.h.scheduler.cascades.start({
        organizationId: ORG, locationId: LOCATION, name: 'outage batch', flowId: '', channel: 'EMAIL', externalId: 'outage-2',
        recipients: recipientsInput(2, (k) => ({ email: `outage-batch-${k}@example.com` })),
      });
      const { rows } = await f.h.pool.query<{ id: string }>(
        `UPDATE recipient_steps SET status = 'dispatched', attempt = 1, dispatched_at = now() WHERE cascade_id = $1 RETURNING id`,
        [result.id],
      );
      const { pool: down, attempts } = downFor(f.h.pool, 2);
      f.sub = await consumeStepResults(f.bus.bus, down, testLogger(), { minuteMs: 50, backoff: { baseMs: 40, maxMs: 200 }, maxDeliver: 20 });
      await f.bus.bus.publish(
        STEP_RESULT_BATCH_SUBJECT,
        busV1.StepResultBatch.encode({
          results: rows.map((r, i) => ({
            stepId: r.id, attemptId: `${r.id}:1`, channel: 'EMAIL', outcome: busV1.StepOutcome.STEP_OUTCOME_SENT,
            reason: '', providerMessageId: `pb-${i}`, parts: 1, at: new Date(), organizationId: ORG, traceContext: {},
          })),
        }).finish(),
      );
      await waitFor(async () => {
        const r = await f.h.pool.query<{ status: string }>('SELECT status FROM recipient_steps WHERE id = ANY($1::uuid[])', [rows.map((x) => x.id)]);
        return r.rows.every((x) => x.status === 'sent');
      }, { what: 'both results of the batch applied after the outage', timeoutMs: 10_000 });
      expect(attempts.length).toBeGreaterThan(2);
      await waitFor(async () => (await f.bus.bus.pending('STEPS', 'scheduler-result-batches')) === 0, { what: 'the batch message acked', timeoutMs: 5_000 });
      const { rows: recorded } = await f.h.pool.query('SELECT provider_message_id FROM step_results WHERE attempt_id = ANY($1::text[]) ORDER BY provider_message_id', [rows.map((r) => `${r.id}:1`)]);
      expect(recorded).toEqual([{ provider_message_id: 'pb-0' }, { provider_message_id: 'pb-1' }]);
    });
  });
});
