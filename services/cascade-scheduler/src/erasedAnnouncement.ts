import { eventsV1, PERSON_ERASED_SUBJECT, personErasedEvent } from '@rrs/proto';
import { sqlArray, type PoolClient } from '@rrs/runtime';
import { writeOutbox } from './outbox';

/** What the other services key a recipient's data by (the PersonErased event's ids). */
export type ErasedIds = Pick<eventsV1.PersonErased, 'recipientIds' | 'stepIds' | 'cascadeIds' | 'reviewRequestIds'>;

/**
 * What the other services key the recipients' data by: the recipients, their cascades and review
 * requests, and the ids their steps went to the senders under (a rerouted step's `<step id>.<channel>`,
 * stepMessage.ts senderStepId). By the recipients' keys: a batch's steps through
 * `recipient_steps (recipient_id, step_order)`.
 */
export async function erasedIds(client: PoolClient, organizationId: string, recipientIds: string[]): Promise<ErasedIds> {
  if (recipientIds.length === 0) return { recipientIds: [], stepIds: [], cascadeIds: [], reviewRequestIds: [] };
  const { rows } = await client.query<{ cascade_ids: string[] | null; review_request_ids: string[] | null; step_ids: string[] | null }>(
    `SELECT array_agg(DISTINCT r.cascade_id::text) AS cascade_ids, array_agg(DISTINCT r.review_request_id::text) AS review_request_ids,
            (SELECT array_agg(sent.id) FROM (
               SELECT s.id::text AS id FROM recipient_steps s WHERE s.recipient_id = ANY($2::uuid[])
               UNION ALL
               SELECT s.id::text || '.' || (reroute ->> 'to') FROM recipient_steps s, jsonb_array_elements(s.reroutes) reroute WHERE s.recipient_id = ANY($2::uuid[])
             ) sent) AS step_ids
       FROM recipients r WHERE r.organization_id = $1 AND r.id = ANY($2::uuid[])`,
    [organizationId, sqlArray(recipientIds)],
  );
  return { recipientIds, stepIds: rows[0]?.step_ids ?? [], cascadeIds: rows[0]?.cascade_ids ?? [], reviewRequestIds: rows[0]?.review_request_ids ?? [] };
}

/**
 * The event telling the other services which ids were anonymized (proto personErased.ts), written to
 * the outbox in the transaction that anonymizes them: the ids are never lost between the two, and a
 * transaction repeated after a failure announces again only what it anonymizes again. `id` is the
 * event's deduplication id on the bus (one per erasure or retention batch).
 */
export async function announceErased(
  client: PoolClient,
  announcement: { id: string; organizationId: string; reason: eventsV1.ErasureReason; erasureId?: string; ids: ErasedIds },
): Promise<void> {
  const erased: eventsV1.PersonErased = { erasureId: announcement.erasureId ?? '', reason: announcement.reason, ...announcement.ids };
  await writeOutbox(client, PERSON_ERASED_SUBJECT, [{ msgId: announcement.id, payload: personErasedEvent(announcement.id, announcement.organizationId, erased, new Date()) }]);
}
