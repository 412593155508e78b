import { eventsV1 } from '@rrs/proto';

/**
 * The JSON body of a webhook: `{type, timestamp, data}`, `timestamp` being when the event happened and
 * `data` the event payload in camelCase. Every documented field is present: unknown values are null
 * rather than missing, so receivers need no "absent vs empty" logic.
 */
export interface WebhookBody {
  type: string;
  timestamp: string;
  data: unknown;
}

const orNull = (s: string): string | null => (s === '' ? null : s);
const iso = (d: Date | undefined): string | null => (d ? d.toISOString() : null);

export function cascadeRecipientFinishedData(p: eventsV1.CascadeRecipientFinished) {
  return {
    cascadeId: p.cascadeId,
    cascadeExternalId: orNull(p.cascadeExternalId),
    reviewRequestId: orNull(p.reviewRequestId),
    locationId: orNull(p.locationId),
    recipient: p.recipient
      ? {
          id: p.recipient.id,
          name: orNull(p.recipient.name),
          email: orNull(p.recipient.email),
          phone: orNull(p.recipient.phone),
          contactExternalId: orNull(p.recipient.contactExternalId),
        }
      : null,
    rating: p.rating === 0 ? null : p.rating,
    feedback: orNull(p.feedback),
    reason: p.reason,
    steps: p.steps.map((s) => ({
      order: s.order,
      channel: s.channel,
      status: s.status,
      reason: orNull(s.reason),
      sentAt: iso(s.sentAt),
      reroutedTo: orNull(s.reroutedTo),
    })),
    finishedAt: iso(p.finishedAt),
  };
}

export function eventData(event: eventsV1.Event): unknown {
  switch (event.payload?.$case) {
    case 'cascadeRecipientFinished':
      return cascadeRecipientFinishedData(event.payload.cascadeRecipientFinished);
    case 'webhookTest':
      return { endpointId: event.payload.webhookTest.endpointId, message: event.payload.webhookTest.message };
    case undefined:
      return {};
  }
}

export function renderBody(event: eventsV1.Event): string {
  const body: WebhookBody = { type: event.type, timestamp: (event.occurredAt ?? new Date()).toISOString(), data: eventData(event) };
  return JSON.stringify(body);
}
