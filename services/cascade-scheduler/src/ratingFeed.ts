import { DEFAULT_RATING_FEED_PAGE, MAX_RATING_FEED_PAGE, type schedulerV1 } from '@rrs/proto';
import { InvalidError, type Pool, type PoolClient } from '@rrs/runtime';
import { isUuid } from './ids';

/*
 * The ratings feed (docs/cascades.md, "The ratings feed"): every rating of an organization — cascade
 * recipients' and review requests', late ones included — in the order it was recorded, read from a
 * position on. A rating takes the next position of its organization when it is recorded, and again
 * when its private feedback is recorded (it moves to the end, now with the feedback), so a reader that
 * read it before the feedback came gets it once more, complete.
 *
 * Positions are taken from the organization's counter row, which stays locked until the transaction
 * commits: positions of one organization are committed in their order, so a reader that sees a
 * position sees every lower one, and resuming after the last position read misses nothing and repeats
 * nothing. (A sequence would not do: its numbers are taken in one order and committed in another.)
 */

/**
 * Gives the link's rating the next position of its organization's feed. Called last in the
 * transaction that records the rating (or its feedback), to hold the counter row for as short a time
 * as possible: ratings of one organization commit one after the other from here.
 */
export async function takeFeedPosition(client: PoolClient, organizationId: string, reviewRequestId: string): Promise<void> {
  await client.query(
    `WITH next AS (
       INSERT INTO rating_feed_counters AS counter (organization_id, last_position) VALUES ($1, 1)
       ON CONFLICT (organization_id) DO UPDATE SET last_position = counter.last_position + 1
       RETURNING last_position)
     UPDATE ratings SET feed_position = (SELECT last_position FROM next) WHERE review_request_id = $2`,
    [organizationId, reviewRequestId],
  );
}

interface FeedRow {
  feed_position: string;
  review_request_id: string;
  rating: number;
  rated_at: Date;
  feedback: string | null;
  feedback_at: Date | null;
  location_id: string;
  customer_name: string;
  contact: string;
  public_links_shown: Array<{ provider: string; url: string }> | null;
  recipient_id: string | null;
  name: string | null;
  email: string | null;
  phone: string | null;
  contact_external_id: string | null;
  finish_reason: string | null;
  cascade_id: string | null;
  external_id: string | null;
}

/** A review request made alone keeps one contact: an email, or a phone. */
function personOf(row: FeedRow): { name: string; email: string; phone: string } {
  if (row.recipient_id !== null) return { name: row.name ?? '', email: row.email ?? '', phone: row.phone ?? '' };
  const contact = row.contact;
  return { name: row.customer_name, email: contact.includes('@') ? contact : '', phone: contact.startsWith('+') ? contact : '' };
}

function itemOf(row: FeedRow): schedulerV1.RatingFeedItem {
  return {
    position: Number(row.feed_position),
    reviewRequestId: row.review_request_id,
    cascadeId: row.cascade_id ?? '',
    cascadeExternalId: row.external_id ?? '',
    hasCascadeExternalId: row.external_id !== null,
    recipientId: row.recipient_id ?? '',
    contactExternalId: row.contact_external_id ?? '',
    locationId: row.location_id,
    ...personOf(row),
    rating: row.rating,
    feedback: row.feedback ?? '',
    ratedAt: row.rated_at,
    feedbackAt: row.feedback_at ?? undefined,
    publicLinksShown: row.public_links_shown ?? [],
    // A recipient that finished before it rated (its window closed, it was canceled or unsubscribed): `cascade.recipient.rated`.
    late: row.recipient_id !== null && row.finish_reason !== 'rated',
  };
}

/** The organization's ratings after position `after` (0 = from the start), in feed order. */
export async function listRatingFeed(pool: Pool, input: schedulerV1.ListRatingFeedRequest): Promise<schedulerV1.ListRatingFeedResponse> {
  const limit = input.limit || DEFAULT_RATING_FEED_PAGE;
  const problems = [];
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_RATING_FEED_PAGE) problems.push({ parameter: 'limit', detail: `must be an integer from 1 to ${MAX_RATING_FEED_PAGE}` });
  if (!Number.isSafeInteger(input.after) || input.after < 0) problems.push({ parameter: 'after', detail: 'must be a position of the feed' });
  if (problems.length > 0) throw new InvalidError(problems, { message: problems.map((p) => `${p.parameter} ${p.detail}`).join('; ') });
  if (!isUuid(input.organizationId)) return { ratings: [], last: input.after, hasMore: false };
  const { rows } = await pool.query<FeedRow>(
    `SELECT ra.feed_position, ra.review_request_id, ra.rating, coalesce(rr.rated_at, ra.created_at) AS rated_at, f.text AS feedback, f.created_at AS feedback_at,
            rr.location_id, rr.customer_name, rr.contact, rr.public_links_shown, rr.recipient_id,
            r.name, r.email, r.phone, r.contact_external_id, r.finish_reason, c.id AS cascade_id, c.external_id
       FROM ratings ra
       JOIN review_requests rr ON rr.id = ra.review_request_id
       LEFT JOIN feedback f ON f.review_request_id = ra.review_request_id
       LEFT JOIN recipients r ON r.id = rr.recipient_id
       LEFT JOIN cascades c ON c.id = r.cascade_id
      WHERE ra.organization_id = $1 AND ra.feed_position > $2
      ORDER BY ra.feed_position LIMIT $3`,
    [input.organizationId, input.after, limit + 1],
  );
  const page = rows.slice(0, limit).map(itemOf);
  return { ratings: page, last: page.length ? page[page.length - 1].position : input.after, hasMore: rows.length > limit };
}
