/** Bus subjects. Channel keys are upper-case in the catalog and lower-case in subjects. */
/**
 * Step results: StepResultBatch messages, what every sender publishes. No channel can take this
 * subject: channel keys have no dot.
 */
export const STEP_RESULT_BATCH_SUBJECT = 'steps.result.batch';

/**
 * The durable JetStream consumer of a channel's sender on the STEPS stream: every replica of the
 * sender shares it, and the scheduler's result watchdog asks it whether a channel's steps are still
 * waiting to be taken or in progress.
 */
export function senderDurable(channel: string): string {
  return `sender-${channel.toLowerCase()}`;
}

/**
 * Where the dispatcher publishes a channel's steps: bulk requests' steps on `steps.<channel>`, small
 * requests' on `steps.<channel>.small` (docs/operations.md, "Fair share"). Each subject has its own
 * durable consumer, so a small request's step is never queued in the stream behind the bulk's steps in
 * flight; a sender reads both (stepSubjects).
 */
export function stepSubject(channel: string, options: { small?: boolean } = {}): string {
  return options.small ? `steps.${channel.toLowerCase()}.small` : `steps.${channel.toLowerCase()}`;
}

/** The durable consumer of a channel's small requests' steps (`steps.<channel>.small`). */
export function smallStepDurable(channel: string): string {
  return `${senderDurable(channel)}-small`;
}

/** Both subjects of a channel's steps with their durables: what a sender of the channel reads. */
export function stepSubjects(channel: string): { subject: string; durable: string; small: boolean }[] {
  return [
    { subject: stepSubject(channel), durable: senderDurable(channel), small: false },
    { subject: stepSubject(channel, { small: true }), durable: smallStepDurable(channel), small: true },
  ];
}

/**
 * Ratings the review form accepted while the scheduler could not record them (RatingSubmitted, stream
 * RATINGS), read by the scheduler's ratings intake (durable `scheduler-ratings`).
 */
export const RATING_SUBMITTED_SUBJECT = 'ratings.submitted';
export const RATINGS_DURABLE = 'scheduler-ratings';

/** Deduplication id of a rating on the bus: one per link, the first one stands. */
export function ratingMsgId(token: string): string {
  return `rating:${token}`;
}

export function eventSubject(type: string): string {
  return `events.${type}`;
}

export const EVENT_TYPES = {
  cascadeRecipientFinished: 'cascade.recipient.finished',
  /** A rating that came after its recipient finished (response window closed, canceled, unsubscribed): same payload as the finish. */
  cascadeRecipientRated: 'cascade.recipient.rated',
  /** A rating through a link made by POST /review-requests (no cascade). */
  reviewRequestRated: 'review_request.rated',
  webhookTest: 'webhook.test',
} as const;

/**
 * System emails (invitations, password resets, rating alerts and digests, replies to customers;
 * SystemEmail messages) on the STEPS stream: no channel
 * can take this subject, since channel keys have no dot. channel-email reads it with the durable
 * `SYSTEM_EMAIL_DURABLE` and sends each id at most once (docs/channels.md, "System emails").
 */
export const SYSTEM_EMAIL_SUBJECT = 'steps.system.email';
export const SYSTEM_EMAIL_DURABLE = 'sender-system-email';
export const SYSTEM_EMAIL_KINDS = ['invitation', 'password_reset', 'rating_alert', 'rating_digest', 'customer_reply'] as const;
export type SystemEmailKind = (typeof SYSTEM_EMAIL_KINDS)[number];

/** Deduplication id of a system email on the bus (and its send log key). */
export function systemEmailMsgId(id: string): string {
  return `system-email:${id}`;
}

/**
 * Rating alerts to staff chats (StaffChatMessage) on the STEPS stream, like system emails: channel-messenger
 * reads them with `STAFF_CHAT_DURABLE` and sends each id at most once through the channel's official bot.
 */
export const STAFF_CHAT_SUBJECT = 'steps.system.bot';
export const STAFF_CHAT_DURABLE = 'sender-system-bot';

/** Deduplication id of a staff chat message on the bus (and its send log key). */
export function staffChatMsgId(id: string): string {
  return `staff-chat:${id}`;
}
