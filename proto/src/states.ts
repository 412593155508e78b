/**
 * The values of every state, reason and key the API reports, each list written here once. The services
 * type their state machines with the union of a list (`StepStatus`, `FinishReason`, …), and the gateway
 * turns the same lists into the enums of its OpenAPI documents and response schemas. To add a value, add
 * it to its list: the types, the validation and the documents follow; nothing else names the values.
 * What each value means is in docs/cascades.md (cascades) and docs/webhooks.md (webhooks).
 */
import { EVENT_TYPES } from './subjects';

/** `cascade.status` (GET /cascades/{id}, start results): finished once every recipient has finished. */
export const CASCADE_STATUSES = ['running', 'finished'] as const;
export type CascadeStatus = (typeof CASCADE_STATUSES)[number];

/** A recipient's `status` in a cascade: `waiting` = its last step went out, it waits for a rating until `windowClosesAt`. */
export const RECIPIENT_STATUSES = ['running', 'waiting', 'finished'] as const;
export type RecipientStatus = (typeof RECIPIENT_STATUSES)[number];

/** Why a recipient finished (`finishReason`; the `reason` of the `cascade.recipient.finished` event). */
export const FINISH_REASONS = ['rated', 'exhausted', 'unreachable', 'unsubscribed', 'canceled', 'cooldown', 'no_consent'] as const;
export type FinishReason = (typeof FINISH_REASONS)[number];

/** A step's `status`. */
export const STEP_STATUSES = ['pending', 'scheduled', 'dispatched', 'sent', 'failed', 'skipped', 'canceled'] as const;
export type StepStatus = (typeof STEP_STATUSES)[number];

/**
 * A step's delivery outcome (`delivery`), a field of its own beside `status`: `delivered` (a receipt
 * confirmed it), `undelivered` (a negative receipt; `reason` says why), `unknown` (it went out, and no
 * receipt has said either: the channel or provider sends none, or not yet). Null for a step that never
 * went out. Derived from what the step records (stepDelivery), the same for the API and the events.
 */
export const STEP_DELIVERY_OUTCOMES = ['delivered', 'undelivered', 'unknown'] as const;
export type StepDeliveryOutcome = (typeof STEP_DELIVERY_OUTCOMES)[number];

/** The prefix of a sent step's `reason` once a negative receipt came: `undelivered: <provider reason>`. */
export const UNDELIVERED_REASON = 'undelivered';

/** A step's delivery outcome from its status, receipt time and reason (null: it never went out). */
export function stepDelivery(step: { status: string; sentAt?: Date | string | null; deliveredAt?: Date | string | null; reason?: string | null }): StepDeliveryOutcome | null {
  if (step.deliveredAt) return 'delivered';
  if (step.status !== 'sent' && !step.sentAt) return null;
  return step.reason?.startsWith(UNDELIVERED_REASON) ? 'undelivered' : 'unknown';
}

/** Why a step was skipped: the `reason` of every step whose status is `skipped`. */
export const SKIP_REASONS = ['no_contact', 'opted_out', 'channel_not_configured', 'cooldown', 'no_consent', 'phone_not_allowed'] as const;
export type SkipReason = (typeof SKIP_REASONS)[number];

/**
 * Why a recipient was skipped when its request was accepted: stored finished with this reason (its
 * steps skipped with the step reason beside it) and counted in `skipped`. In the order they are checked.
 */
export const INTAKE_SKIPS = [
  { finishReason: 'unreachable', stepReason: 'no_contact' },
  // Reachable only through a phone the phone channels refuse (premium rate, satellite, outside the allowed countries: phones.ts).
  { finishReason: 'unreachable', stepReason: 'phone_not_allowed' },
  { finishReason: 'unsubscribed', stepReason: 'opted_out' },
  { finishReason: 'no_consent', stepReason: 'no_consent' },
  { finishReason: 'cooldown', stepReason: 'cooldown' },
] as const satisfies ReadonlyArray<{ finishReason: FinishReason; stepReason: SkipReason }>;
export type IntakeSkip = (typeof INTAKE_SKIPS)[number];

/** Where an entry of the opt-out ledger came from (`source`; docs/customer-respect.md). */
/** An erasure request per person (docs/customer-respect.md, "Erasure"): `done` once every service it covers erased. */
export const PERSON_ERASURE_STATUSES = ['pending', 'done'] as const;
export type PersonErasureStatus = (typeof PERSON_ERASURE_STATUSES)[number];

export const SUPPRESSION_SOURCES = ['unsubscribe_page', 'one_click', 'stop_reply', 'complaint', 'hard_bounce', 'admin'] as const;
export type SuppressionSource = (typeof SUPPRESSION_SOURCES)[number];

/** The `reason` of a sender's OPTED_OUT result: the sources a provider reports. */
export const OPT_OUT_REASONS = ['stop_reply', 'complaint', 'hard_bounce'] as const satisfies ReadonlyArray<SuppressionSource>;
export type OptOutReason = (typeof OPT_OUT_REASONS)[number];

/** Why a `scheduled` step is waiting past the time it came due (its `reason`); it goes out at `dueAt`. */
export const STEP_HOLD_REASONS = ['send_window'] as const;
export type StepHoldReason = (typeof STEP_HOLD_REASONS)[number];

