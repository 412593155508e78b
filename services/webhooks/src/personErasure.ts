import type { ErasedPerson } from '@rrs/proto';
import { inTransaction, sqlArray, type Pool } from '@rrs/runtime';

/**
 * A person's erasure in the webhooks schema (docs/customer-respect.md, "Erasure in every service"):
 * the stored events about the person's recipients or review requests (their payload and body hold name,
 * email, phone and feedback) are deleted with their deliveries and attempts, pending ones included: an
 * erased person's data is not sent on. Found among the organization's events (kept only for the
 * delivery log's retention). Idempotent: erasing again finds nothing.
 */
export async function eraseDeliveries(pool: Pool, erased: ErasedPerson): Promise<{ events: number; deliveries: number }> {
  if (erased.recipientIds.length === 0 && erased.reviewRequestIds.length === 0) return { events: 0, deliveries: 0 };
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query<{ id: string }>(
      `SELECT id FROM events WHERE organization_id = $1
          AND (payload -> 'recipient' ->> 'id' = ANY($2::text[]) OR payload ->> 'reviewRequestId' = ANY($3::text[]))
        FOR UPDATE`,
      [erased.organizationId, sqlArray(erased.recipientIds), sqlArray(erased.reviewRequestIds)],
    );
    if (rows.length === 0) return { events: 0, deliveries: 0 };
    const ids = sqlArray(rows.map((row) => row.id));
    // Attempts go with their deliveries (ON DELETE CASCADE).
    const deliveries = await client.query('DELETE FROM deliveries WHERE event_id = ANY($1::text[])', [ids]);
    const events = await client.query('DELETE FROM events WHERE id = ANY($1::text[])', [ids]);
    return { events: events.rowCount ?? 0, deliveries: deliveries.rowCount ?? 0 };
  });
}
