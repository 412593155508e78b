import { busV1, STEP_RESULT_BATCH_SUBJECT } from '@rrs/proto';
import { collapseRepeats, extractTraceContext, SpanKind, withSpan, type Bus, type BusMessage, type Logger, type Pool, type Subscription } from '@rrs/runtime';
import { applyStepResults, rowIdOf } from './applyStepResults';

/** Results applied in one transaction at most. */
export const RESULT_BATCH_SIZE = 500;
/** A batch running longer than this lets another batch start beside it (see `pump`). */
export const STALLED_BATCH_MS = 100;
/**
 * How long results may wait for more to join them when nothing is being applied (see `pump`). A batch
 * costs two requests to PostgreSQL whatever its size, and senders publish a result message per batch of
 * sends finishing together (~10–20 at a thousand sends a second): waiting this long lets two or three of
 * those share a transaction. Only when the scheduler applies the step's result moves; the message
 * already went out, and a next step is due minutes later.
 */
export const RESULT_LINGER_MS = 20;

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
 * Consumes step results from `steps.result.batch` (a StepResultBatch per message, what senders
 * publish). Results are gathered into batches (up to `batchSize`, of what arrived while earlier batches
 * were being written), applied in one transaction each — one at a time unless results pile up or a
 * batch stalls, and at most `parallel` at once, so a batch waiting for a dispatcher's recipient locks
 * does not stall the others (see `pump`). A message is acked once all its results
 * are applied, nak'ed with a backoff if any failed (applying is idempotent, so its other results are
 * harmless the second time).
 */