/** Why a phone step moved on to the next phone channel (`reroute.hops[].reason`). */
export const REROUTE_REASONS = ['no_balance', 'unreachable', 'channel_not_configured', 'account_unavailable'] as const;
export type RerouteReason = (typeof REROUTE_REASONS)[number];

/**
 * The reason of a messenger's UNREACHABLE result while its working account can't send: `account_` and
 * the account's state in snake case (`account_blocked`, `account_not_authorized`, …).
 */
export function accountUnavailableReason(state: string): string {
  return `account_${state.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`;
}

/** How a messenger's UNREACHABLE result moves its step on: the account's fault, or the number's. */
export function rerouteReasonOfUnreachable(resultReason: string): RerouteReason {
  return resultReason.startsWith('account_') ? 'account_unavailable' : 'unreachable';
}

/** A review request's (personal link's) `status`, in the order it advances; `canceled` ends it without a rating. */
export const REVIEW_REQUEST_STATUSES = ['created', 'opened', 'rated', 'feedback', 'canceled'] as const;
export type ReviewRequestStatus = (typeof REVIEW_REQUEST_STATUSES)[number];

/** Where a rating of the ratings feed came from: a cascade recipient's link, or a link of POST /review-requests. */
export const RATING_SOURCES = ['cascade', 'review_request'] as const;
export type RatingSource = (typeof RATING_SOURCES)[number];

/**
 * The channel keys known today. The catalog is live (senders announce their channels at run time), so a
 * key outside this list is valid wherever it matches CHANNEL_KEY_PATTERN; this list names the channels
 * this release ships.
 */
export const KNOWN_CHANNEL_KEYS = ['EMAIL', 'SMS', 'MAX', 'TELEGRAM'] as const;
export type KnownChannelKey = (typeof KNOWN_CHANNEL_KEYS)[number];

/** The recipient field a channel needs (its catalog entry's `contactField`). */
export const CONTACT_FIELDS = ['email', 'phone'] as const;
export type ContactField = (typeof CONTACT_FIELDS)[number];

/** Event types a webhook endpoint can subscribe to. */
export const SUBSCRIBABLE_EVENT_TYPES = [EVENT_TYPES.cascadeRecipientFinished, EVENT_TYPES.cascadeRecipientRated, EVENT_TYPES.reviewRequestRated] as const;
export type SubscribableEventType = (typeof SUBSCRIBABLE_EVENT_TYPES)[number];

/** Event types a webhook delivery can carry: the subscribable ones and the test event (POST /webhooks/{id}/test). */
export const WEBHOOK_EVENT_TYPES = [...SUBSCRIBABLE_EVENT_TYPES, EVENT_TYPES.webhookTest] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** A webhook delivery's `status`. */
export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type WebhookDeliveryStatus = (typeof WEBHOOK_DELIVERY_STATUSES)[number];

/** The `outcome` of one delivery attempt. */
export const WEBHOOK_ATTEMPT_OUTCOMES = ['delivered', 'retry', 'failed'] as const;
export type WebhookAttemptOutcome = (typeof WEBHOOK_ATTEMPT_OUTCOMES)[number];

/** Why a webhook endpoint is disabled (`disabledReason`). */
export const WEBHOOK_DISABLED_REASONS = ['manual', 'gone', 'failing'] as const;
export type WebhookDisabledReason = (typeof WEBHOOK_DISABLED_REASONS)[number];

/** A CRM connector's `kind` (docs/connectors.md). */
export const CRM_KINDS = ['amocrm', 'bitrix24'] as const;
export type CrmKind = (typeof CRM_KINDS)[number];

/** How a connector reaches its CRM (`authMode`): amoCRM a long-lived token or OAuth 2.0, Bitrix24 an inbound webhook. */
export const CRM_AUTH_MODES = ['long_lived', 'oauth', 'webhook'] as const;
export type CrmAuthMode = (typeof CRM_AUTH_MODES)[number];

/** An organization's plan. */
export const PLANS = ['trial', 'standard', 'pro'] as const;
export type Plan = (typeof PLANS)[number];

/**
 * What a plan may put to work: recipients created per minute and per day (cascades, channel sends,
 * review requests, contacts with startCascade), counted per organization besides the per-key request
 * limit; over either budget a request is 429 `recipient_quota_exceeded` and creates nothing. A minute's
 * budget is at least one full request (MAX_RECIPIENTS_PER_REQUEST) on a paid plan. docs/api-conventions.md.
 */
export const PLAN_RECIPIENT_QUOTAS: Record<Plan, { perMinute: number; perDay: number }> = {
  trial: { perMinute: 20, perDay: 100 },
  standard: { perMinute: 1_000, perDay: 20_000 },
  pro: { perMinute: 5_000, perDay: 200_000 },
};

/** An organization's locale: the language of its default templates and of its recipients' pages. */
export const LOCALES = ['en', 'ru'] as const;
export type Locale = (typeof LOCALES)[number];

/** True when `value` is one of `list` (narrows an untyped value, e.g. a proto string, to the list's union). */
export function isOneOf<T extends string>(list: readonly T[], value: unknown): value is T {
  return typeof value === 'string' && (list as readonly string[]).includes(value);
}
