import { busV1, STEP_RESULT_BATCH_SUBJECT } from '@rrs/proto';
import { injectTraceContext, SpanKind, withSpan, type Bus } from '@rrs/runtime';

export type StepOutcome = busV1.StepOutcome;
export const StepOutcome = busV1.StepOutcome;

export interface SendResult {
  outcome: StepOutcome;
  /** Machine-readable, e.g. `provider_rejected`, `not_registered`, `no_balance`. */
  reason?: string;
  providerMessageId?: string;
  parts?: number;
  /** The provider that took the message, or refused it (FAILED), when the channel has a ProviderChain (reported on the step). */
  provider?: string;
  /** When it happened, for a receipt that carries the provider's event time; default: when published. */
  at?: Date;
  /**
   * The address the message went to, kept in the send log with the outcome (not published): a sender that
   * matches replies to the last message a person got sets it (channel-sms for STOP replies).
   */
  address?: string;
}

/** The step a result is about; a receipt knows these from the send log, a send from the step itself. */
export interface ResultTarget {
  stepId: string;
  attemptId: string;
  channel: string;
  organizationId: string;
}

/** Results in one batch message at most: a batch of this many is a few tens of kilobytes. */
export const MAX_RESULTS_PER_BATCH = 500;

interface Waiting {
  result: busV1.StepResult;
  done: (err?: unknown) => void;
}

/**
 * Reports step outcomes to the scheduler in `StepResultBatch` messages on `steps.result.batch`: the
 * results that come in while the event loop is busy (a burst of sends finishing together) leave as one
 * message when it next turns, or as soon as `maxBatch` are waiting. One message per step would cost the
 * sender, NATS and the scheduler a publish, a delivery and an ack each: at high rates most of their CPU.
 *
 * `publish` resolves once the batch holding the result is stored in the stream, so a sender acks its
 * step only after its outcome is safe; it rejects if that batch was not stored (the caller naks, and
 * the redelivery reports again from the send log). Applying a result is idempotent, so a result in two
 * batches is harmless.
 */
export class StepResultPublisher {
  private waiting: Waiting[] = [];
  private scheduled = false;

  constructor(
    private readonly bus: Bus,
    private readonly maxBatch = MAX_RESULTS_PER_BATCH,
  ) {}

  publish(target: ResultTarget, result: SendResult): Promise<void> {
    // A span per result, child of the send, so the result is part of the step's trace whichever batch
    // carries it; the scheduler continues the trace from the context in the result.
    return withSpan(
      'publish steps.result',
      { 'messaging.system': 'nats', 'messaging.destination.name': STEP_RESULT_BATCH_SUBJECT, 'rrs.step_id': target.stepId },
      () =>
        new Promise<void>((resolve, reject) => {
          const message: busV1.StepResult = {
            stepId: target.stepId,
            attemptId: target.attemptId,
            channel: target.channel,
            outcome: result.outcome,
            reason: result.reason ?? '',
            providerMessageId: result.providerMessageId ?? '',
            parts: result.parts ?? 0,
            at: result.at ?? new Date(),
            organizationId: target.organizationId,
            traceContext: injectTraceContext({}),
            provider: result.provider ?? '',
          };
          this.waiting.push({ result: message, done: (err) => (err ? reject(err) : resolve()) });
          if (this.waiting.length >= this.maxBatch) this.flush();
          else if (!this.scheduled) {
            this.scheduled = true;
            setImmediate(() => {
              this.scheduled = false;
              this.flush();
            });
          }
        }),
      { kind: SpanKind.PRODUCER },
    );
  }

  private flush(): void {
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.maxBatch);
      const body = busV1.StepResultBatch.encode({ results: batch.map((w) => w.result) }).finish();
      this.bus.publish(STEP_RESULT_BATCH_SUBJECT, body).then(
        () => {
          for (const waiting of batch) waiting.done();
        },
        (err: unknown) => {
          for (const waiting of batch) waiting.done(err);
        },
      );
    }
  }
}

/** Lower-case result label for metrics and logs, e.g. `sent`, `no_balance`. */
export function resultLabel(outcome: StepOutcome): string {
  return String(outcome).replace(/^STEP_OUTCOME_/, '').toLowerCase();
}
