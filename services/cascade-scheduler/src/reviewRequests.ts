import { runIdempotent, type IdempotencyRequest } from '@rrs/idempotency';
import { schedulerV1 } from '@rrs/proto';
import { InvalidError, randomBase62, uuidv7, type Pool } from '@rrs/runtime';
import { tokenUrl } from './links';
import type { OrganizationProfiles } from './organizationProfiles';
import { savedAnswerCodec, type SavedAnswer } from './savedAnswer';
import type { SnapshotWriter } from './snapshots';

export interface ReviewRequestDeps {
  pool: Pool;
  profiles: OrganizationProfiles;
  snapshots: SnapshotWriter;
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
 * recipient's link, behaving the same way on `/r/<token>`. A replay with the same Idempotency-Key
 * returns the saved answer and creates nothing.
 */
export async function createReviewRequest(deps: ReviewRequestDeps, input: ReviewRequestInput, idempotency?: IdempotencyRequest): Promise<{ result: ReviewRequestAnswer; replayed: boolean }> {
  if (!input.locationId) throw InvalidError.field('/locationId', 'required');
  const [profile, location] = await Promise.all([
    deps.profiles.getSendingProfile(input.organizationId),
    deps.profiles.getLocation(input.organizationId, input.locationId),
  ]);
  await deps.snapshots.write(deps.pool, input.organizationId, profile, location);
  return runIdempotent(deps.pool, idempotency, answerCodec, async (client) => {
    const id = uuidv7();
    const token = randomBase62(22);
    await client.query(
      'INSERT INTO review_requests (id, organization_id, token, location_id, customer_name, contact) VALUES ($1, $2, $3, $4, $5, $6)',
      [id, input.organizationId, token, input.locationId, input.customerName, input.contact],
    );
    return { reviewRequest: { id, token, url: tokenUrl(deps.publicBaseUrl, 'r', token), status: 'created' } };
  });
}
