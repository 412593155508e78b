import { DEFAULT_CASCADE_PAGE, MAX_CASCADE_PAGE, RATING_STATUS_FILTERS, type schedulerV1 } from '@rrs/proto';
import { InvalidError, inTransaction, NotFoundError, type Pool, type PoolClient } from '@rrs/runtime';
import { dayRangeSql, optionalDayRangeProblems } from './dayRange';
import { isUuid } from './ids';

export const HANDLED_FILTERS = ['handled', 'unhandled'] as const;

/** A rating with what the inbox shows beside it; `WHERE` follows. Review requests made alone have no cascade. */
export const RATING_ROWS = `
  SELECT ra.review_request_id, ra.rating, ra.created_at, ra.handled_at, ra.handled_by, f.text AS feedback, rr.customer_name, rr.contact, rr.location_id, c.id AS cascade_id, c.external_id,
         ra.actionable_at, ra.respond_by, ra.assigned_to, ra.resolution_note, clock_timestamp() AS db_now
    FROM ratings ra
    JOIN review_requests rr ON rr.id = ra.review_request_id
    LEFT JOIN feedback f ON f.review_request_id = ra.review_request_id
    LEFT JOIN recipients rc ON rc.id = rr.recipient_id
    LEFT JOIN cascades c ON c.id = rc.cascade_id`;

export interface RatingRow {
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
  actionable_at: Date | null;
  respond_by: Date | null;
  assigned_to: string | null;
  resolution_note: string | null;
  db_now: Date;
}

/** A rating's state in the workflow: resolved once handled, in progress while assigned, else new. */
const statusOf = (r: Pick<RatingRow, 'handled_at' | 'assigned_to'>) => (r.handled_at ? 'resolved' : r.assigned_to ? 'in_progress' : 'new');

export const entryOf = (r: RatingRow): schedulerV1.RatingEntry => ({
  reviewRequestId: r.review_request_id, rating: r.rating, feedback: r.feedback ?? '', ratedAt: r.created_at, customerName: r.customer_name, contact: r.contact,
  locationId: r.location_id, cascadeId: r.cascade_id ?? '', externalId: r.external_id ?? '', handledAt: r.handled_at ?? undefined, handledBy: r.handled_by ?? '',
  status: statusOf(r), assignedTo: r.assigned_to ?? '', actionable: r.actionable_at !== null, respondBy: r.respond_by ?? undefined,
  overdue: r.actionable_at !== null && r.handled_at === null && r.respond_by !== null && r.respond_by < r.db_now, resolutionNote: r.resolution_note ?? '',
});

/** SQL condition of the inbox's status filter (`$n` is its parameter; '' = any). */
const STATUS_SQL = (n: number) => `($${n} = ''
        OR ($${n} = 'resolved' AND ra.handled_at IS NOT NULL)
        OR ($${n} = 'in_progress' AND ra.handled_at IS NULL AND ra.assigned_to IS NOT NULL)
        OR ($${n} = 'new' AND ra.handled_at IS NULL AND ra.assigned_to IS NULL)
        OR ($${n} = 'open' AND ra.handled_at IS NULL AND ra.actionable_at IS NOT NULL)
        OR ($${n} = 'overdue' AND ra.handled_at IS NULL AND ra.actionable_at IS NOT NULL AND ra.respond_by < clock_timestamp()))`;

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
  if (input.status && !(RATING_STATUS_FILTERS as readonly string[]).includes(input.status)) problems.push({ parameter: 'status', detail: `must be one of ${RATING_STATUS_FILTERS.join(', ')}` });
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
        AND ${STATUS_SQL(11)}
        AND ($12 = '' OR ra.assigned_to = $12)
      ORDER BY ra.created_at DESC, ra.review_request_id DESC LIMIT $6`,
    [input.organizationId, input.maxRating, input.withFeedback, input.locationId, input.after || null, limit + 1, input.handled, input.fromDay, input.toDay, input.timeZone || 'UTC', input.status, input.assignedTo],
  );
  const page = rows.slice(0, limit);
  return { ratings: page.map(entryOf), nextAfter: rows.length > limit ? page[page.length - 1].review_request_id : '' };
}

/** One rating as the inbox shows it; `not_found` when it is not the organization's. */
export async function ratingEntry(db: Pool | PoolClient, organizationId: string, reviewRequestId: string): Promise<schedulerV1.RatingEntry> {
  if (!isUuid(organizationId) || !isUuid(reviewRequestId)) throw new NotFoundError('rating');
  const { rows } = await db.query<RatingRow>(`${RATING_ROWS} WHERE ra.organization_id = $1 AND ra.review_request_id = $2`, [organizationId, reviewRequestId]);
  if (!rows[0]) throw new NotFoundError('rating');
  return entryOf(rows[0]);
}

/**
 * Marks a rating handled by a member (resolved, without a note), or clears the mark (reopened). A second
 * mark keeps the first one's time and member (who handled it first is what the inbox shows). Another
 * organization's rating is not found. A change is recorded in the rating's history.
 */
export async function setRatingHandled(pool: Pool, input: schedulerV1.SetRatingHandledRequest): Promise<schedulerV1.SetRatingHandledResponse> {
  if (!isUuid(input.organizationId) || !isUuid(input.reviewRequestId)) throw new NotFoundError('rating');
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query<{ changed: boolean }>(
      `WITH before AS (SELECT handled_at FROM ratings WHERE organization_id = $1 AND review_request_id = $2 FOR UPDATE)
       UPDATE ratings SET handled_at = CASE WHEN $3 THEN coalesce(ratings.handled_at, now()) END, handled_by = CASE WHEN $3 THEN coalesce(handled_by, $4) END,
              resolution_note = CASE WHEN $3 THEN resolution_note END
         FROM before WHERE organization_id = $1 AND review_request_id = $2
       RETURNING (before.handled_at IS NULL) = $3 AS changed`,
      [input.organizationId, input.reviewRequestId, input.handled, input.memberId],
    );
    if (!rows[0]) throw new NotFoundError('rating');
    if (rows[0].changed) {
      await client.query(`INSERT INTO rating_history (review_request_id, organization_id, member_id, kind) VALUES ($1, $2, $3, $4)`, [input.reviewRequestId, input.organizationId, input.memberId, input.handled ? 'resolved' : 'reopened']);
    }
    return { rating: await ratingEntry(client, input.organizationId, input.reviewRequestId) };
  });
}
