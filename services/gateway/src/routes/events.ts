/**
 * The webhook events of the public API, described for the OpenAPI document's `webhooks` section: the
 * JSON body the webhooks service POSTs to an endpoint (`{type, timestamp, data}`, rendered by
 * services/webhooks/src/payload.ts; docs/webhooks.md) with the Standard Webhooks headers. The gateway
 * serves no route for them: a receiver implements them. One entry per WebhookEventType of @rrs/proto.
 */
import { z } from 'zod';
import { EVENT_TYPES, type WebhookEventType as WebhookEventTypeName } from '@rrs/proto';
import type { WebhookDefinition } from '../http/openapi';
import { ChannelKey, FinishReason, StepDelivery, StepStatus } from './enums';
import { EXAMPLE_IDS } from './shapes';

const timestamp = z.string().meta({ description: 'When the event happened (ISO 8601); the `webhook-timestamp` header is when this attempt was signed.' });

const RecipientOutcome = z
  .object({
      cascadeId: z.string(),
      cascadeExternalId: z.string().nullable().meta({ description: "The cascade's `externalId` (for POST /contacts, the contact's)." }),
      reviewRequestId: z.string().nullable(),
      locationId: z.string().nullable(),
      recipient: z
        .object({
          id: z.string(),
          name: z.string().nullable(),
          email: z.string().nullable(),
          phone: z.string().nullable().meta({ description: 'E.164.' }),
          contactExternalId: z.string().nullable().meta({ description: "The contact's externalId, for a recipient that came from POST /contacts." }),
        })
        .nullable(),
      rating: z.number().int().min(1).max(5).nullable().meta({ description: '1–5, or null when the recipient did not rate.' }),
      feedback: z.string().nullable().meta({ description: 'The private text left after a low rating, or null.' }),
      reason: FinishReason,
      steps: z.array(
        z.object({
          order: z.number().int(),
          channel: ChannelKey,
          status: StepStatus,
          reason: z.string().nullable().meta({ description: 'A SkipReason for a skipped step; the reason of a failed one; otherwise null.' }),
          sentAt: z.string().nullable(),
          reroutedTo: ChannelKey.nullable().meta({ description: 'The channel a rerouted phone step finally went through; null when not rerouted.' }),
          deliveredAt: z.string().nullable().meta({ description: 'When a delivery receipt confirmed the message; null without one (a negative receipt leaves `reason` `undelivered: <reason>`).' }),
          provider: z.string().nullable().meta({ description: 'The provider that took the message, or that refused it for a failed step (e.g. `smtp`, `postmark`, `smsc`, `smsru`, `greenapi`, `telegram_bot`, `max_bot`); null before or when unknown.' }),
          delivery: StepDelivery,
        }),
      ),
      finishedAt: z.string().nullable(),
  })
  .meta({ id: 'RecipientOutcome', description: "A cascade recipient's outcome: the payload of `cascade.recipient.finished` and `cascade.recipient.rated`." });

const CascadeRecipientFinishedBody = z
  .object({ type: z.literal(EVENT_TYPES.cascadeRecipientFinished), timestamp, data: RecipientOutcome })
  .meta({ id: 'CascadeRecipientFinishedEvent' });

const CascadeRecipientRatedBody = z
  .object({ type: z.literal(EVENT_TYPES.cascadeRecipientRated), timestamp, data: RecipientOutcome })
  .meta({ id: 'CascadeRecipientRatedEvent' });

const ReviewRequestRatedBody = z
  .object({
    type: z.literal(EVENT_TYPES.reviewRequestRated),
    timestamp,
    data: z.object({
      reviewRequestId: z.string(),
      locationId: z.string().nullable(),
      customerName: z.string().nullable(),
      contact: z.string().nullable().meta({ description: 'The email or phone the link was made for, as given to POST /review-requests.' }),
      rating: z.number().int().min(1).max(5),
      feedback: z.string().nullable().meta({ description: 'The private text left after a low rating, or null.' }),
      ratedAt: z.string().nullable(),
    }),
  })
  .meta({ id: 'ReviewRequestRatedEvent' });

const WebhookTestBody = z
  .object({
    type: z.literal(EVENT_TYPES.webhookTest),
    timestamp,
    data: z.object({ endpointId: z.string(), message: z.string() }),
  })
  .meta({ id: 'WebhookTestEvent' });

