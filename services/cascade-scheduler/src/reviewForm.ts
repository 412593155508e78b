import { LINK_INACTIVE_CODE, linkExpired, type LinkPurpose, type schedulerV1 } from '@rrs/proto';
import { DomainError, NotFoundError, type Pool, type PoolClient } from '@rrs/runtime';
import { issueBotLinkCodes } from './botLinks';
import { TOKEN_PATTERN, type ReviewLink } from './links';
import { DEFAULT_LOW_RATING_THRESHOLD } from './organizationSettings';
import { markStaleOf } from './overviewRollup';
import type { AddressHasher } from './personHash';

export type { ReviewLink } from './links';

const REVIEW_LINK_QUERY = `
  SELECT rr.id, rr.organization_id, rr.token, rr.status, rr.recipient_id, rr.opened_at, rr.canceled_at, rr.location_id, rr.customer_name, rr.contact, rr.rated_at, ls.name AS location_name, ls.review_links,
         os.locale, os.name AS organization_name, os.low_rating_threshold, ra.rating, fb.text AS feedback, r.email, r.phone,
         EXISTS (SELECT 1 FROM suppressions su WHERE su.organization_id = rr.organization_id
                   AND su.address IN (lower(nullif(r.email, '')), nullif(r.phone, ''))) AS unsubscribed,
         greatest(rr.created_at, (SELECT max(rs.sent_at) FROM recipient_steps rs WHERE rs.recipient_id = rr.recipient_id)) AS last_message_at,
         clock_timestamp() AS db_now
    FROM review_requests rr
    LEFT JOIN location_snapshots ls ON ls.organization_id = rr.organization_id AND ls.location_id = rr.location_id
    LEFT JOIN organization_settings os ON os.organization_id = rr.organization_id
    LEFT JOIN ratings ra ON ra.review_request_id = rr.id
    LEFT JOIN feedback fb ON fb.review_request_id = rr.id
    LEFT JOIN recipients r ON r.id = rr.recipient_id
   WHERE rr.token = $1`;

const localeDetails = (link: Pick<ReviewLink, 'locale'>) => ({ locale: link.locale === 'ru' ? 'ru' : 'en' });

/** A canceled request's link, for the review form: `not_found` with code `link_inactive` and the form's locale (the "no longer active" page). */
export function linkInactive(link: Pick<ReviewLink, 'locale'>): DomainError {
  return new DomainError('not_found', LINK_INACTIVE_CODE, 'this review request is no longer active', { details: localeDetails(link) });
}

/**
 * The review link of a token, used for `purpose`; `not_found` for an unknown or malformed one (a
 * malformed one is not looked up), `not_found` with code `link_expired` (the form's locale in the
 * details, for the expired page) past the purpose's lifetime (LINK_LIFETIME_DAYS of @rrs/proto), and,
 * for the review form, `link_inactive` once its request was canceled without a rating (a rated link
 * keeps its thank-you page). The unsubscribe page of a canceled request still works.
 */
export async function loadReviewLink(db: Pool | PoolClient, token: string, purpose: LinkPurpose = 'review'): Promise<ReviewLink> {
  const link = TOKEN_PATTERN.test(token) ? (await db.query<ReviewLink>(REVIEW_LINK_QUERY, [token])).rows[0] : undefined;
  if (!link) throw new NotFoundError('review link', { message: 'unknown review link' });
  if (linkExpired(purpose, link.last_message_at, link.db_now)) {
    throw new DomainError('not_found', 'link_expired', `the ${purpose} link has expired`, { details: localeDetails(link) });
  }
  if (purpose === 'review' && link.canceled_at !== null && link.rating === null) throw linkInactive(link);
  return link;
}

export function lowRatingThresholdOf(link: ReviewLink): number {
  return link.low_rating_threshold ?? DEFAULT_LOW_RATING_THRESHOLD;
}

export function toForm(link: ReviewLink): schedulerV1.ReviewForm {
  return {
    token: link.token,
    locationName: link.location_name ?? '',
    locale: link.locale === 'ru' ? 'ru' : 'en',
    rating: link.rating ?? 0,
    feedbackGiven: link.feedback !== null,
    lowRatingThreshold: lowRatingThresholdOf(link),
    reviewLinks: link.review_links ?? [],
    organizationName: link.organization_name ?? '',
    unsubscribed: link.unsubscribed,
    email: link.email ?? '',
    botLinks: [],
  };
}

/** The form as it is now (after a change by the caller). */
export async function currentForm(pool: Pool, token: string, purpose: LinkPurpose = 'review'): Promise<schedulerV1.ReviewForm> {
  return toForm(await loadReviewLink(pool, token, purpose));
}

/** The form's data; with `recordOpen`, the first view is recorded as `opened`. */
export async function getReviewForm(pool: Pool, hasher: AddressHasher, token: string, recordOpen: boolean, purpose: LinkPurpose = 'review', botChannels: readonly string[] = []): Promise<schedulerV1.ReviewForm> {
  const link = await loadReviewLink(pool, token, purpose);
  const botLinks = await issueBotLinkCodes(pool, hasher, link, botChannels);
  if (recordOpen && link.opened_at === null) {
    // With the overview's stale mark of an old request (overviewRollup.ts), in the same statement.
    await pool.query(
      `WITH changed AS (UPDATE review_requests SET opened_at = coalesce(opened_at, clock_timestamp()), status = CASE WHEN status = 'created' THEN 'opened' ELSE status END WHERE id = $1 RETURNING id)
       ${markStaleOf('changed')}`,
      [link.id],
    );
  }
  return { ...toForm(link), botLinks };
}
