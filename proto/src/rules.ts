/**
 * Rules and limits that more than one service applies. Each is written here once, beside the scopes
 * and subjects, and every side (the gateway before it calls a service, the service that owns the
 * effect) imports it from here. Pure data and functions: no transport, no error classes.
 */

/**
 * Small requests' steps of one channel in flight past its in-flight bound, at most (the dispatcher's lane,
 * docs/operations.md "Fair share"), and so what a sender replica takes of them at once beside its window
 * of bulk ones: written once for both sides.
 */
export const SMALL_REQUEST_LANE = 32;

/** Recipients per `POST /cascades` or channel send (the spec's method reference; the ceiling of the per-organization setting). */
export const MAX_RECIPIENTS_PER_REQUEST = 500;

/**
 * How long a customer's links work, in days after the last message sent to their recipient (or, for a
 * link no message carried yet, or one made by POST /review-requests, after the link was made). The
 * review link (`/r/<token>`) is for the visit just made; the unsubscribe link (`/u/<token>`, and the
 * RFC 8058 one-click POST every email advertises) keeps working far longer, since an old email in a
 * mailbox must still let its reader opt out. Past it a link shows the expired page (410).
 */
export const LINK_LIFETIME_DAYS = { review: 30, unsubscribe: 365 } as const;
export type LinkPurpose = keyof typeof LINK_LIFETIME_DAYS;

/** Whether a link of `purpose` whose last message went at `lastMessageAt` no longer works at `now`. */
export function linkExpired(purpose: LinkPurpose, lastMessageAt: Date, now: Date): boolean {
  return now.getTime() > lastMessageAt.getTime() + LINK_LIFETIME_DAYS[purpose] * 86_400_000;
}

/**
 * The domain code of a review link whose request was canceled (its cascade, or the review request
 * itself, through the API): the page says "this request is no longer active" (410) and takes no rating.
 */
export const LINK_INACTIVE_CODE = 'link_inactive';

/** Cascades per page of `GET /cascades` (and the console's list). */
export const MAX_CASCADE_PAGE = 100;
export const DEFAULT_CASCADE_PAGE = 50;

/** Ratings per page of the ratings feed (`GET /ratings`). */
export const MAX_RATING_FEED_PAGE = 500;
export const DEFAULT_RATING_FEED_PAGE = 100;

/** Steps per flow. */
export const MAX_FLOW_STEPS = 10;

/**
 * The response window (docs/cascades.md): after a recipient's last step went out it waits this many
 * flow minutes for a rating before it finishes `exhausted`; 0 finishes it when the last step goes out.
 * Set per flow, else the organization's (default 3 days). At most a year.
 */
export const MAX_RESPONSE_WINDOW_MINUTES = 525_600;
export const DEFAULT_RESPONSE_WINDOW_MINUTES = 4_320;

export function isResponseWindowMinutes(value: number): boolean {
  return Number.isInteger(value) && value >= 0 && value <= MAX_RESPONSE_WINDOW_MINUTES;
}

/**
 * The cooldown (docs/customer-respect.md): a person sent a review request, or who rated, within this
 * many days is not asked again by the organization (matched by email or phone across locations and
 * cascades); 0 turns it off. A request may set `ignoreCooldown` for a genuinely new order.
 */
export const DEFAULT_COOLDOWN_DAYS = 30;
export const MAX_COOLDOWN_DAYS = 365;

export function isCooldownDays(value: number): boolean {
  return Number.isInteger(value) && value >= 0 && value <= MAX_COOLDOWN_DAYS;
}

/**
 * The spec: MAX and TELEGRAM messages carry the text of the organization's SMS template (the sender
 * puts the location name on the first line), for direct sends, flow steps and SMS steps rerouted to
 * them alike. A template of their own is refused; the template list shows them the SMS text.
 */
export const CHANNELS_WITH_SMS_TEXT = ['MAX', 'TELEGRAM'] as const;

/** The channel whose template a message on `channel` is written with. */
export function templateChannelOf(channel: string): string {
  return (CHANNELS_WITH_SMS_TEXT as readonly string[]).includes(channel) ? 'SMS' : channel;
}

/** Channel keys are upper-case words (`EMAIL`, `SMS`, …); a subject uses the lower-case form, so a key has no dot. */
export const MAX_CHANNEL_KEY_LENGTH = 32;
/** The whole rule for a channel key, length included, so a side that tests the pattern needs nothing else. */
export const CHANNEL_KEY_PATTERN = new RegExp(`^[A-Z][A-Z0-9_]{0,${MAX_CHANNEL_KEY_LENGTH - 1}}$`);

export function isChannelKey(channel: string): boolean {
  return CHANNEL_KEY_PATTERN.test(channel);
}

/** The keys of a cascade's `counts` (GET /cascades/{id}), in the order they are listed. */
export const CASCADE_COUNT_KEYS = [
  'recipients', 'queued', 'skipped', 'running', 'waiting', 'finished', 'rated', 'exhausted', 'unreachable', 'unsubscribed', 'canceled', 'cooldown', 'noConsent',
  'opened', 'feedback', 'stepsSent', 'stepsFailed', 'stepsSkipped', 'stepsPending', 'stepsDelivered', 'stepsUndelivered',
] as const;

export type CascadeCountKey = (typeof CASCADE_COUNT_KEYS)[number];

/** What the sending rule looks at: the organization's plan and whether its account email is confirmed. */
export interface SendingAccount {
  plan: string;
  emailConfirmed: boolean;
}

/** Why an organization may not send right now; each side raises it as its own error of `kind`. */
export interface SendingRefusal {
  kind: 'payment_required' | 'conflict';
  code: 'plan_required' | 'email_not_confirmed';
  message: string;
}

/**
 * The sending rule (spec, "Channel behaviour rules"): a trial plan cannot send (402 `plan_required`),
 * and the account email must be confirmed first (409 `email_not_confirmed`). Null when sending is allowed.
 */
export function sendingRefusal(account: SendingAccount): SendingRefusal | null {
  if (account.plan === 'trial') return { kind: 'payment_required', code: 'plan_required', message: 'a trial plan cannot send messages; upgrade the plan in the account' };
  if (!account.emailConfirmed) return { kind: 'conflict', code: 'email_not_confirmed', message: "confirm the account's email address before sending messages" };
  return null;
}

/** A public review link the thank-you page shows and its redirect follows: a web address, never a script or another scheme. */
export function isPublicReviewUrl(url: string): boolean {
  return /^https?:\/\//i.test(url);
}
