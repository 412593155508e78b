import type { schedulerV1 } from '@rrs/proto';
import { InvalidError, type Pool } from '@rrs/runtime';
import { isUuid } from './ids';
import { DEFAULT_CASCADE_PAGE, MAX_CASCADE_PAGE } from './listCascades';

/**
 * An organization's ratings, newest first, with the private feedback of those who left one (the
 * console's inbox). Review requests made alone have no cascade; the contact is what the request went to.
 */
export async function listRatings(pool: Pool, input: schedulerV1.ListRatingsRequest): Promise<schedulerV1.ListRatingsResponse> {
  const limit = input.limit || DEFAULT_CASCADE_PAGE;
  const problems = [];
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_CASCADE_PAGE) problems.push({ parameter: 'limit', detail: `must be an integer from 1 to ${MAX_CASCADE_PAGE}` });
  if (!Number.isInteger(input.maxRating) || input.maxRating < 0 || input.maxRating > 5) problems.push({ parameter: 'maxRating', detail: 'must be 1 to 5' });
  if (input.after && !isUuid(input.after)) problems.push({ parameter: 'after', detail: 'must be a review request id' });
  if (problems.length > 0) throw new InvalidError(problems, { message: problems.map((p) => `${p.parameter} ${p.detail}`).join('; ') });
  if (!isUuid(input.organizationId)) return { ratings: [], nextAfter: '' };
  const { rows } = await pool.query(
    `SELECT ra.review_request_id, ra.rating, ra.created_at, f.text AS feedback, rr.customer_name, rr.contact, rr.location_id, c.id AS cascade_id, c.external_id
       FROM ratings ra
       JOIN review_requests rr ON rr.id = ra.review_request_id
       LEFT JOIN feedback f ON f.review_request_id = ra.review_request_id
       LEFT JOIN recipients rc ON rc.id = rr.recipient_id
       LEFT JOIN cascades c ON c.id = rc.cascade_id
      WHERE ra.organization_id = $1
        AND ($2 = 0 OR ra.rating <= $2)
        AND (NOT $3 OR f.text IS NOT NULL)
        AND ($4 = '' OR rr.location_id = $4)
        AND ($5::uuid IS NULL OR (ra.created_at, ra.review_request_id) < (SELECT created_at, review_request_id FROM ratings WHERE review_request_id = $5::uuid))
      ORDER BY ra.created_at DESC, ra.review_request_id DESC LIMIT $6`,
    [input.organizationId, input.maxRating, input.withFeedback, input.locationId, input.after || null, limit + 1],
  );
  const page = rows.slice(0, limit);
  return {
    ratings: page.map((r) => ({
      reviewRequestId: r.review_request_id, rating: r.rating, feedback: r.feedback ?? '', ratedAt: r.created_at, customerName: r.customer_name, contact: r.contact,
      locationId: r.location_id, cascadeId: r.cascade_id ?? '', externalId: r.external_id ?? '',
    })),
    nextAfter: rows.length > limit ? page[page.length - 1].review_request_id : '',
  };
}
