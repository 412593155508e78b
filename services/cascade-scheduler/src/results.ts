import { busV1, STEP_RESULT_SUBJECT } from '@rrs/proto';
import { counter, type Bus, type BusMessage, type Logger, type Pool, type Subscription } from '@rrs/runtime';
import { applyResult, type Outcome, type Timing } from './engine';
import { dbNow, lockRecipients, saveStates } from './store';

const applied = counter({ name: 'scheduler_step_results_total', help: 'Step results received from senders, by outcome.', labelNames: ['outcome'] });

const OUTCOMES: Partial<Record<busV1.StepOutcome, Outcome>> = {
  [busV1.StepOutcome.STEP_OUTCOME_SENT]: 'SENT',
  [busV1.StepOutcome.STEP_OUTCOME_FAILED]: 'FAILED',
  [busV1.StepOutcome.STEP_OUTCOME_NO_BALANCE]: 'NO_BALANCE',
  [busV1.StepOutcome.STEP_OUTCOME_UNREACHABLE]: 'UNREACHABLE',
  [busV1.StepOutcome.STEP_OUTCOME_DELIVERED]: 'DELIVERED',
  [busV1.StepOutcome.STEP_OUTCOME_UNDELIVERED]: 'UNDELIVERED',
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The recipient step a result belongs to, from its attempt id `<step row id>:<attempt>` (the step id a
 * sender sees differs on reroute hops); null for a result that is not one of ours.
 */
function rowIdOf(r: busV1.StepResult): string | null {
  const id = r.attemptId.slice(0, r.attemptId.lastIndexOf(':'));
  return UUID.test(id) ? id : null;
}

export type StepResultHandler = (result: busV1.StepResult) => Promise<void>;

/**
 * Redelivery of a result that could not be applied (PostgreSQL down, a lock timeout): exponential from
 * `baseMs`, capped at `maxMs`. With the defaults (1 s doubling to 60 s) and `RESULT_MAX_DELIVER`
 * deliveries a result survives a database outage of about 16 hours; a result is the only record that a
 * message went out, so dropping it early would make the watchdog send the step again.
 */
export const RESULT_MAX_DELIVER = 1000;
export interface RedeliveryBackoff {
  baseMs: number;
  maxMs: number;
}
export const RESULT_BACKOFF: RedeliveryBackoff = { baseMs: 1_000, maxMs: 60_000 };

export function redeliveryDelayMs(deliveryCount: number, backoff: RedeliveryBackoff = RESULT_BACKOFF): number {
  const doublings = Math.min(Math.max(0, deliveryCount - 1), 30);
  return Math.min(backoff.maxMs, backoff.baseMs * 2 ** doublings);
}

/**
 * Applies batches of step results in one transaction each. A result is recorded once per
 * (attempt, outcome) in `step_results` in the same transaction that applies it, so a redelivered
 * message changes nothing.
 */
export async function applyStepResults(pool: Pool, results: busV1.StepResult[], minuteMs: number): Promise<busV1.StepResult[]> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const { rows: fresh } = await client.query<{ attempt_id: string; outcome: string }>(
      `INSERT INTO step_results (attempt_id, outcome, step_id, channel, reason, provider_message_id)
       SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
       ON CONFLICT DO NOTHING RETURNING attempt_id, outcome`,
      [
        results.map((r) => r.attemptId),
        results.map((r) => busV1.stepOutcomeToJSON(r.outcome)),
        results.map((r) => r.stepId),
        results.map((r) => r.channel),
        results.map((r) => r.reason),
        results.map((r) => r.providerMessageId),
      ],
    );
    const isFresh = new Set(fresh.map((f) => `${f.attempt_id}|${f.outcome}`));
    const toApply = results.filter((r) => isFresh.has(`${r.attemptId}|${busV1.stepOutcomeToJSON(r.outcome)}`));
    const stepIds = [...new Set(toApply.map(rowIdOf).filter((id): id is string => id !== null))];
    if (stepIds.length) {
      const { rows: owners } = await client.query<{ id: string; recipient_id: string }>('SELECT id, recipient_id FROM recipient_steps WHERE id = ANY($1::uuid[])', [stepIds]);
      const recipientOf = new Map(owners.map((o) => [o.id, o.recipient_id]));
      const states = await lockRecipients(client, owners.map((o) => o.recipient_id));
      const t: Timing = { now: await dbNow(client), minuteMs };
      for (const r of toApply) {
        const rowId = rowIdOf(r);
        const state = states.get(recipientOf.get(rowId ?? '') ?? '');
        const step = state?.steps.find((s) => s.id === rowId);
        if (!state || !step) continue;
        // An outcome this version does not know must not leave the step dispatched forever.
        const outcome = OUTCOMES[r.outcome] ?? 'FAILED';
        applyResult(state, step, r.attemptId, outcome, OUTCOMES[r.outcome] ? r.reason : `unknown_outcome: ${String(r.outcome)}`, t);
        applied.inc({ outcome });
      }
      await saveStates(client, states.values(), t.now);
    }
    await client.query('COMMIT');
    return toApply;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/**
 * Consumes `steps.result`: messages are gathered into batches (up to `batchSize`, of what arrived while
 * earlier batches were being written), applied in one transaction each — at most `parallel` at once,
 * so a batch waiting for a dispatcher's recipient locks does not stall the others — then acked; a
 * failed batch is nak'ed and redelivered. Batches lock recipients in id order, so they never deadlock.
 */
export async function consumeStepResults(
  bus: Bus,
  pool: Pool,
  logger: Logger,
  options: {
    minuteMs: number;
    batchSize?: number;
    parallel?: number;
    concurrency?: number;
    onApplied?: StepResultHandler;
    /** Tests shorten these; see RESULT_BACKOFF and RESULT_MAX_DELIVER. */
    backoff?: RedeliveryBackoff;
    maxDeliver?: number;
  },
): Promise<Subscription> {
  const backoff = options.backoff ?? RESULT_BACKOFF;
  const maxDeliver = options.maxDeliver ?? RESULT_MAX_DELIVER;
  const batchSize = options.batchSize ?? 500;
  const parallel = options.parallel ?? 2;
  const queue: Array<{ result: busV1.StepResult; done: (err?: unknown) => void }> = [];
  let active = 0;

  const apply = async (batch: typeof queue): Promise<void> => {
    try {
      const done = await applyStepResults(pool, batch.map((b) => b.result), options.minuteMs);
      if (options.onApplied) for (const r of done) await options.onApplied(r);
      for (const b of batch) b.done();
    } catch (err) {
      logger.warn({ err, size: batch.length }, 'applying step results failed; they will be redelivered');
      for (const b of batch) b.done(err);
    }
  };
  const pump = (): void => {
    while (active < parallel && queue.length) {
      const batch = queue.splice(0, batchSize);
      active++;
      void apply(batch).finally(() => {
        active--;
        pump();
      });
    }
  };

  return bus.consume(
    { stream: 'STEPS', durable: 'scheduler-results', filterSubject: STEP_RESULT_SUBJECT, concurrency: options.concurrency ?? 2048, maxDeliver },
    async (msg: BusMessage) => {
      let result: busV1.StepResult;
      try {
        result = busV1.StepResult.decode(msg.data);
      } catch (err) {
        logger.error({ err, seq: msg.seq }, 'undecodable step result, dropped');
        msg.term('undecodable');
        return;
      }
      await new Promise<void>((resolve) => {
        queue.push({
          result,
          done: (err) => {
            if (!err) msg.ack();
            else {
              if (msg.deliveryCount >= maxDeliver) logger.error({ err, seq: msg.seq, attemptId: result.attemptId }, 'step result dropped after its last delivery');
              msg.nak(redeliveryDelayMs(msg.deliveryCount, backoff));
            }
            resolve();
          },
        });
        setImmediate(pump);
      });
    },
  );
}
