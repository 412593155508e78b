/** Bus subjects. Channel keys are upper-case in the catalog and lower-case in subjects. */
export const STEP_RESULT_SUBJECT = 'steps.result';

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
