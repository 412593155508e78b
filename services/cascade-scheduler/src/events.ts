import { eventsV1, EVENT_TYPES } from '@rrs/proto';
import { uuidv7 } from '@rrs/runtime';

export interface FinishedRecipientEvent {
  organizationId: string;
  cascadeId: string;
  cascadeExternalId: string | null;
  locationId: string;
  reviewRequestId: string;
  recipient: { id: string; name: string; email: string; phone: string; contactExternalId?: string };
  rating: number | null;
  feedback: string | null;
  reason: string;
  steps: Array<{ order: number; channel: string; status: string; reason: string; sentAt: Date | null; reroutedTo: string }>;
  finishedAt: Date;
}

/**
 * The `cascade.recipient.finished` event as an outbox row. The event id is the msgId of the relay's
 * publish and the webhook-id of every delivery, so each finish is one event however often it is relayed.
 */
export function finishEventFor(e: FinishedRecipientEvent): { msgId: string; payload: Uint8Array } {
  const id = uuidv7(e.finishedAt.getTime());
  const payload = eventsV1.Event.encode({
    id,
    type: EVENT_TYPES.cascadeRecipientFinished,
    organizationId: e.organizationId,
    occurredAt: e.finishedAt,
    payload: {
      $case: 'cascadeRecipientFinished',
      cascadeRecipientFinished: {
      cascadeId: e.cascadeId,
      cascadeExternalId: e.cascadeExternalId ?? '',
      recipient: { id: e.recipient.id, name: e.recipient.name, email: e.recipient.email, phone: e.recipient.phone, contactExternalId: e.recipient.contactExternalId ?? '' },
      rating: e.rating ?? 0,
      feedback: e.feedback ?? '',
      reason: e.reason,
      steps: e.steps.map((s) => ({ order: s.order, channel: s.channel, status: s.status, reason: s.reason, sentAt: s.sentAt ?? undefined, reroutedTo: s.reroutedTo })),
      finishedAt: e.finishedAt,
      reviewRequestId: e.reviewRequestId,
      locationId: e.locationId,
      },
    },
  }).finish();
  return { msgId: id, payload };
}
