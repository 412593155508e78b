import type { Plan } from './states';

/*
 * How far one organization's webhooks fan out, per plan: the one place the numbers are written
 * (docs/webhooks.md, "Fan-out bounds"). The webhooks service enforces the endpoint count (409
 * `webhook_endpoint_limit`, nothing created); the attempts per delivery and how long they go on are the
 * delivery policy's (services/webhooks config.ts), the same for every plan and listed here so the
 * bound per plan reads in one table.
 */
export interface WebhookFanOut {
  /** Endpoints an organization may register. */
  endpoints: number;
}

export const WEBHOOK_FAN_OUT: Readonly<Record<Plan, WebhookFanOut>> = {
  trial: { endpoints: 2 },
  standard: { endpoints: 10 },
  pro: { endpoints: 50 },
};

/** The fan-out of a plan; an unknown or missing plan gets the smallest (trial's). */
export function webhookFanOut(plan: string): WebhookFanOut {
  return WEBHOOK_FAN_OUT[plan as Plan] ?? WEBHOOK_FAN_OUT.trial;
}
