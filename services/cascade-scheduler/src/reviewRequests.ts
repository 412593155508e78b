import { runIdempotent, type IdempotencyRequest } from '@rrs/idempotency';
import { schedulerV1 } from '@rrs/proto';
import { InvalidError, NotFoundError, uuidv7, type Pool } from '@rrs/runtime';
import { isUuid, reviewToken } from './ids';
import { tokenUrl } from './links';
import { profileAt, type OrganizationProfiles } from './organizationProfiles';
import { savedAnswerCodec, type SavedAnswer } from './savedAnswer';
import type { SnapshotWriter } from './snapshots';
import type { RecipientBudgets } from './recipientBudget';

export interface ReviewRequestDeps {
  pool: Pool;
  profiles: OrganizationProfiles;
  snapshots: SnapshotWriter;
  budgets: RecipientBudgets;
  publicBaseUrl: string;
}

export interface ReviewRequestInput {
  organizationId: string;
  locationId: string;
  customerName: string;
  contact: string;
}

type ReviewRequestAnswer = SavedAnswer<schedulerV1.CreateReviewRequestResponse>;
const answerCodec = savedAnswerCodec(schedulerV1.CreateReviewRequestResponse);

/**
 * A personal review link on its own (POST /review-requests): the same kind of row as a cascade
 * recipient's link, behaving the same way on `/r/<token>`. It is one recipient of the organization's
 * budget, taken in the same transaction (429 `recipient_quota_exceeded` creates nothing). A replay with
 * the same Idempotency-Key returns the saved answer and creates (and takes) nothing.
 */
export async function createReviewRequest(deps: ReviewRequestDeps, input: ReviewRequestInput, idempotency?: IdempotencyRequest): Promise<{ result: ReviewRequestAnswer; replayed: boolean }> {
  if (!input.locationId) throw InvalidError.field('/locationId', 'required');
  const { profile, location } = await profileAt(deps.profiles, input.organizationId, input.locationId);
  await deps.snapshots.write(deps.pool, input.organizationId, profile, location!);
  return runIdempotent(deps.pool, idempotency, answerCodec, async (client) => {
    const id = uuidv7();
    const token = reviewToken();
    await client.query(
      'INSERT INTO review_requests (id, organization_id, token, location_id, customer_name, contact) VALUES ($1, $2, $3, $4, $5, $6)',
      [id, input.organizationId, token, input.locationId, input.customerName, input.contact],
    );
    const recipientBudget = await deps.budgets.take(client, profile.organization, 1);
    return { reviewRequest: { id, token, url: tokenUrl(deps.publicBaseUrl, 'r', token), status: 'created' }, recipientBudget };
  });
}

type CancelAnswer = SavedAnswer<schedulerV1.CancelReviewRequestResponse>;
const cancelCodec = savedAnswerCodec(schedulerV1.CancelReviewRequestResponse);

/**
 * Closes a review link made by POST /review-requests: from now on it shows "this request is no longer
 * active" and accepts no rating. A link already rated keeps its rating (and its thank-you page) and is
 * answered as it is; a second cancel changes nothing. The link's row is locked, so a rating submitted at
 * the same moment either lands first (the link stays rated) or finds the link closed. `not_found` for
 * an unknown id, another organization's link, or a cascade recipient's link (its cascade is what is
 * canceled: POST /cascades/{id}/cancel).
 */
export async function cancelReviewRequest(deps: Pick<ReviewRequestDeps, 'pool' | 'publicBaseUrl'>, organizationId: string, id: string, idempotency?: IdempotencyRequest): Promise<{ result: CancelAnswer; replayed: boolean }> {
  if (!isUuid(id) || !isUuid(organizationId)) throw new NotFoundError('review request');
  return runIdempotent(deps.pool, idempotency, cancelCodec, async (client) => {
    // `rated_at` is on the row itself: after waiting for a rating's transaction, the locked row is read as it committed.
    const { rows } = await client.query<{ token: string; status: string; rated: boolean }>(
      `SELECT token, status, rated_at IS NOT NULL AS rated FROM review_requests WHERE id = $1 AND organization_id = $2 AND recipient_id IS NULL FOR UPDATE`,
      [id, organizationId],
    );
    const link = rows[0];
    if (!link) throw new NotFoundError('review request');
    let status = link.status;
    if (!link.rated && status !== 'canceled') {
      await client.query(`UPDATE review_requests SET canceled_at = clock_timestamp(), status = 'canceled' WHERE id = $1`, [id]);
      status = 'canceled';
    }
    return { reviewRequest: { id, token: link.token, url: tokenUrl(deps.publicBaseUrl, 'r', link.token), status } };
  });
}
