import { busV1, STEP_RESULT_SUBJECT } from '@rrs/proto';
import { injectTraceContext, type Bus } from '@rrs/runtime';

export type StepOutcome = busV1.StepOutcome;
export const StepOutcome = busV1.StepOutcome;

export interface SendResult {
  outcome: StepOutcome;
  /** Machine-readable, e.g. `provider_rejected`, `not_registered`, `no_balance`. */
  reason?: string;
  providerMessageId?: string;
  parts?: number;
}

/** The step a result is about; a receipt knows these from the send log, a send from the step itself. */
export interface ResultTarget {
  stepId: string;
  attemptId: string;
  channel: string;
  organizationId: string;
}

/** Publishes a step's outcome to the scheduler; the msgId makes a re-publish of the same outcome a no-op. */
export async function publishStepResult(bus: Bus, target: ResultTarget, result: SendResult): Promise<void> {
  const body = busV1.StepResult.encode({
    stepId: target.stepId,
    attemptId: target.attemptId,
    channel: target.channel,
    outcome: result.outcome,
    reason: result.reason ?? '',
    providerMessageId: result.providerMessageId ?? '',
    parts: result.parts ?? 0,
    at: new Date(),
    organizationId: target.organizationId,
  }).finish();
  await bus.publish(STEP_RESULT_SUBJECT, body, { msgId: `${target.attemptId}:${result.outcome}`, headers: injectTraceContext({}) });
}

/** Lower-case result label for metrics and logs, e.g. `sent`, `no_balance`. */
export function resultLabel(outcome: StepOutcome): string {
  return String(outcome).replace(/^STEP_OUTCOME_/, '').toLowerCase();
}
