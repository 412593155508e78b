import { eventSubject, EVENT_TYPES, type schedulerV1 } from '@rrs/proto';
import { ConflictError, InvalidError, inTransaction, type Pool, type PoolClient } from '@rrs/runtime';
import { recordRated } from './cooldown';
import { rate } from './engine';
import { finishEventOf, reviewRequestRatedEvent } from './finishEvent';
import { refreshFinishEvent, rewriteWaitingEvent, writeOutbox } from './outbox';
import { markStale } from './overviewRollup';
import { dbNow, lockRecipients, saveStates, type LoadedRecipient } from './recipientStore';
import { takeFeedPosition } from './ratingFeed';
import { feedbackRecorded, ratingRecorded } from './ratingItems';
import { currentForm, linkInactive, loadReviewLink, lowRatingThresholdOf, type ReviewLink } from './reviewForm';

export const MAX_FEEDBACK_LENGTH = 2_000;

export interface RatingOptions {
  minuteMs: number;
  /** How long (flow minutes) a low rating's finish event waits for the private feedback. */
  feedbackWindowMinutes: number;
  /** How long a low rating's alert waits for the private feedback (ms of real time). */
  alertHoldMs: number;
}

/**
 * Records a review link's rating or feedback row once (`insert` is an INSERT … ON CONFLICT DO NOTHING),
 * in a transaction that first locks the link's recipient: the recipient row is the lock of a
 * recipient's state, taken before anything else. Then the link's own row: a cancel (of the cascade, or
 * of the review request) that committed since the link was read closes it here, so no rating lands on a
 * canceled request. When the row is new, `recorded` runs in the same transaction with the database time
 * and, for a cascade link, the recipient's state.
 */
async function recordOnce(
  pool: Pool,
  link: ReviewLink,
  insert: { text: string; values: unknown[] },
  recorded: (client: PoolClient, now: Date, state: LoadedRecipient | undefined) => Promise<void>,
): Promise<boolean> {
  return inTransaction(pool, async (client) => {
    const states = link.recipient_id ? await lockRecipients(client, [link.recipient_id]) : new Map<string, LoadedRecipient>();
    const { rows: current } = await client.query<{ canceled: boolean }>('SELECT canceled_at IS NOT NULL AS canceled FROM review_requests WHERE id = $1 FOR UPDATE', [link.id]);
    if (current[0]?.canceled) throw linkInactive(link);
    const { rowCount } = await client.query(insert.text, insert.values);
    if (!rowCount) return false;
    const now = await dbNow(client);
    await recorded(client, now, link.recipient_id ? states.get(link.recipient_id) : undefined);
    return true;
  });
}

/**
 * Records the first rating of a link once: on the review request and, for a cascade link, on the
 * recipient, whose pending steps are canceled and which finishes `rated`. The public review links are
 * shown to every rater, low or high, and that is recorded. A low rating's finish event waits for the
 * feedback form (or the feedback window) so that it carries the feedback.
 */
