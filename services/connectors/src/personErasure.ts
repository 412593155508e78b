import type { ErasedPerson } from '@rrs/proto';
import { inTransaction, sqlArray, type Pool } from '@rrs/runtime';

/**
 * A person's erasure in the connectors schema (docs/customer-respect.md, "Erasure in every service"),
 * by the cascades of the person's recipients (a deal's cascade has its one contact): the CRM inbox's
 * settled events of those deals (their payloads are the CRM's, maybe with the deal's name) are deleted,
 * and the write-backs of those cascades lose their feedback text. The deal ↔ cascade map stays: it holds
 * ids only (the CRM's deal and contact, ours) and is what stops a CRM retry from starting the deal's
 * cascade again. Pending inbox events stay: they are the CRM's new work, not yet read. Idempotent.
 */
export async function eraseConnectorRows(pool: Pool, erased: ErasedPerson): Promise<{ crmEvents: number; writeBacks: number }> {
  if (erased.cascadeIds.length === 0) return { crmEvents: 0, writeBacks: 0 };
  return inTransaction(pool, async (client) => {
    const cascades = sqlArray(erased.cascadeIds);
    const crmEvents = await client.query(
      `DELETE FROM crm_events e USING deal_cascades d
        WHERE d.organization_id = $1 AND d.cascade_id = ANY($2::text[])
          AND e.connector_id = d.connector_id AND e.deal_id = d.deal_id AND e.status <> 'pending'`,
      [erased.organizationId, cascades],
    );
    const writeBacks = await client.query(
      `UPDATE write_backs w SET feedback = '' FROM connectors c
        WHERE c.id = w.connector_id AND c.organization_id = $1 AND w.cascade_id = ANY($2::text[]) AND w.feedback <> ''`,
      [erased.organizationId, cascades],
    );
    return { crmEvents: crmEvents.rowCount ?? 0, writeBacks: writeBacks.rowCount ?? 0 };
  });
}
