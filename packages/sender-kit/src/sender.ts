import { busV1, stepSubject, STEP_RESULT_SUBJECT } from '@rrs/proto';
import { counter, extractTraceContext, injectTraceContext, withSpan, SpanKind, type Bus, type BusMessage, type Logger, type Subscription } from '@rrs/runtime';

export type StepOutcome = busV1.StepOutcome;

export interface SendResult {
  outcome: StepOutcome;
  reason?: string;
  providerMessageId?: string;
  parts?: number;
}

/** Sends one due step through a provider. Throwing means "retry later". */
export type SendStep = (step: busV1.StepDue) => Promise<SendResult>;

export interface SenderOptions {
  bus: Bus;
  /** Channel key, e.g. `EMAIL`. */
  channel: string;
  send: SendStep;
  logger: Logger;
  concurrency?: number;
  maxDeliver?: number;
}

const sends = counter({ name: 'sender_steps_total', help: 'Steps handled by senders, by channel and outcome.', labelNames: ['channel', 'outcome'] });

/** Publishes a step's outcome to the scheduler; the msgId makes a re-publish after a crash a no-op. */
export async function publishStepResult(bus: Bus, step: busV1.StepDue, result: SendResult): Promise<void> {
  const body = busV1.StepResult.encode({
    stepId: step.stepId,
    attemptId: step.attemptId,
    channel: step.channel,
    outcome: result.outcome,
    reason: result.reason ?? '',
    providerMessageId: result.providerMessageId ?? '',
    parts: result.parts ?? 0,
    at: new Date(),
    organizationId: step.organizationId,
  }).finish();
  await bus.publish(STEP_RESULT_SUBJECT, body, { msgId: `${step.attemptId}:${result.outcome}`, headers: injectTraceContext({}) });
}

/**
 * Consumes `steps.<channel>`: each due step is sent, its outcome published, then the message acked.
 * A step whose send throws is nak'ed with a growing delay and retried.
 */
export async function startSender(options: SenderOptions): Promise<Subscription> {
  const durable = `sender-${options.channel.toLowerCase()}`;
  return options.bus.consume(
    {
      stream: 'STEPS',
      durable,
      filterSubject: stepSubject(options.channel),
      concurrency: options.concurrency ?? 16,
      maxDeliver: options.maxDeliver ?? 10,
    },
    async (msg: BusMessage) => {
      let step: busV1.StepDue;
      try {
        step = busV1.StepDue.decode(msg.data);
      } catch (err) {
        options.logger.error({ err, seq: msg.seq }, 'undecodable step message, dropped');
        msg.term('undecodable');
        return;
      }
      await withSpan(`send ${options.channel}`, { 'messaging.system': 'nats', 'rrs.step_id': step.stepId }, async () => {
        try {
          const result = await options.send(step);
          await publishStepResult(options.bus, step, result);
          sends.inc({ channel: options.channel, outcome: result.outcome });
          msg.ack();
        } catch (err) {
          const delay = Math.min(60_000, 1_000 * 2 ** (msg.deliveryCount - 1));
          options.logger.warn({ err, stepId: step.stepId, delivery: msg.deliveryCount, retryInMs: delay }, 'send failed, will retry');
          msg.nak(delay);
        }
      }, { kind: SpanKind.CONSUMER, parent: extractTraceContext(msg.headers) });
    },
  );
}
