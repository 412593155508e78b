import { busV1, SMALL_REQUEST_LANE, stepSubjects } from '@rrs/proto';
import { collapseRepeats, counter, extractTraceContext, histogram, LATENCY_BUCKETS, withSpan, SpanKind, type Bus, type BusMessage, type Logger, type Subscription } from '@rrs/runtime';
import { PermanentSendError, RetryableSendError } from './errors';
import { resultLabel, StepOutcome, StepResultPublisher, type SendResult } from './result';
import type { SendLog } from './sendLog';

export interface SendContext {
  /** The step id: passed to the provider as its idempotency key wherever the provider takes one. */
  idempotencyKey: string;
  /**
   * An earlier provider call for this step ended without a recorded outcome (its process died, or the
   * call failed without proving the provider refused it), so the provider may already have the message:
   * an adapter whose provider can say so looks before sending.
   */
  resumed: boolean;
  /**
   * Providers an earlier call may have left the message with, unconfirmed (from the send log): a
   * ProviderChain asks them first and never fails over past them blindly. Empty when none were recorded.
   */
  maybeWith: readonly string[];
  /**
   * A small request's step (it came on `steps.<channel>.small`): it goes ahead of bulk ones in an
   * adapter's own queue for a connection (WaitLine), as it does in the fair claim.
   */
  ahead?: boolean;
}

/**
 * Sends one due step through a provider and says what happened. Throws RetryableSendError (or any
 * error) to be tried again later, PermanentSendError to end the step as FAILED.
 */
export type SendStep = (step: busV1.StepDue, ctx: SendContext) => Promise<SendResult>;

export interface SenderOptions {
  bus: Bus;
  /** Channel key, e.g. `EMAIL`. */
  channel: string;
  send: SendStep;
  sendLog: SendLog;
  logger: Logger;
  /** Where outcomes go; senders of one process share one, so their results share batches. */
  results?: StepResultPublisher;
  concurrency?: number;
  /** Deliveries before a step is given up (FAILED + dead letter). Default 10. */
  maxDeliver?: number;
  /** Default 4 000; also the lease of a send in progress (at least `minLeaseMs`). */
  ackWaitMs?: number;
  /** The least lease of a send in progress: a provider call's timeout (SMSC), when longer than the ack wait. */
  minLeaseMs?: number;
  /** First retry delay; doubles per delivery, capped at `maxBackoffMs`. Default 1 000. */
  baseBackoffMs?: number;
  maxBackoffMs?: number;
  /**
   * Once the sender is stopping, how long a step whose outcome is known but not yet stored or reported
   * keeps retrying before it is handed back to the bus (default 10 000, inside the shutdown step timeout).
   */
  stopGraceMs?: number;
  /** A repeating failure is logged once per cause per this interval, with a count. Default 10 000. */
  logIntervalMs?: number;
}

const sends = counter({ name: 'sender_sends_total', help: 'Steps handled by senders, by channel and result (sent, failed, no_balance, unreachable, retry, duplicate, dead_letter).', labelNames: ['channel', 'result'] });
const providerLatency = histogram({ name: 'sender_provider_duration_seconds', help: 'Time spent in provider calls, by channel and result.', labelNames: ['channel', 'result'], buckets: LATENCY_BUCKETS });
const heldOutcomes = counter({ name: 'sender_outcomes_held_total', help: 'Outcomes of provider calls whose recording or report failed at first and was retried while the step was held.', labelNames: ['channel'] });

/** Delay before the next delivery: exponential backoff, never shorter than the provider's Retry-After. */
export function retryDelayMs(deliveryCount: number, retryAfterMs: number | undefined, base = 1_000, cap = 60_000): number {
  const backoff = Math.min(cap, base * 2 ** Math.max(0, deliveryCount - 1));
  return Math.max(backoff, retryAfterMs ?? 0);
}

/** First pause between tries of a held outcome's write; doubles up to a third of the ack wait, at most 2 s. */
const HOLD_RETRY_BASE_MS = 100;

/**
 * Consumes `steps.<channel>` and `steps.<channel>.small` (stepSubjects), each with its own window (the
 * small requests' is SMALL_REQUEST_LANE). For each due step: check the send log, send, record, publish
 * the result, then ack. Errors are sorted: retryable → nak with backoff; permanent → FAILED + term; the last
 * delivery of a retryable failure → FAILED `max_deliveries` + a dead-letter record.
 *
 * An outcome the provider gave is never dropped: if recording or reporting it fails (the database or the
 * bus is gone), the step is held in progress (`working()`) and the write retried with backoff until it
 * succeeds, and only then acked. Nak'ing it instead would let its redelivery, once the lease ran out,
 * take the unrecorded send for a crashed one and send it again.
 */
