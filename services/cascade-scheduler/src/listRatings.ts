import { DEFAULT_CASCADE_PAGE, MAX_CASCADE_PAGE, type schedulerV1 } from '@rrs/proto';
import { InvalidError, NotFoundError, type Pool } from '@rrs/runtime';
import { dayRangeSql, optionalDayRangeProblems } from './dayRange';
import { isUuid } from './ids';


export const HANDLED_FILTERS = ['handled', 'unhandled'] as const;

/** A rating with what the inbox shows beside it; `WHERE` follows. Review requests made alone have no cascade. */
const RATING_ROWS = `
  SELECT ra.review_request_id, ra.rating, ra.created_at, ra.handled_at, ra.handled_by, f.text AS feedback, rr.customer_name, rr.contact, rr.location_id, c.id AS cascade_id, c.external_id
    FROM ratings ra
    JOIN review_requests rr ON rr.id = ra.review_request_id
    LEFT JOIN feedback f ON f.review_request_id = ra.review_request_id
    LEFT JOIN recipients rc ON rc.id = rr.recipient_id
    LEFT JOIN cascades c ON c.id = rc.cascade_id`;

interface RatingRow {
  review_request_id: string;
  rating: number;
  created_at: Date;
  handled_at: Date | null;
  handled_by: string | null;
  feedback: string | null;
  customer_name: string;
  contact: string;
  location_id: string;
  cascade_id: string | null;
  external_id: string | null;
}

const entryOf = (r: RatingRow): schedulerV1.RatingEntry => ({
  reviewRequestId: r.review_request_id, rating: r.rating, feedback: r.feedback ?? '', ratedAt: r.created_at, customerName: r.customer_name, contact: r.contact,
  locationId: r.location_id, cascadeId: r.cascade_id ?? '', externalId: r.external_id ?? '', handledAt: r.handled_at ?? undefined, handledBy: r.handled_by ?? '',
});

/**
 * An organization's ratings, newest first, with the private feedback of those who left one (the
 * console's inbox); the contact is what the request went to.
 */
export async function listRatings(pool: Pool, input: schedulerV1.ListRatingsRequest): Promise<schedulerV1.ListRatingsResponse> {
  const limit = input.limit || DEFAULT_CASCADE_PAGE;
  const problems = [];
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_CASCADE_PAGE) problems.push({ parameter: 'limit', detail: `must be an integer from 1 to ${MAX_CASCADE_PAGE}` });
  if (!Number.isInteger(input.maxRating) || input.maxRating < 0 || input.maxRating > 5) problems.push({ parameter: 'maxRating', detail: 'must be 1 to 5' });
  if (input.after && !isUuid(input.after)) problems.push({ parameter: 'after', detail: 'must be a review request id' });
  if (input.handled && !(HANDLED_FILTERS as readonly string[]).includes(input.handled)) problems.push({ parameter: 'handled', detail: `must be one of ${HANDLED_FILTERS.join(', ')}` });
  problems.push(...optionalDayRangeProblems(input.fromDay, input.toDay));
  if (problems.length > 0) throw new InvalidError(problems, { message: problems.map((p) => `${p.parameter} ${p.detail}`).join('; ') });
  if (!isUuid(input.organizationId)) return { ratings: [], nextAfter: '' };
  const { rows } = await pool.query<RatingRow>(
    `${RATING_ROWS}
      WHERE ra.organization_id = $1
        AND ($2 = 0 OR ra.rating <= $2)
        AND (NOT $3 OR f.text IS NOT NULL)
        AND ($4 = '' OR rr.location_id = $4)
        AND ($5::uuid IS NULL OR (ra.created_at, ra.review_request_id) < (SELECT created_at, review_request_id FROM ratings WHERE review_request_id = $5::uuid))
        AND ($7 = '' OR (ra.handled_at IS NOT NULL) = ($7 = 'handled'))
        AND ${dayRangeSql('ra.created_at', 8, 9, 10)}
      ORDER BY ra.created_at DESC, ra.review_request_id DESC LIMIT $6`,
    [input.organizationId, input.maxRating, input.withFeedback, input.locationId, input.after || null, limit + 1, input.handled, input.fromDay, input.toDay, input.timeZone || 'UTC'],
  );
  const page = rows.slice(0, limit);
  return { ratings: page.map(entryOf), nextAfter: rows.length > limit ? page[page.length - 1].review_request_id : '' };
}

/**
 * Marks a rating handled by a member, or clears the mark. A second mark keeps the first one's time and
 * member (who handled it first is what the inbox shows). Another organization's rating is not found.
 */
export async function setRatingHandled(pool: Pool, input: schedulerV1.SetRatingHandledRequest): Promise<schedulerV1.SetRatingHandledResponse> {
  if (!isUuid(input.organizationId) || !isUuid(input.reviewRequestId)) throw new NotFoundError('rating');
  const { rowCount } = await pool.query(
    `UPDATE ratings SET handled_at = CASE WHEN $3 THEN coalesce(handled_at, now()) END, handled_by = CASE WHEN $3 THEN coalesce(handled_by, $4) END
      WHERE organization_id = $1 AND review_request_id = $2`,
    [input.organizationId, input.reviewRequestId, input.handled, input.memberId],
  );
  if (!rowCount) throw new NotFoundError('rating');
  const { rows } = await pool.query<RatingRow>(`${RATING_ROWS} WHERE ra.organization_id = $1 AND ra.review_request_id = $2`, [input.organizationId, input.reviewRequestId]);
  return { rating: entryOf(rows[0]) };
}
