import { runIdempotent, type IdempotencyRequest } from '@rrs/idempotency';
import { schedulerV1 } from '@rrs/proto';
import { InvalidError, NotFoundError, type Pool, type PoolClient } from '@rrs/runtime';
import { stop } from './engine';
import { isUuid } from './ids';
import { readCascadeIn } from './readCascade';
import { lockAndReadStates, saveStates } from './recipientStore';
import { savedAnswerCodec, type SavedAnswer } from './savedAnswer';

type CancelAnswer = SavedAnswer<schedulerV1.CancelCascadeResponse>;
type CancelByExternalIdAnswer = SavedAnswer<schedulerV1.CancelCascadesByExternalIdResponse>;
const cancelCodec = savedAnswerCodec(schedulerV1.CancelCascadeResponse);
const byExternalIdCodec = savedAnswerCodec(schedulerV1.CancelCascadesByExternalIdResponse);

/** The longest externalId a cascade can carry (the API's limit), so a longer one matches nothing. */
const MAX_EXTERNAL_ID_LENGTH = 200;

/**
 * Finishes every recipient of these cascades that has not finished (running, or waiting for a rating)
 * with reason `canceled`: its pending steps are canceled — a step already dispatched is on its way to
 * the provider and is not recalled —, its finish event is written, and its review link is closed (it
 * shows "no longer active" and accepts no rating). Recipients are locked first, in id order, as every
 * change of a recipient does; the cascades' counts are updated by saveStates. A recipient that rated
 * meanwhile finished `rated` under the same lock and is left alone. Returns how many it finished.
 */
export async function cancelRecipientsOf(client: PoolClient, cascadeIds: string[], minuteMs: number): Promise<number> {
  const { rows } = await client.query<{ id: string }>(`SELECT id FROM recipients WHERE cascade_id = ANY($1::uuid[]) AND status <> 'finished'`, [cascadeIds]);
  if (rows.length === 0) return 0;
  const { states, now } = await lockAndReadStates(client, rows.map((row) => row.id));
  const links: string[] = [];
  for (const state of states.values()) {
    if (state.recipient.status === 'finished') continue;
    stop(state, 'canceled', { now, minuteMs });
    links.push(state.meta.reviewRequestId);
  }
  await saveStates(client, states.values(), now);
  if (links.length > 0) {
    await client.query(`UPDATE review_requests SET canceled_at = $2, status = 'canceled' WHERE id = ANY($1::uuid[]) AND rated_at IS NULL`, [links, now]);
  }
  return links.length;
}

/**
 * Cancels one cascade (cancelRecipientsOf) and answers it as GET /cascades/{id} shows it, read in the
 * same transaction. Idempotent by nature (a second cancel finds nothing to finish) and, with an
 * Idempotency-Key, a replay answers the saved cascade. `not_found` for an unknown id or another
 * organization's cascade.
 */
export async function cancelCascade(pool: Pool, minuteMs: number, organizationId: string, id: string, idempotency?: IdempotencyRequest): Promise<{ result: CancelAnswer; replayed: boolean }> {
  if (!isUuid(id) || !isUuid(organizationId)) throw new NotFoundError('cascade');
  return runIdempotent(pool, idempotency, cancelCodec, async (client) => {
    const { rows: found } = await client.query('SELECT 1 FROM cascades WHERE id = $1 AND organization_id = $2', [id, organizationId]);
    if (!found[0]) throw new NotFoundError('cascade');
    const canceled = await cancelRecipientsOf(client, [id], minuteMs);
    return { canceled, cascade: await readCascadeIn(client, organizationId, id) };
  });
}

/**
 * Cancels every running cascade of the organization whose externalId is `externalId` (an order
 * refunded: every request made for it stops). Answers the ids it canceled, oldest first; none is not
 * an error. Cascades that already finished are not listed and do not change.
 */
export async function cancelCascadesByExternalId(
  pool: Pool,
  minuteMs: number,
  organizationId: string,
  externalId: string,
  idempotency?: IdempotencyRequest,
): Promise<{ result: CancelByExternalIdAnswer; replayed: boolean }> {
  if (externalId === '') throw InvalidError.field('/externalId', 'required');
  if (!isUuid(organizationId) || externalId.length > MAX_EXTERNAL_ID_LENGTH) return { result: { canceled: [] }, replayed: false };
  return runIdempotent(pool, idempotency, byExternalIdCodec, async (client) => {
    const { rows } = await client.query<{ id: string }>(
      `SELECT id FROM cascades WHERE organization_id = $1 AND external_id = $2 AND status = 'running' ORDER BY id`,
      [organizationId, externalId],
    );
    const ids = rows.map((row) => row.id);
    if (ids.length > 0) await cancelRecipientsOf(client, ids, minuteMs);
    return { canceled: ids };
  });
}
