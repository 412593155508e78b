import { eventsV1, PERSON_ERASED_SUBJECT, personErasedEvent } from '@rrs/proto';
import { inTransaction, InvalidError, sqlArray, type Pool, type PoolClient } from '@rrs/runtime';
import { addCounts, anonymizeRecipients, anonymizeReviewRequests, hashLedgers, recordLifecycleAction, type LifecycleCounts } from './anonymize';
import { isUuid } from './ids';
import { writeOutbox } from './outbox';
import type { AddressHasher } from './personHash';
import { personAddresses } from './personAddresses';

export interface PersonErasure {
  organizationId: string;
  /** The erasure request's id (the evidence names it). */
  requestId: string;
  /** Who asked: `api:<key id>`, `member:<id>`, `admin`. */
  actor: string;
  email: string;
  phone: string;
  contactExternalId: string;
  /** More addresses of the same person (lower-case emails, E.164 phones), e.g. of the contacts erased. */
  addresses?: string[];
}

const BATCH = 500;

/**
 * Erases one person from this schema (docs/customer-respect.md, "Erasure"): every recipient of the
 * organization with that email, phone or external id, and every recipient sharing an address with
 * those (the same person reached by another identifier), is anonymized (anonymize.ts), as are review
 * requests made alone for those addresses; the opt-out ledger keeps the keyed hashes (an opt-out still
 * holds), the cooldown ledger and saved idempotent responses that hold an address are deleted; one
 * evidence row. Idempotent: erasing again finds nothing more. An erasure is rare and asynchronous: it
 * reads the organization's recipients without an index of its own (as the person export does).
 */
export async function erasePerson(pool: Pool, hasher: AddressHasher, erasure: PersonErasure): Promise<LifecycleCounts> {
  const email = erasure.email.trim().toLowerCase();
  const phone = erasure.phone.trim();
  const externalId = erasure.contactExternalId.trim();
  if (!email && !phone && !externalId && !erasure.addresses?.length) throw InvalidError.field('/email', 'an email, a phone or a contactExternalId (one or more)');
  if (!isUuid(erasure.organizationId)) return {};
  const counts: LifecycleCounts = {};
  const addresses = new Set([...personAddresses({ email, phone }), ...(erasure.addresses ?? []).map((address) => address.trim()).filter(Boolean)]);
  // The person's recipients, found by any identifier, then by the addresses those recipients had.
  const found = new Set<string>();
  for (let pass = 0; pass < 2; pass++) {
    const { rows } = await pool.query<{ id: string; email: string; phone: string }>(
      `SELECT id, email, phone FROM recipients
        WHERE organization_id = $1 AND anonymized_at IS NULL
          AND ((email <> '' AND lower(email) = ANY($2::text[])) OR (phone <> '' AND phone = ANY($2::text[])) OR ($3 <> '' AND contact_external_id = $3))`,
      [erasure.organizationId, sqlArray([...addresses]), externalId],
    );
    for (const row of rows) {
      found.add(row.id);
      for (const address of personAddresses(row)) addresses.add(address);
    }
  }
  const ids = [...found];
  for (let i = 0; i < ids.length; i += BATCH) {
    await inTransaction(pool, async (client) => {
      const batch = ids.slice(i, i + BATCH);
      await announceErasure(client, erasure, batch[0], await erasedIds(client, erasure.organizationId, batch));
      addCounts(counts, (await anonymizeRecipients(client, erasure.organizationId, batch)).counts);
    });
  }
  const list = [...addresses];
  await inTransaction(pool, async (client) => {
    const { rows: alone } = await client.query<{ id: string }>(
      `SELECT id FROM review_requests WHERE organization_id = $1 AND recipient_id IS NULL AND anonymized_at IS NULL AND lower(contact) = ANY($2::text[]) FOR UPDATE`,
      [erasure.organizationId, sqlArray(list)],
    );
    addCounts(counts, await anonymizeReviewRequests(client, erasure.organizationId, alone.map((row) => row.id)));
    if (alone.length > 0) await announceErasure(client, erasure, 'alone', { recipientIds: [], stepIds: [], cascadeIds: [], reviewRequestIds: alone.map((row) => row.id) });
    addCounts(counts, await hashLedgers(client, hasher, erasure.organizationId, list));
    addCounts(counts, { idempotency_keys: await forgetSavedResponses(client, erasure.organizationId, [...new Set([...list, erasure.email.trim(), externalId].filter(Boolean))]) });
    const subjectHashes = [...list.map((address) => hasher.hash(address)), ...(externalId ? [hasher.hash(`external:${externalId}`)] : [])];
    await recordLifecycleAction(client, { organizationId: erasure.organizationId, kind: 'erasure', requestId: erasure.requestId, subjectHashes, actor: erasure.actor, counts });
  });
  return counts;
}

type ErasedIds = Omit<eventsV1.PersonErased, 'erasureId'>;

/**
 * What the other services key the recipients' data by: the recipients, their cascades and review
 * requests, and the ids their steps went to the senders under (a rerouted step's `<step id>.<channel>`,
 * stepMessage.ts senderStepId).
 */
async function erasedIds(client: PoolClient, organizationId: string, recipientIds: string[]): Promise<ErasedIds> {
  const { rows } = await client.query<{ cascade_ids: string[]; review_request_ids: string[]; step_ids: string[] | null }>(
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
 * The erasure's event for the other services (proto personErased.ts), written to the outbox in the
 * transaction that anonymizes these rows: the ids are never lost between the two, and a completion
 * repeated after a failure announces again only what it erases again. Its id is the request's and the
 * batch's, so a batch announced twice is delivered once.
 */
async function announceErasure(client: PoolClient, erasure: PersonErasure, batch: string, ids: ErasedIds): Promise<void> {
  const id = `person-erased:${erasure.requestId}:${batch}`;
  await writeOutbox(client, PERSON_ERASED_SUBJECT, [{ msgId: id, payload: personErasedEvent(id, erasure.organizationId, { erasureId: erasure.requestId, ...ids }, new Date()) }]);
}

/**
 * Saved responses of idempotent requests (a start's recipients) that hold one of the identifiers: a
 * retry with their key after the erasure would otherwise hand the person's data back. Deleted: such a
 * retry starts anew (the window is a day, and an erasure of someone just started is rare).
 */
async function forgetSavedResponses(client: PoolClient, organizationId: string, identifiers: string[]): Promise<number> {
  if (identifiers.length === 0) return 0;
  const { rowCount } = await client.query(
    `DELETE FROM idempotency_keys k WHERE k.organization_id = $1
        AND EXISTS (SELECT 1 FROM unnest($2::text[]) i WHERE position(convert_to(i, 'UTF8') IN k.response) > 0)`,
    [organizationId, sqlArray(identifiers)],
  );
  return rowCount ?? 0;
}
