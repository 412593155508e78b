import { busV1, stepSubject } from '@rrs/proto';
import { counter, extractTraceContext, histogram, LATENCY_BUCKETS, withSpan, SpanKind, type Bus, type BusMessage, type Logger, type Subscription } from '@rrs/runtime';
import { PermanentSendError, RetryableSendError } from './errors';
import { resultLabel, StepOutcome, StepResultPublisher, type SendResult } from './result';
import type { SendLog } from './sendLog';

export interface SendContext {
  /** The step id: passed to the provider as its idempotency key wherever the provider takes one. */
  idempotencyKey: string;
  /** An earlier delivery died during its provider call, so the provider may already have the message. */
  resumed: boolean;
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
  /** Default 30 000; also the lease of a send in progress. */
  ackWaitMs?: number;
  /** First retry delay; doubles per delivery, capped at `maxBackoffMs`. Default 1 000. */
  baseBackoffMs?: number;
  maxBackoffMs?: number;
}

const sends = counter({ name: 'sender_sends_total', help: 'Steps handled by senders, by channel and result (sent, failed, no_balance, unreachable, retry, duplicate, dead_letter).', labelNames: ['channel', 'result'] });
const providerLatency = histogram({ name: 'sender_provider_duration_seconds', help: 'Time spent in provider calls, by channel and result.', labelNames: ['channel', 'result'], buckets: LATENCY_BUCKETS });

/** Delay before the next delivery: exponential backoff, never shorter than the provider's Retry-After. */
export function retryDelayMs(deliveryCount: number, retryAfterMs: number | undefined, base = 1_000, cap = 60_000): number {
  const backoff = Math.min(cap, base * 2 ** Math.max(0, deliveryCount - 1));
  return Math.max(backoff, retryAfterMs ?? 0);
}

/**
 * Consumes `steps.<channel>`. For each due step: check the send log, send, record, publish the result,
 * then ack. Errors are sorted: retryable → nak with backoff; permanent → FAILED + term; the last
 * delivery of a retryable failure → FAILED `max_deliveries` + a dead-letter record.
 */
export async function startSender(options: SenderOptions): Promise<Subscription> {
  const channel = options.channel;
  const durable = `sender-${channel.toLowerCase()}`;
  const maxDeliver = options.maxDeliver ?? 10;
  const ackWaitMs = options.ackWaitMs ?? 30_000;
  const log = options.logger;
  const results = options.results ?? new StepResultPublisher(options.bus);

  const finish = async (step: busV1.StepDue, result: SendResult, label = resultLabel(result.outcome)) => {
    await options.sendLog.complete(step.stepId, result);
    await results.publish(step, result);
    sends.inc({ channel, result: label });
  };

  const handle = async (msg: BusMessage, step: busV1.StepDue) => {
    const claim = await options.sendLog.claim(step, ackWaitMs);
    if (claim.kind === 'done') {
      // Sent (or settled) by an earlier delivery whose ack was lost: report again, never resend.
      await results.publish(step, claim.result);
      sends.inc({ channel, result: 'duplicate' });
      msg.ack();
      return;
    }
    if (claim.kind === 'busy') {
      msg.nak(claim.retryInMs);
      return;
    }
    const started = process.hrtime.bigint();
    let result: SendResult;
    try {
      result = await options.send(step, { idempotencyKey: step.stepId, resumed: claim.resumed });
      providerLatency.observe({ channel, result: resultLabel(result.outcome) }, Number(process.hrtime.bigint() - started) / 1e9);
    } catch (err) {
      providerLatency.observe({ channel, result: err instanceof PermanentSendError ? 'failed' : 'retry' }, Number(process.hrtime.bigint() - started) / 1e9);
      if (err instanceof PermanentSendError) {
        log.warn({ err, stepId: step.stepId, reason: err.reason }, 'send failed permanently');
        await finish(step, { outcome: StepOutcome.STEP_OUTCOME_FAILED, reason: err.reason });
        msg.term(err.reason);
        return;
      }
      const reason = err instanceof RetryableSendError ? err.reason : 'sender_error';
      if (msg.deliveryCount >= maxDeliver) {
        log.error({ err, stepId: step.stepId, deliveries: msg.deliveryCount, reason }, 'send failed on the last delivery; dead-lettered');
        await options.sendLog.deadLetter(step, reason, msg.deliveryCount);
        await finish(step, { outcome: StepOutcome.STEP_OUTCOME_FAILED, reason: 'max_deliveries' }, 'dead_letter');
        msg.term('max deliveries');
        return;
      }
      await options.sendLog.release(step.stepId);
      const delay = retryDelayMs(msg.deliveryCount, err instanceof RetryableSendError ? err.retryAfterMs : undefined, options.baseBackoffMs, options.maxBackoffMs);
      log.warn({ err, stepId: step.stepId, delivery: msg.deliveryCount, reason, retryInMs: delay }, 'send failed, will retry');
      sends.inc({ channel, result: 'retry' });
      msg.nak(delay);
      return;
    }
    await finish(step, result);
    msg.ack();
  };

  return options.bus.consume(
    { stream: 'STEPS', durable, filterSubject: stepSubject(channel), concurrency: options.concurrency ?? 16, maxDeliver, ackWaitMs },
    async (msg: BusMessage) => {
      let step: busV1.StepDue;
      try {
        step = busV1.StepDue.decode(msg.data);
        if (!step.stepId || !step.attemptId) throw new Error('step without step_id or attempt_id');
      } catch (err) {
        log.error({ err, seq: msg.seq }, 'undecodable step message, dropped');
        msg.term('undecodable');
        return;
      }
      await withSpan(`send ${channel}`, { 'messaging.system': 'nats', 'rrs.step_id': step.stepId }, async () => {
        try {
          await handle(msg, step);
        } catch (err) {
          // The send log or the bus failed around the send; the log keeps the step from being sent twice.
          if (msg.deliveryCount >= maxDeliver) {
            log.error({ err, stepId: step.stepId, delivery: msg.deliveryCount }, 'handling the step failed on its last delivery; dead-lettered');
            await options.sendLog.deadLetter(step, 'sender_error', msg.deliveryCount).catch((deadLetterErr: unknown) => log.error({ err: deadLetterErr, stepId: step.stepId }, 'writing the dead letter failed'));
            msg.term('max deliveries');
            return;
          }
          log.error({ err, stepId: step.stepId, delivery: msg.deliveryCount }, 'handling the step failed, will retry');
          msg.nak(retryDelayMs(msg.deliveryCount, undefined, options.baseBackoffMs, options.maxBackoffMs));
        }
      }, { kind: SpanKind.CONSUMER, parent: extractTraceContext(msg.headers) });
    },
  );
}
