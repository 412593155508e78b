import { eventsV1, EVENT_TYPES } from '@rrs/proto';
import { uuidv7 } from '@rrs/runtime';
import type { LoadedRecipient } from './loadedRecipient';

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
  steps: Array<{ order: number; channel: string; status: string; reason: string; sentAt: Date | null; reroutedTo: string; deliveredAt?: Date | null; provider?: string | null }>;
  finishedAt: Date;
}

/** The events that carry a recipient's outcome: its finish, and a rating that came after it. */
export type RecipientEventType = typeof EVENT_TYPES.cascadeRecipientFinished | typeof EVENT_TYPES.cascadeRecipientRated;

/**
 * The `cascade.recipient.finished` (or `.rated`) event as an outbox row. The event id is the msgId of
 * the relay's publish and the webhook-id of every delivery, so each finish is one event however often
 * it is relayed. A late rating's event happens when the rating came (`occurredAt`).
 */
export function finishEventFor(event: FinishedRecipientEvent, type: RecipientEventType = EVENT_TYPES.cascadeRecipientFinished, occurredAt = event.finishedAt): { msgId: string; payload: Uint8Array } {
  const id = uuidv7(occurredAt.getTime());
  const { recipient } = event;
  const payload = eventsV1.Event.encode({
    id,
    type,
    organizationId: event.organizationId,
    occurredAt,
    payload: {
      $case: 'cascadeRecipientFinished',
      cascadeRecipientFinished: {
        cascadeId: event.cascadeId,
        cascadeExternalId: event.cascadeExternalId ?? '',
        recipient: { id: recipient.id, name: recipient.name, email: recipient.email, phone: recipient.phone, contactExternalId: recipient.contactExternalId ?? '' },
        rating: event.rating ?? 0,
        feedback: event.feedback ?? '',
        reason: event.reason,
        steps: event.steps.map((step) => ({ ...step, sentAt: step.sentAt ?? undefined, deliveredAt: step.deliveredAt ?? undefined, provider: step.provider ?? '' })),
        finishedAt: event.finishedAt,
        reviewRequestId: event.reviewRequestId,
        locationId: event.locationId,
      },
    },
  }).finish();
  return { msgId: id, payload };
}

/** The finish event (or late-rating event) of a loaded recipient, as its state is now. */
export function finishEventOf(state: LoadedRecipient, now: Date, type: RecipientEventType = EVENT_TYPES.cascadeRecipientFinished): { msgId: string; payload: Uint8Array } {
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
      deliveredAt: step.deliveredAt,
      provider: step.provider ?? null,
    })),
    finishedAt: recipient.finishedAt ?? now,
  }, type, type === EVENT_TYPES.cascadeRecipientRated ? (recipient.ratedAt ?? now) : (recipient.finishedAt ?? now));
}

export interface RatedReviewRequest {
  organizationId: string;
  reviewRequestId: string;
  locationId: string;
  customerName: string;
  contact: string;
  rating: number;
  feedback: string | null;
  ratedAt: Date;
}

/** The `review_request.rated` event of a link made by POST /review-requests, as an outbox row. */
export function reviewRequestRatedEvent(rated: RatedReviewRequest): { msgId: string; payload: Uint8Array } {
  const id = uuidv7(rated.ratedAt.getTime());
  const payload = eventsV1.Event.encode({
    id,
    type: EVENT_TYPES.reviewRequestRated,
    organizationId: rated.organizationId,
    occurredAt: rated.ratedAt,
    payload: {
      $case: 'reviewRequestRated',
      reviewRequestRated: {
        reviewRequestId: rated.reviewRequestId,
        locationId: rated.locationId,
        customerName: rated.customerName,
        contact: rated.contact,
        rating: rated.rating,
        feedback: rated.feedback ?? '',
        ratedAt: rated.ratedAt,
      },
    },
  }).finish();
  return { msgId: id, payload };
}
