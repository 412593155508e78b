import { sqlArray, type PoolClient } from '@rrs/runtime';
import type { AddressHasher } from './personHash';
import { personAddresses } from './personAddresses';

/** Rows anonymized or deleted, by table (the evidence's `counts`). */
export type LifecycleCounts = Record<string, number>;

export function addCounts(into: LifecycleCounts, more: LifecycleCounts): LifecycleCounts {
  for (const [table, n] of Object.entries(more)) if (n > 0) into[table] = (into[table] ?? 0) + n;
  return into;
}

/**
 * Irreversibly anonymizes recipients (ids of one organization, locked by the caller's transaction or
 * by this UPDATE) and what hangs off them in this schema: their name, addresses and external ids, the
 * feedback text (the row stays, so "with feedback" still counts), the inbox's notes and replies about
 * them, their review request's name and contact, the bot link codes (phone, chat), and the published
 * outbox events about them. Ratings, steps (channels, times, outcomes) and counts stay: the
 * organization's statistics do not change. Returns the addresses they had (for the ledgers) and counts.
 */
export async function anonymizeRecipients(
  client: PoolClient,
  organizationId: string,
  recipientIds: string[],
  options: { outbox: boolean } = { outbox: true },
): Promise<{ addresses: string[]; counts: LifecycleCounts }> {
  if (recipientIds.length === 0) return { addresses: [], counts: {} };
  const { rows } = await client.query<{ id: string; email: string; phone: string; review_request_id: string }>(
    `WITH old AS (SELECT id, email, phone, review_request_id FROM recipients WHERE organization_id = $1 AND id = ANY($2::uuid[]) FOR UPDATE)
     UPDATE recipients r SET name = '', email = '', phone = '', contact_id = '', contact_external_id = '',
                             feedback = CASE WHEN r.feedback IS NULL THEN NULL ELSE '' END, anonymized_at = coalesce(r.anonymized_at, now())
       FROM old WHERE r.id = old.id
     RETURNING old.id, old.email, old.phone, old.review_request_id`,
    [organizationId, sqlArray(recipientIds)],
  );
  const addresses = [...new Set(rows.flatMap((row) => personAddresses(row)))];
  const counts = await anonymizeReviewRequests(client, organizationId, rows.map((row) => row.review_request_id));
  // A finish event names the recipient; one about a review request made alone names the request. Found
  // by a scan of the outbox (a day of rows: the relay purges older ones), so only an erasure looks;
  // retention's recipients finished long after their events were purged (`outbox: false`).
  const { rowCount: outbox } = options.outbox
    ? await client.query('DELETE FROM outbox WHERE recipient_id = ANY($1::uuid[]) AND published_at IS NOT NULL', [sqlArray([...rows.map((row) => row.id), ...rows.map((row) => row.review_request_id)])])
    : { rowCount: 0 };
  return { addresses, counts: addCounts({ recipients: rows.length, outbox: outbox ?? 0 }, counts) };
}

/** The review requests' own personal data (ids of one organization) and what hangs off them. */
export async function anonymizeReviewRequests(client: PoolClient, organizationId: string, ids: string[]): Promise<LifecycleCounts> {
  if (ids.length === 0) return {};
  const params = [organizationId, sqlArray(ids)];
  // One statement at a time: they share the caller's connection.
  const requests = await client.query(`UPDATE review_requests SET customer_name = '', contact = '', anonymized_at = coalesce(anonymized_at, now()) WHERE organization_id = $1 AND id = ANY($2::uuid[])`, params);
  const feedback = await client.query(`UPDATE feedback SET text = '' WHERE organization_id = $1 AND review_request_id = ANY($2::uuid[]) AND text <> ''`, params);
  const history = await client.query(`UPDATE rating_history SET text = '' WHERE organization_id = $1 AND review_request_id = ANY($2::uuid[]) AND text <> ''`, params);
  const botLinks = await client.query(
    `UPDATE bot_link_codes SET phone = '', used_by_chat = NULL WHERE organization_id = $1 AND review_request_id = ANY($2::uuid[]) AND (phone <> '' OR used_by_chat IS NOT NULL)`,
    params,
  );
  await client.query(`UPDATE ratings SET resolution_note = NULL WHERE organization_id = $1 AND review_request_id = ANY($2::uuid[]) AND resolution_note IS NOT NULL`, params);
  return { review_requests: requests.rowCount ?? 0, feedback: feedback.rowCount ?? 0, rating_history: history.rowCount ?? 0, bot_link_codes: botLinks.rowCount ?? 0 };
}

/**
 * The ledgers of these addresses (normalized) in one organization: an opt-out is kept as the keyed
 * hash of the address (so it still holds: the opt-out check looks hashes up too), its note dropped;
 * the cooldown ledger's rows are deleted.
 */
export async function hashLedgers(client: PoolClient, hasher: AddressHasher, organizationId: string, addresses: string[], before?: Date): Promise<LifecycleCounts> {
  if (addresses.length === 0) return {};
  const hashes = addresses.map((address) => hasher.hash(address));
  // Retention (`before`): only the entries older than the cutoff; a person's later activity keeps theirs.
  const { rowCount: suppressions } = await client.query(
    `WITH gone AS (DELETE FROM suppressions s USING unnest($2::text[], $3::text[]) AS a(address, hash)
                    WHERE s.organization_id = $1 AND s.address = a.address AND ($4::timestamptz IS NULL OR s.created_at < $4)
                    RETURNING s.organization_id, a.hash, s.channel, s.source, s.recipient_id, s.created_at)
     INSERT INTO suppressions (organization_id, address, channel, source, recipient_id, note, created_at)
     SELECT organization_id, hash, channel, source, recipient_id, '', created_at FROM gone
     ON CONFLICT DO NOTHING`,
    [organizationId, sqlArray(addresses), sqlArray(hashes), before ?? null],
  );
  if (suppressions) await client.query('INSERT INTO hashed_ledger_organizations (organization_id) VALUES ($1) ON CONFLICT DO NOTHING', [organizationId]);
  const { rowCount: activity } = await client.query(
    `DELETE FROM person_activity WHERE organization_id = $1 AND address = ANY($2::text[])
        AND ($3::timestamptz IS NULL OR (coalesce(last_sent_at, '-infinity') < $3 AND coalesce(last_rated_at, '-infinity') < $3))`,
    [organizationId, sqlArray(addresses), before ?? null],
  );
  return { suppressions: suppressions ?? 0, person_activity: activity ?? 0 };
}

/** Records what was done (lifecycle_actions): the evidence an export gives. */
export async function recordLifecycleAction(
  client: PoolClient,
  action: { organizationId: string; kind: 'erasure' | 'retention'; requestId?: string; subjectHashes?: string[]; actor: string; counts: LifecycleCounts },
): Promise<void> {
  await client.query(`INSERT INTO lifecycle_actions (organization_id, kind, request_id, subject_hashes, actor, counts) VALUES ($1, $2, $3, $4::text[], $5, $6::jsonb)`, [
    action.organizationId, action.kind, action.requestId ?? '', sqlArray(action.subjectHashes ?? []), action.actor, JSON.stringify(action.counts),
  ]);
}
