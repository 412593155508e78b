import { eventsV1, stepDelivery } from '@rrs/proto';

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

export function cascadeRecipientFinishedData(finished: eventsV1.CascadeRecipientFinished) {
  return {
    cascadeId: finished.cascadeId,
    cascadeExternalId: orNull(finished.cascadeExternalId),
    reviewRequestId: orNull(finished.reviewRequestId),
    locationId: orNull(finished.locationId),
    recipient: finished.recipient
      ? {
          id: finished.recipient.id,
          name: orNull(finished.recipient.name),
          email: orNull(finished.recipient.email),
          phone: orNull(finished.recipient.phone),
          contactExternalId: orNull(finished.recipient.contactExternalId),
        }
      : null,
    rating: finished.rating === 0 ? null : finished.rating,
    feedback: orNull(finished.feedback),
    reason: finished.reason,
    steps: finished.steps.map((step) => ({
      order: step.order,
      channel: step.channel,
      status: step.status,
      reason: orNull(step.reason),
      sentAt: iso(step.sentAt),
      reroutedTo: orNull(step.reroutedTo),
      deliveredAt: iso(step.deliveredAt),
      provider: orNull(step.provider),
      delivery: stepDelivery(step),
    })),
    finishedAt: iso(finished.finishedAt),
  };
}

export function eventData(event: eventsV1.Event): unknown {
  switch (event.payload?.$case) {
    case 'cascadeRecipientFinished':
      return cascadeRecipientFinishedData(event.payload.cascadeRecipientFinished);
    case 'reviewRequestRated': {
      const rated = event.payload.reviewRequestRated;
      return {
        reviewRequestId: rated.reviewRequestId,
        locationId: orNull(rated.locationId),
        customerName: orNull(rated.customerName),
        contact: orNull(rated.contact),
        rating: rated.rating,
        feedback: orNull(rated.feedback),
        ratedAt: iso(rated.ratedAt),
      };
    }
    case 'personErased':
      return {};
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