/** Who the example outcome events are about (both recipient events carry the same payload). */
const EXAMPLE_RECIPIENT_OUTCOME = {
  cascadeId: EXAMPLE_IDS.cascade,
  cascadeExternalId: 'crm-1042',
  reviewRequestId: EXAMPLE_IDS.reviewRequest,
  locationId: EXAMPLE_IDS.location,
  recipient: { id: EXAMPLE_IDS.recipient, name: 'Anna', email: 'anna@example.com', phone: '+79161234567', contactExternalId: 'crm-1042' },
};

/** Every event type has its entry: the compiler refuses a WebhookEventType without one. */
const EVENTS: Record<WebhookEventTypeName, Omit<WebhookDefinition, 'type'>> = {
  [EVENT_TYPES.cascadeRecipientFinished]: {
    operationId: 'cascadeRecipientFinished',
    summary: 'A recipient finished its cascade',
    description:
      'Sent when a recipient of a cascade finishes, for whatever reason (`data.reason`), with the rating and feedback when given. Subscribe with POST /webhooks. ' +
      'Every field is present; unknown values are null. Delivery is at least once: deduplicate on `webhook-id`.',
    body: CascadeRecipientFinishedBody,
    example: {
      type: 'cascade.recipient.finished',
      timestamp: '2026-05-01T12:30:00.000Z',
      data: {
        ...EXAMPLE_RECIPIENT_OUTCOME,
        rating: 5,
        feedback: null,
        reason: 'rated',
        steps: [
          { order: 1, channel: 'EMAIL', status: 'sent', reason: null, sentAt: '2026-05-01T12:00:01.200Z', reroutedTo: null, deliveredAt: null, provider: 'smtp', delivery: 'unknown' },
          { order: 2, channel: 'SMS', status: 'canceled', reason: null, sentAt: null, reroutedTo: null, deliveredAt: null, provider: null, delivery: null },
        ],
        finishedAt: '2026-05-01T12:30:00.000Z',
      },
    },
  },
  [EVENT_TYPES.cascadeRecipientRated]: {
    operationId: 'cascadeRecipientRated',
    summary: 'A recipient rated after finishing',
    description:
      'Sent when a rating arrives after its recipient finished (the response window closed, the cascade was canceled, the recipient unsubscribed): the same payload as `cascade.recipient.finished`, ' +
      'now with the rating (and, after a low rating, the feedback: the event waits for it like the finish does). The finish is not reported again; the first rating stands. Subscribe with POST /webhooks.',
    body: CascadeRecipientRatedBody,
    example: {
      type: 'cascade.recipient.rated',
      timestamp: '2026-05-04T09:15:00.000Z',
      data: {
        ...EXAMPLE_RECIPIENT_OUTCOME,
        rating: 4,
        feedback: null,
        reason: 'exhausted',
        steps: [{ order: 1, channel: 'EMAIL', status: 'sent', reason: null, sentAt: '2026-05-01T12:00:01.200Z', reroutedTo: null, deliveredAt: null, provider: 'smtp', delivery: 'unknown' }],
        finishedAt: '2026-05-01T12:00:01.300Z',
      },
    },
  },
  [EVENT_TYPES.reviewRequestRated]: {
    operationId: 'reviewRequestRated',
    summary: 'A review-request link was rated',
    description:
      'Sent when the customer rates through a link made by POST /review-requests (links of cascades are reported by the cascade events). After a low rating it waits for the private feedback (or the feedback window) and carries it. Subscribe with POST /webhooks.',
    body: ReviewRequestRatedBody,
    example: {
      type: 'review_request.rated',
      timestamp: '2026-05-01T15:00:00.000Z',
      data: { reviewRequestId: EXAMPLE_IDS.reviewRequest, locationId: EXAMPLE_IDS.location, customerName: 'Anna', contact: 'anna@example.com', rating: 5, feedback: null, ratedAt: '2026-05-01T15:00:00.000Z' },
    },
  },
  [EVENT_TYPES.webhookTest]: {
    operationId: 'webhookTest',
    summary: 'A test event',
    description: 'Sent to one endpoint by POST /webhooks/{id}/test; no endpoint subscribes to it.',
    body: WebhookTestBody,
    example: { type: 'webhook.test', timestamp: '2026-05-01T12:00:00.000Z', data: { endpointId: '0190c3c4-0000-7000-8000-000000000001', message: 'A test event: this endpoint receives signed webhooks.' } },
  },
};

export const PUBLIC_WEBHOOKS: readonly WebhookDefinition[] = Object.entries(EVENTS).map(([type, event]) => ({ type, ...event }));
