/** Bus subjects. Channel keys are upper-case in the catalog and lower-case in subjects. */
/**
 * Step results: StepResultBatch messages, what every sender publishes. No channel can take this
 * subject: channel keys have no dot.
 */
export const STEP_RESULT_BATCH_SUBJECT = 'steps.result.batch';

export function stepSubject(channel: string): string {
  return `steps.${channel.toLowerCase()}`;
}

export function eventSubject(type: string): string {
  return `events.${type}`;
}

export const EVENT_TYPES = {
  cascadeRecipientFinished: 'cascade.recipient.finished',
  webhookTest: 'webhook.test',
} as const;