export async function startSender(options: SenderOptions): Promise<Subscription> {
  const channel = options.channel;
  const maxDeliver = options.maxDeliver ?? 10;
  const ackWaitMs = options.ackWaitMs ?? 4_000;
  const stopGraceMs = options.stopGraceMs ?? 10_000;
  const log = options.logger;
  const failures = collapseRepeats(log, { intervalMs: options.logIntervalMs });
  const results = options.results ?? new StepResultPublisher(options.bus);
  // The bus keeps a step in progress while it is handled, so the ack wait is short (a dead replica's steps
  // move on within it); the send log's lease is at least the provider's call timeout where one is given.
  const leaseMs = Math.max(ackWaitMs, options.minLeaseMs ?? 0);
  const heartbeatMs = Math.max(50, Math.floor(ackWaitMs / 3));
  const holdRetryCapMs = Math.max(HOLD_RETRY_BASE_MS, Math.min(2_000, heartbeatMs));

  /** Outcomes this process holds while retrying their write, by step id: another delivery of the step waits for it. */
  const held = new Map<string, Promise<void>>();
  /** Set when the sender starts stopping: held steps give up at this time. */
  let giveUpAt: number | null = null;
  const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

  /** Keeps `msg` in progress until `work` settles. */
  const holding = async <T>(msg: BusMessage, work: () => Promise<T>): Promise<T> => {
    msg.working();
    const heartbeat = setInterval(() => msg.working(), heartbeatMs);
    try {
      return await work();
    } finally {
      clearInterval(heartbeat);
    }
  };

  /**
   * Stores a known outcome with `record` (none when it is already stored) and reports it. The first try
   * is the normal path, without extra work. If it fails, the step is held in progress and both are
   * retried with backoff until they succeed. Resolves false only when the sender is stopping and its grace
   * ran out first: the caller then hands the message back to the bus.
   */
  const settle = async (msg: BusMessage, step: busV1.StepDue, result: SendResult, record: (() => Promise<void>) | null): Promise<boolean> => {
    let recorded = record === null;
    const writeAndReport = async () => {
      if (!recorded) {
        await record!();
        recorded = true;
      }
      await results.publish(step, result);
    };
    try {
      await writeAndReport();
      return true;
    } catch (first) {
      heldOutcomes.inc({ channel });
      let release!: () => void;
      held.set(step.stepId, new Promise<void>((resolve) => (release = resolve)));
      try {
        return await holding(msg, async () => {
          let err = first;
          for (let tries = 1; ; tries++) {
            const what = recorded ? 'reporting a recorded outcome failed' : 'recording the outcome of a provider call failed';
            failures.error({ err, stepId: step.stepId, outcome: resultLabel(result.outcome) }, `${what}; holding the step and retrying`);
            if (giveUpAt !== null && Date.now() >= giveUpAt) {
              log.error(
                { err, stepId: step.stepId, outcome: resultLabel(result.outcome), recorded },
                recorded
                  ? 'stopping with an outcome recorded but not reported; its next delivery reports it from the send log'
                  : 'stopping with the outcome of a provider call not recorded; its next delivery resumes the send (docs/channels.md)',
              );
              return false;
            }
            await pause(Math.min(holdRetryCapMs, HOLD_RETRY_BASE_MS * 2 ** (tries - 1)));
            try {
              await writeAndReport();
              return true;
            } catch (again) {
              err = again;
            }
          }
        });
      } finally {
        held.delete(step.stepId);
        release();
      }
    }
  };

  /** Settles and then acks (or terms); a message whose outcome could not be settled goes back to the bus. */
  const finish = async (msg: BusMessage, step: busV1.StepDue, result: SendResult, record: (() => Promise<void>) | null, label: string, end: 'ack' | 'term') => {
    if (!(await settle(msg, step, result, record))) {
      msg.nak();
      return;
    }
    sends.inc({ channel, result: label });
    if (end === 'ack') msg.ack();
    else msg.term(result.reason);
  };

  const handle = async (msg: BusMessage, step: busV1.StepDue, small: boolean) => {
    // A redelivery, or a new attempt, of a step whose outcome this process is still trying to store:
    // wait for that rather than claim, so its send log row is complete when the claim reads it.
    const pending = held.get(step.stepId);
    if (pending) await holding(msg, () => pending);
    const claim = await options.sendLog.claim(step, leaseMs);
    if (claim.kind === 'done') {
      // Sent (or settled) by an earlier delivery whose ack was lost: report again, never resend.
      await finish(msg, step, claim.result, null, 'duplicate', 'ack');
      return;
    }
    if (claim.kind === 'busy') {
      msg.nak(claim.retryInMs);
      return;
    }
    const started = process.hrtime.bigint();
    let result: SendResult;
    try {
      result = await options.sendLog.atTheProvider(() => options.send(step, { idempotencyKey: step.stepId, resumed: claim.resumed, maybeWith: claim.maybeWith, ahead: small }));
      providerLatency.observe({ channel, result: resultLabel(result.outcome) }, Number(process.hrtime.bigint() - started) / 1e9);
    } catch (err) {
      providerLatency.observe({ channel, result: err instanceof PermanentSendError ? 'failed' : 'retry' }, Number(process.hrtime.bigint() - started) / 1e9);
      if (err instanceof PermanentSendError) {
        failures.warn({ err, stepId: step.stepId, reason: err.reason }, 'send failed permanently');
        const failed: SendResult = { outcome: StepOutcome.STEP_OUTCOME_FAILED, reason: err.reason, ...(err.provider ? { provider: err.provider } : {}) };
        await finish(msg, step, failed, () => options.sendLog.complete(step.stepId, failed), 'failed', 'term');
        return;
      }
      const reason = err instanceof RetryableSendError ? err.reason : 'sender_error';
      if (msg.deliveryCount >= maxDeliver) {
        failures.error({ err, stepId: step.stepId, deliveries: msg.deliveryCount, reason }, 'send failed on the last delivery; dead-lettered');
        // A recipient's own temporary refusal (an SMTP 4xx at RCPT) that outlasted every try fails with its reason.
        const failed: SendResult = { outcome: StepOutcome.STEP_OUTCOME_FAILED, reason: err instanceof RetryableSendError && err.recipientLevel ? err.reason : 'max_deliveries' };
        await finish(msg, step, failed, () => options.sendLog.failDeadLettered(step, failed, reason, msg.deliveryCount), 'dead_letter', 'term');
        return;
      }
      const maybeDelivered = !(err instanceof RetryableSendError) || err.maybeDelivered;
      try {
        await options.sendLog.release(step.stepId, { maybeDelivered, provider: err instanceof RetryableSendError ? err.provider : undefined });
      } catch (releaseErr) {
        // Still `sending`: the next delivery waits out the lease, then resumes (and asks the provider first).
        failures.error({ err: releaseErr, stepId: step.stepId }, 'releasing a step after a retryable failure failed; its next delivery waits for the lease');
      }
      const delay = retryDelayMs(msg.deliveryCount, err instanceof RetryableSendError ? err.retryAfterMs : undefined, options.baseBackoffMs, options.maxBackoffMs);
      failures.warn({ err, stepId: step.stepId, delivery: msg.deliveryCount, reason, retryInMs: delay }, 'send failed, will retry');
      sends.inc({ channel, result: 'retry' });
      msg.nak(delay);
      return;
    }
    await finish(msg, step, result, () => options.sendLog.complete(step.stepId, result), resultLabel(result.outcome), 'ack');
  };

  const onStep = async (msg: BusMessage, small: boolean) => {
    let step: busV1.StepDue;
    try {
      step = busV1.StepDue.decode(msg.data);
      if (!step.stepId || !step.attemptId) throw new Error('step without step_id or attempt_id');
    } catch (err) {
      failures.error({ err, seq: msg.seq }, 'undecodable step message, dropped');
      msg.term('undecodable');
      return;
    }
    await withSpan(`send ${channel}`, { 'messaging.system': 'nats', 'rrs.step_id': step.stepId }, async () => {
      try {
        await handle(msg, step, small);
      } catch (err) {
        // The send log failed before the provider was called (a claim): nothing was sent by this delivery.
        if (msg.deliveryCount >= maxDeliver) {
          failures.error({ err, stepId: step.stepId, delivery: msg.deliveryCount }, 'handling the step failed on its last delivery; dead-lettered');
          await options.sendLog.deadLetter(step, 'sender_error', msg.deliveryCount).catch((deadLetterErr: unknown) => failures.error({ err: deadLetterErr, stepId: step.stepId }, 'writing the dead letter failed'));
          msg.term('max deliveries');
          return;
        }
        failures.error({ err, stepId: step.stepId, delivery: msg.deliveryCount }, 'handling the step failed, will retry');
        msg.nak(retryDelayMs(msg.deliveryCount, undefined, options.baseBackoffMs, options.maxBackoffMs));
      }
    }, { kind: SpanKind.CONSUMER, parent: extractTraceContext(msg.headers) });
  };

  // Bulk requests' steps and small requests' each from their own consumer and window: an order's step
  // is taken as soon as it is published, whatever the bulk's steps waiting in the stream or in progress.
  const concurrency = options.concurrency ?? 16;
  const subscriptions: Subscription[] = [];
  try {
    for (const lane of stepSubjects(channel)) {
      const window = lane.small ? Math.min(concurrency, SMALL_REQUEST_LANE) : concurrency;
      subscriptions.push(await options.bus.consume({ stream: 'STEPS', durable: lane.durable, filterSubject: lane.subject, concurrency: window, maxDeliver, ackWaitMs }, (msg) => onStep(msg, lane.small)));
    }
  } catch (err) {
    await Promise.allSettled(subscriptions.map((subscription) => subscription.drain()));
    throw err;
  }

  return {
    async drain() {
      giveUpAt ??= Date.now() + stopGraceMs;
      try {
        await Promise.all(subscriptions.map((subscription) => subscription.drain()));
      } finally {
        failures.flush();
      }
    },
  };
}
