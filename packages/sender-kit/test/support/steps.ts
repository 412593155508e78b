import { busV1, stepSubject, STEP_RESULT_BATCH_SUBJECT } from '@rrs/proto';
import type { Bus, Subscription } from '@rrs/runtime';
import { uuidv7 } from '@rrs/runtime';

/** A due step as the scheduler would publish it. */
export function dueStep(channel: string, overrides: Partial<busV1.StepDue> = {}): busV1.StepDue {
  const stepId = overrides.stepId ?? uuidv7();
  const attempt = overrides.attempt ?? 1;
  return busV1.StepDue.fromPartial({
    stepId,
    attemptId: `${stepId}:${attempt}`,
    attempt,
    organizationId: 'org-1',
    cascadeId: 'cascade-1',
    recipientId: 'recipient-1',
    channel,
    recipient: { name: 'Anna', email: 'anna@example.com', phone: '+79161234567' },
    location: { id: 'loc-1', name: 'Acme Dental', address: 'Main St 1', city: 'Moscow' },
    template: { subject: 'How was {{location}}?', body: 'Hello {{name}}, rate {{location}}: {{link}}' },
    reviewUrl: `https://reviews.example.com/r/tok${stepId.slice(-8)}`,
    unsubscribeUrl: `https://reviews.example.com/u/unsub${stepId.slice(-8)}`,
    locale: 'en',
    ...overrides,
  });
}

/** On the channel's bulk subject, or its small requests' (`small`), as the dispatcher publishes it. */
export async function publishStep(bus: Bus, step: busV1.StepDue, options: { small?: boolean } = {}): Promise<void> {
  await bus.publish(stepSubject(step.channel, options), busV1.StepDue.encode(step).finish(), { msgId: step.attemptId });
}

/** Collects every StepResult published in batches on `steps.result.batch`, as the scheduler would read them. */
export async function collectResults(bus: Bus): Promise<{ results: busV1.StepResult[]; sub: Subscription }> {
  const results: busV1.StepResult[] = [];
  const sub = await bus.consume({ stream: 'STEPS', durable: 'test-scheduler-results', filterSubject: STEP_RESULT_BATCH_SUBJECT }, async (msg) => {
    results.push(...busV1.StepResultBatch.decode(msg.data).results);
    msg.ack();
  });
  return { results, sub };
}