export async function consumeStepResults(
  bus: Bus,
  pool: Pool,
  logger: Logger,
  options: {
    minuteMs: number;
    batchSize?: number;
    parallel?: number;
    /** See RESULT_LINGER_MS; 0 applies what waits at once. */
    lingerMs?: number;
    concurrency?: number;
    onApplied?: StepResultHandler;
    /** After each batch is applied (its steps no longer count as in flight): the dispatcher may have room. */
    onBatchApplied?: () => void;
    /** Tests shorten these; see RESULT_BACKOFF and RESULT_MAX_DELIVER. */
    backoff?: RedeliveryBackoff;
    maxDeliver?: number;
  },
): Promise<StepResultConsumer> {
  const backoff = options.backoff ?? RESULT_BACKOFF;
  const maxDeliver = options.maxDeliver ?? RESULT_MAX_DELIVER;
  const batchSize = options.batchSize ?? RESULT_BATCH_SIZE;
  const parallel = options.parallel ?? 2;
  const lingerMs = options.lingerMs ?? RESULT_LINGER_MS;
  /** A quarter batch waiting starts a batch at once (no lingering), or a second one beside a running one. */
  const enough = Math.max(1, Math.floor(batchSize / 4));
  const queue: Array<{ result: busV1.StepResult; done: (err?: unknown) => void; at: number }> = [];
  let active = 0;
  const waiters: Array<{ below: number; resolve: () => void }> = [];
  // Messages are decoded only when their results can join the queue: results held waiting are what a
  // young-generation GC has to copy, and a few thousand of them cost more CPU than applying them.
  const capacity = 2 * batchSize;
  const whenRoom = (): Promise<void> => {
    if (queue.length < capacity) return Promise.resolve();
    return new Promise((resolve) => waiters.push({ below: capacity, resolve }));
  };
  const release = (): void => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (queue.length < waiters[i].below) waiters.splice(i, 1)[0].resolve();
    }
  };

  // An outage fails every batch the same way: one line per cause per interval, with a count.
  const failures = collapseRepeats(logger);
  const apply = async (batch: typeof queue): Promise<void> => {
    try {
      const done = await applyStepResults(pool, batch.map((entry) => entry.result), options.minuteMs);
      if (options.onApplied) for (const result of done) await options.onApplied(result);
      options.onBatchApplied?.();
      for (const entry of batch) entry.done();
    } catch (err) {
      failures.warn({ err, size: batch.length }, 'applying step results failed; they will be redelivered');
      for (const entry of batch) entry.done(err);
    }
  };
  // Group commit: while one batch is being applied, the results that come in wait and make the next
  // batch, so batches fill with the rate and a result costs a fraction of a transaction. With nothing
  // being applied, results wait up to `lingerMs` from the oldest's arrival for others to join them, unless
  // a quarter batch is there already. Another batch starts beside a running one only when a quarter batch
  // is waiting, or when the running one has taken longer than STALLED_BATCH_MS (e.g. waiting for a
  // dispatcher's recipient locks), so a slow batch never holds up the others for long. Starting the
  // second at once halved every batch at sending rates.
  /** Start time of each batch being applied. */
  const running = new Map<symbol, number>();
  /** The batches being applied (for `heldSteps`). */
  const applying = new Set<typeof queue>();
  let timer: { handle: NodeJS.Timeout; at: number } | null = null;
  let pumpScheduled = false;
  /** Milliseconds until a batch may start (0: now), or null while none may start before one ends. */
  const untilNextStart = (now: number): number | null => {
    if (active === 0) return queue.length >= enough ? 0 : Math.max(0, queue[0].at + lingerMs - now);
    if (active >= parallel) return null;
    if (queue.length >= enough) return 0;
    return Math.max(0, Math.min(...running.values()) + STALLED_BATCH_MS - now);
  };
  const pump = (): void => {
    for (;;) {
      if (queue.length === 0) return;
      const now = Date.now();
      const wait = untilNextStart(now);
      if (wait === null) return;
      if (wait > 0) {
        // One timer, for the earliest moment a batch may start.
        if (timer && timer.at <= now + wait) return;
        if (timer) clearTimeout(timer.handle);
        const handle = setTimeout(() => {
          timer = null;
          pump();
        }, wait);
        handle.unref();
        timer = { handle, at: now + wait };
        return;
      }
      const batch = queue.splice(0, batchSize);
      release();
      active++;
      const token = Symbol('batch');
      running.set(token, now);
      applying.add(batch);
      void apply(batch).finally(() => {
        active--;
        running.delete(token);
        applying.delete(batch);
        pump();
      });
    }
  };
  /** Resolves once the result is applied, with the error if its batch failed. */
  const enqueue = (result: busV1.StepResult): Promise<unknown> =>
    new Promise((resolve) => {
      queue.push({ result, done: resolve, at: Date.now() });
      // A message's results join the queue in one turn: looking after the turn keeps them together.
      if (queue.length >= batchSize) pump();
      else if (!pumpScheduled) {
        pumpScheduled = true;
        setImmediate(() => {
          pumpScheduled = false;
          pump();
        });
      }
    });
  const settle = (msg: BusMessage, errors: unknown[], attemptId: string): void => {
    const err = errors.find((error) => error !== undefined);
    if (err === undefined) {
      msg.ack();
      return;
    }
    if (msg.deliveryCount >= maxDeliver) logger.error({ err, seq: msg.seq, attemptId }, 'step results dropped after their last delivery');
    msg.nak(redeliveryDelayMs(msg.deliveryCount, backoff));
  };

  const subscription = await bus.consume(
    { stream: 'STEPS', durable: 'scheduler-result-batches', filterSubject: STEP_RESULT_BATCH_SUBJECT, concurrency: options.concurrency ?? 256, maxDeliver },
    async (msg: BusMessage) => {
      await whenRoom();
      let results: busV1.StepResult[];
      try {
        results = busV1.StepResultBatch.decode(msg.data).results;
      } catch (err) {
        logger.error({ err, seq: msg.seq, subject: msg.subject }, 'undecodable step result, dropped');
        msg.term('undecodable');
        return;
      }
      const errors = await Promise.all(results.map((result) => withResultSpan(result, () => enqueue(result))));
      settle(msg, errors, results[0]?.attemptId ?? '');
    },
  );
  return {
    async drain() {
      await subscription.drain();
      for (const waiter of waiters.splice(0)) waiter.resolve();
      failures.flush();
    },
    waiting: () => queue.length,
    heldSteps() {
      const ids = new Set<string>();
      for (const entries of [queue, ...applying]) {
        for (const entry of entries) {
          const id = rowIdOf(entry.result);
          if (id) ids.add(id);
        }
      }
      return ids;
    },
    whenRoom,
  };
}

export interface StepResultConsumer extends Subscription {
  /** Results received and not yet taken into a batch being applied. */
  waiting(): number;
  /**
   * The recipient steps whose results this process has received and not yet applied (waiting, or in a
   * batch being applied): the result watchdog leaves them alone, their result is not missing.
   */
  heldSteps(): Set<string>;
  /**
   * Resolves once the queue has room (fewer than two batches of results wait; at once if it has):
   * what messages wait for before they are decoded, and the dispatcher before each round.
   */
  whenRoom(): Promise<void>;
}

/**
 * A result from a batch is processed in a span of its own trace (the context the sender put in it);
 * results without one (tracing off) skip the span machinery.
 */
function withResultSpan<T>(result: busV1.StepResult, fn: () => Promise<T>): Promise<T> {
  if (!result.traceContext || Object.keys(result.traceContext).length === 0) return fn();
  return withSpan(
    'process steps.result',
    { 'messaging.system': 'nats', 'messaging.destination.name': STEP_RESULT_BATCH_SUBJECT, 'messaging.operation': 'process', 'rrs.step_id': result.stepId },
    fn,
    { kind: SpanKind.CONSUMER, parent: extractTraceContext(result.traceContext) },
  );
}
