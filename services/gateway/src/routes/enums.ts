/**
 * The enums of the gateway's APIs, as zod schemas made from the value lists of `@rrs/proto`
 * (proto/src/states.ts), which the services type their states with. Each has an `id`, so it is one
 * named schema in `components.schemas` of the OpenAPI documents (a generated client gets a type per
 * enum); a value added to a list in `@rrs/proto` appears here, in the validation and in the documents.
 * Declare each schema once: the id names it in every document.
 */
import { z } from 'zod';
import {
  CASCADE_STATUSES, CHANNEL_KEY_PATTERN, CONTACT_FIELDS, CRM_AUTH_MODES, CRM_KINDS, FINISH_REASONS, KNOWN_CHANNEL_KEYS, LOCALES, MAX_CHANNEL_KEY_LENGTH, PLANS, RECIPIENT_STATUSES, REROUTE_REASONS,
  PERSON_ERASURE_STATUSES, RATING_SOURCES, REVIEW_REQUEST_STATUSES, SCOPES, SKIP_REASONS, STEP_DELIVERY_OUTCOMES, STEP_STATUSES, SUBSCRIBABLE_EVENT_TYPES, SUPPRESSION_SOURCES, WEBHOOK_ATTEMPT_OUTCOMES, WEBHOOK_DELIVERY_STATUSES,
  WEBHOOK_DISABLED_REASONS, WEBHOOK_EVENT_TYPES,
} from '@rrs/proto';

const list = (values: readonly string[]) => values.map((v) => `\`${v}\``).join(', ');

export const CascadeStatus = z.enum(CASCADE_STATUSES).meta({ id: 'CascadeStatus', description: '`running`, then `finished` once every recipient has finished (at once when every recipient was skipped).' });

export const RecipientStatus = z.enum(RECIPIENT_STATUSES).meta({ id: 'RecipientStatus', description: "A recipient's state in its cascade; a finished one has a `finishReason`." });

export const FinishReason = z.enum(FINISH_REASONS).meta({
  id: 'FinishReason',
  description:
    'Why a recipient finished: `rated` (the customer rated), `exhausted` (every step done, something was sent, no rating), `unreachable` (nothing could be sent), ' +
    '`unsubscribed` (the customer unsubscribed, or every step was skipped as opted out, or the person was in the opt-out ledger when the request came), `canceled` (the cascade was canceled), ' +
    "`cooldown` (skipped: the person was asked, or rated, within the organization's cooldown), `no_consent` (skipped: the organization requires consent and the request gave no `consentAt`).",
});

export const StepStatus = z.enum(STEP_STATUSES).meta({
  id: 'StepStatus',
  description: '`pending` (waiting for earlier steps) → `scheduled` (has `dueAt`) → `dispatched` (handed to the sender) → `sent` or `failed`; or `skipped` (see `reason`) or `canceled` (a rating, an unsubscribe or a cancel came first).',
});

export const StepDelivery = z.enum(STEP_DELIVERY_OUTCOMES).nullable().meta({
  id: 'StepDelivery',
  description: "The step's delivery outcome, beside its `status`: `delivered` (a delivery receipt confirmed it: `deliveredAt`), `undelivered` (a negative receipt: `reason` says why, e.g. `undelivered: expired`), " +
    '`unknown` (it went out and no receipt has said either, yet or ever: channels without receipts); null while or when it never went out.',
});

export const SkipReason = z.enum(SKIP_REASONS).meta({
  id: 'SkipReason',
  description: 'Why a step was skipped: `no_contact` (the recipient lacks the channel\'s contact field), `opted_out` (the person is in the organization\'s opt-out ledger, through any channel), `channel_not_configured` (the organization has not configured the channel), ' +
    '`cooldown` and `no_consent` (the recipient was skipped at intake for that reason; see FinishReason), `phone_not_allowed` (a phone step, SMS/MAX/TELEGRAM, to a number the phone channels refuse: premium-rate, shared-cost, toll-free, satellite or international-network and other non-personal numbers, or a number outside the organization\'s allowed countries).',
});

export const RerouteReason = z.enum(REROUTE_REASONS).meta({
  id: 'RerouteReason',
  description: 'Why a phone step moved on to the next phone channel (SMS → MAX → TELEGRAM): `no_balance` (no SMS balance), `unreachable` (the number is not on the messenger), `channel_not_configured`, `account_unavailable` (the messenger\'s working account can\'t send: blocked, suspended or logged out; docs/channels.md, "Account health").',
});

