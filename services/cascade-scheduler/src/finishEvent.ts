import { eventsV1, EVENT_TYPES } from '@rrs/proto';
import { uuidv7 } from '@rrs/runtime';
import type { LoadedRecipient } from './recipientStore';

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
export function finishEventFor(event: FinishedRecipientEvent): { msgId: string; payload: Uint8Array } {
  const id = uuidv7(event.finishedAt.getTime());
  const { recipient } = event;
  const payload = eventsV1.Event.encode({
    id,
    type: EVENT_TYPES.cascadeRecipientFinished,
    organizationId: event.organizationId,
    occurredAt: event.finishedAt,
    payload: {
      $case: 'cascadeRecipientFinished',
      cascadeRecipientFinished: {
        cascadeId: event.cascadeId,
        cascadeExternalId: event.cascadeExternalId ?? '',
        recipient: { id: recipient.id, name: recipient.name, email: recipient.email, phone: recipient.phone, contactExternalId: recipient.contactExternalId ?? '' },
        rating: event.rating ?? 0,
        feedback: event.feedback ?? '',
        reason: event.reason,
        steps: event.steps.map((step) => ({ ...step, sentAt: step.sentAt ?? undefined })),
        finishedAt: event.finishedAt,
        reviewRequestId: event.reviewRequestId,
        locationId: event.locationId,
      },
    },
  }).finish();
  return { msgId: id, payload };
}

/** The finish event of a loaded recipient, as its state is now. */
export function finishEventOf(state: LoadedRecipient, now: Date): { msgId: string; payload: Uint8Array } {
  const { recipient, meta } = state;
  return finishEventFor({
    organizationId: recipient.organizationId,
    cascadeId: recipient.cascadeId,
    cascadeExternalId: meta.cascadeExternalId,
    locationId: meta.locationId,
    reviewRequestId: meta.reviewRequestId,
    recipient: { id: recipient.id, name: recipient.name, email: recipient.email, phone: recipient.phone, contactExternalId: meta.contactExternalId },
    rating: recipient.rating,
    feedback: recipient.feedback,
    reason: recipient.finishReason ?? '',
    steps: state.steps.map((step) => ({
      order: step.order,
      channel: step.channel,
      status: step.status,
      reason: step.reason ?? '',
      sentAt: step.sentAt,
      reroutedTo: step.reroutes.length ? step.reroutes[step.reroutes.length - 1].to : '',
    })),
    finishedAt: recipient.finishedAt ?? now,
  });
}