export async function submitRating(pool: Pool, options: RatingOptions, token: string, rating: number): Promise<schedulerV1.SubmitRatingResponse> {
  if (!Number.isInteger(rating) || rating < 1 || rating > 5) throw InvalidError.field('/rating', 'an integer from 1 to 5');
  const link = await loadReviewLink(pool, token);
  const insert = { text: 'INSERT INTO ratings (review_request_id, organization_id, rating) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', values: [link.id, link.organization_id, rating] };
  const recorded = await recordOnce(pool, link, insert, async (client, now, state) => {
    // The links the page shows with the rating, whatever the rating: the evidence that nobody is gated.
    await client.query(
      `UPDATE review_requests SET status = 'rated', rated_at = $2, opened_at = coalesce(opened_at, $2), public_links_shown_at = $2, public_links_shown = $3::jsonb WHERE id = $1`,
      [link.id, now, JSON.stringify(link.review_links ?? [])],
    );
    await markStale(client, [link.id]);
    await recordRated(client, { organizationId: link.organization_id, person: state?.recipient ?? personOfContact(link.contact) }, now);
    await ratingRecorded(client, link, rating, now, options.alertHoldMs);
    // Last before the commit: the feed's counter row stays locked from here to the commit.
    const placeInFeed = () => takeFeedPosition(client, link.organization_id, link.id);
    // A low rating's event waits for the feedback form (or the feedback window) so that it carries the feedback.
    const availableAt = rating <= lowRatingThresholdOf(link) ? new Date(now.getTime() + options.feedbackWindowMinutes * options.minuteMs) : now;
    if (!state) {
      // A link made by POST /review-requests: reported as `review_request.rated`, keyed by the link in the outbox.
      const event = reviewRequestRatedEvent({
        organizationId: link.organization_id, reviewRequestId: link.id, locationId: link.location_id, customerName: link.customer_name, contact: link.contact, rating, feedback: null, ratedAt: now,
      });
      await writeOutbox(client, eventSubject(EVENT_TYPES.reviewRequestRated), [{ ...event, recipientId: link.id, availableAt }]);
      await placeInFeed();
      return;
    }
    const finishedBefore = state.recipient.status === 'finished';
    state.eventNotBefore = availableAt;
    rate(state, rating, { now, minuteMs: options.minuteMs });
    await saveStates(client, [state], now);
    if (finishedBefore) {
      // The finish was reported without a rating: the rating gets its own event, so that it still reaches the CRM.
      const event = finishEventOf(state, now, EVENT_TYPES.cascadeRecipientRated);
      await writeOutbox(client, eventSubject(EVENT_TYPES.cascadeRecipientRated), [{ ...event, recipientId: state.recipient.id, availableAt, headers: state.meta.traceContext }]);
    }
    await placeInFeed();
  });
  const form = await currentForm(pool, token);
  return { form, recorded, feedbackRequested: form.rating > 0 && form.rating <= form.lowRatingThreshold && !form.feedbackGiven };
}

/** The person of a link made by POST /review-requests, whose one `contact` is an email or a phone. */
function personOfContact(contact: string): { email: string; phone: string } {
  return contact.includes('@') ? { email: contact, phone: '' } : { email: '', phone: contact.startsWith('+') ? contact : '' };
}

/** Private feedback after a low rating; recorded once, and the recipient's held finish event now carries it. */
export async function submitFeedback(pool: Pool, token: string, text: string): Promise<schedulerV1.SubmitFeedbackResponse> {
  const trimmed = text.trim();
  if (trimmed.length === 0 || trimmed.length > MAX_FEEDBACK_LENGTH) throw InvalidError.field('/text', `1 to ${MAX_FEEDBACK_LENGTH} characters`);
  const link = await loadReviewLink(pool, token);
  if (link.rating === null) throw new ConflictError('not_rated', 'rate first; feedback follows a rating');
  const insert = { text: 'INSERT INTO feedback (review_request_id, organization_id, text) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', values: [link.id, link.organization_id, trimmed] };
  const recorded = await recordOnce(pool, link, insert, async (client, now, state) => {
    await client.query(`UPDATE review_requests SET status = 'feedback', feedback_at = $2 WHERE id = $1`, [link.id, now]);
    await feedbackRecorded(client, link, trimmed, now);
    if (!state) {
      const render = () =>
        reviewRequestRatedEvent({
          organizationId: link.organization_id, reviewRequestId: link.id, locationId: link.location_id, customerName: link.customer_name, contact: link.contact, rating: link.rating!, feedback: trimmed, ratedAt: link.rated_at ?? now,
        }).payload;
      await rewriteWaitingEvent(client, link.id, { release: true }, render);
    } else {
      state.recipient.feedback = trimmed;
      state.dirty = true;
      await saveStates(client, [state], now);
      await refreshFinishEvent(client, state, now, { release: true });
    }
    // The rating moves to the end of the feed, now with its feedback (docs/cascades.md "The ratings feed").
    await takeFeedPosition(client, link.organization_id, link.id);
  });
  return { form: await currentForm(pool, token), recorded };
}
