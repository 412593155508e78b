import { busV1, stepSubject, STEP_RESULT_SUBJECT } from '@rrs/proto';
import { extractTraceContext, injectTraceContext, withSpan, SpanKind, type Bus, type Logger, type Pool, type Subscription } from '@rrs/runtime';

/**
 * Publishes a due step to its channel. The attempt id is the Nats-Msg-Id, so publishing the same
 * attempt again (after a crash between publish and marking it dispatched) is dropped by the stream.
 */
export async function publishDueStep(bus: Bus, step: busV1.StepDue): Promise<{ duplicate: boolean }> {
  const ack = await bus.publish(stepSubject(step.channel), busV1.StepDue.encode(step).finish(), {
    msgId: step.attemptId,
    headers: injectTraceContext({}),
  });
  return { duplicate: ack.duplicate };
}

export type StepResultHandler = (result: busV1.StepResult) => Promise<void>;

/**
 * Records every step result reported by senders. A result is recorded once per (attempt, outcome), so a
 * redelivered result message changes nothing.
 */
export async function consumeStepResults(bus: Bus, pool: Pool, logger: Logger, onRecorded?: StepResultHandler): Promise<Subscription> {
  return bus.consume({ stream: 'STEPS', durable: 'scheduler-results', filterSubject: STEP_RESULT_SUBJECT, concurrency: 32 }, async (msg) => {
    let result: busV1.StepResult;
    try {
      result = busV1.StepResult.decode(msg.data);
    } catch (err) {
      logger.error({ err, seq: msg.seq }, 'undecodable step result, dropped');
      msg.term('undecodable');
      return;
    }
    await withSpan('record step result', { 'rrs.step_id': result.stepId, 'rrs.outcome': result.outcome }, async () => {
      const { rowCount } = await pool.query(
        `INSERT INTO step_results (attempt_id, outcome, step_id, channel, reason, provider_message_id)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
        [result.attemptId, result.outcome, result.stepId, result.channel, result.reason, result.providerMessageId],
      );
      if (rowCount && onRecorded) await onRecorded(result);
      msg.ack();
    }, { kind: SpanKind.CONSUMER, parent: extractTraceContext(msg.headers) });
  });
}