export const ReviewRequestStatus = z.enum(REVIEW_REQUEST_STATUSES).meta({
  id: 'ReviewRequestStatus',
  description: '`created` → `opened` (the form was viewed) → `rated` → `feedback` (private feedback left after the rating); or `canceled` (POST /review-requests/{id}/cancel before a rating: the link shows "no longer active" and takes no rating).',
});

export const RatingSource = z.enum(RATING_SOURCES).meta({
  id: 'RatingSource',
  description: 'Where a rating came from: `cascade` (a cascade recipient\'s link; reported by `cascade.recipient.finished`, or `cascade.recipient.rated` when `late`) or `review_request` (a link of POST /review-requests; reported by `review_request.rated`).',
});

export const KnownChannelKey = z.enum(KNOWN_CHANNEL_KEYS).meta({ id: 'KnownChannelKey', description: `The channels this release ships: ${list(KNOWN_CHANNEL_KEYS)}.` });

/**
 * A channel key. The catalog is live (GET /channels): a channel deployed later is valid too, so a key is
 * any upper-case word, the known ones listed for clients.
 */
export const ChannelKey = z
  .union([KnownChannelKey, z.string().max(MAX_CHANNEL_KEY_LENGTH).regex(CHANNEL_KEY_PATTERN)])
  .meta({ id: 'ChannelKey', description: 'A channel key: one of the known channels, or a channel added at run time (upper-case letters, digits and `_`); GET /channels lists the live ones.' });

export const ContactField = z.enum(CONTACT_FIELDS).meta({ id: 'ContactField', description: 'The recipient field a channel needs: `email` for EMAIL, `phone` for SMS, MAX and TELEGRAM.' });

export const SubscribableEventType = z.enum(SUBSCRIBABLE_EVENT_TYPES).meta({ id: 'SubscribableEventType', description: `An event type a webhook endpoint can subscribe to: ${list(SUBSCRIBABLE_EVENT_TYPES)}.` });

export const WebhookEventType = z.enum(WEBHOOK_EVENT_TYPES).meta({ id: 'WebhookEventType', description: 'The type of a delivered event: a subscribable one, or `webhook.test` (POST /webhooks/{id}/test).' });

export const PersonErasureStatus = z.enum(PERSON_ERASURE_STATUSES).meta({ id: 'PersonErasureStatus', description: '`pending` (recorded; some service has not erased yet), `done` (every service the erasure covers has erased the person: docs/customer-respect.md).' });
export const WebhookDeliveryStatus = z.enum(WEBHOOK_DELIVERY_STATUSES).meta({ id: 'WebhookDeliveryStatus', description: '`pending` (an attempt is due), `delivered` (a 2xx came back), `failed` (retries exhausted, or the endpoint is gone or disabled).' });

export const WebhookAttemptOutcome = z.enum(WEBHOOK_ATTEMPT_OUTCOMES).meta({ id: 'WebhookAttemptOutcome', description: '`delivered` (2xx), `retry` (another attempt is scheduled), `failed` (the last attempt).' });

export const WebhookDisabledReason = z.enum(WEBHOOK_DISABLED_REASONS).meta({
  id: 'WebhookDisabledReason',
  description: '`manual` (PATCH), `gone` (the endpoint answered 410), `failing` (every attempt failed for 5 days).',
});

export const Plan = z.enum(PLANS).meta({ id: 'Plan', description: 'A trial plan cannot send messages.' });

export const Locale = z.enum(LOCALES).meta({ id: 'Locale', description: 'The language of the default templates and of the pages recipients see.' });

export const Scope = z.enum(SCOPES).meta({ id: 'Scope', description: 'An API key permission; the operations list the one they need.' });

export const SuppressionSource = z.enum(SUPPRESSION_SOURCES).meta({
  id: 'SuppressionSource',
  description:
    'Where an opt-out came from: `unsubscribe_page` (the /u/ page), `one_click` (an RFC 8058 one-click unsubscribe from the mail client), `stop_reply` (a STOP-style reply the provider reported), ' +
    '`complaint` (a spam complaint), `hard_bounce` (the provider reported the address dead), `admin` (added through the admin API).',
});

export const CrmKind = z.enum(CRM_KINDS).meta({ id: 'CrmKind', description: 'The CRM a connector talks to: `amocrm` (amoCRM, also .amocrm.com and Kommo accounts) or `bitrix24`.' });

export const CrmAuthMode = z.enum(CRM_AUTH_MODES).meta({ id: 'CrmAuthMode', description: 'How the connector reaches its CRM: `long_lived` (an amoCRM long-lived token), `oauth` (amoCRM OAuth 2.0), `webhook` (a Bitrix24 inbound webhook).' });
