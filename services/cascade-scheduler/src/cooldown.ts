import { execute, sqlArray, type PoolClient } from '@rrs/runtime';
import { personAddresses } from './personAddresses';

/*
 * The cooldown (docs/customer-respect.md): a person to whom the organization sent a review request, or
 * who rated, within its `cooldownDays` is not asked again. `person_activity` keeps, per address, when a
 * step last went out and when the person last rated; every address of the recipient is written, so a
 * later request that knows only the phone still matches an email-only history.
 */

export interface PersonEvent {
  organizationId: string;
  person: { email: string; phone: string };
}

/** One row per (organization, address): an upsert may not touch a row twice in one statement. */
function activityRows(events: PersonEvent[]): { organizations: string[]; addresses: string[] } {
  const seen = new Set<string>();
  const organizations: string[] = [];
  const addresses: string[] = [];
  for (const event of events) {
    for (const address of personAddresses(event.person)) {
      const key = `${event.organizationId}|${address}`;
      if (seen.has(key)) continue;
      seen.add(key);
      organizations.push(event.organizationId);
      addresses.push(address);
    }
  }
  return { organizations, addresses };
}

/** A review request went out to these people at `at`. */
export async function recordSent(client: PoolClient, events: PersonEvent[], at: Date): Promise<void> {
  const { organizations, addresses } = activityRows(events);
  if (addresses.length === 0) return;
  await execute(client, {
    text: `INSERT INTO person_activity (organization_id, address, last_sent_at)
     SELECT * FROM unnest($1::uuid[], $2::text[], array_fill($3::timestamptz, ARRAY[cardinality($2::text[])]))
     ON CONFLICT (organization_id, address) DO UPDATE SET last_sent_at = greatest(person_activity.last_sent_at, excluded.last_sent_at)`,
    values: [sqlArray(organizations), sqlArray(addresses), at],
  });
}

/** The person rated at `at`. */
export async function recordRated(client: PoolClient, event: PersonEvent, at: Date): Promise<void> {
  const { organizations, addresses } = activityRows([event]);
  if (addresses.length === 0) return;
  await client.query(
    `INSERT INTO person_activity (organization_id, address, last_rated_at)
     SELECT * FROM unnest($1::uuid[], $2::text[], array_fill($3::timestamptz, ARRAY[cardinality($2::text[])]))
     ON CONFLICT (organization_id, address) DO UPDATE SET last_rated_at = greatest(person_activity.last_rated_at, excluded.last_rated_at)`,
    [sqlArray(organizations), sqlArray(addresses), at],
  );
}

/** The addresses among these that were sent a request, or whose person rated, after `since`. */
export async function recentlyAsked(client: PoolClient, organizationId: string, addresses: string[], since: Date): Promise<Set<string>> {
  if (addresses.length === 0) return new Set();
  const { rows } = await client.query<{ address: string }>(
    `SELECT address FROM person_activity
      WHERE organization_id = $1 AND address = ANY($2::text[]) AND (last_sent_at > $3 OR last_rated_at > $3)`,
    [organizationId, sqlArray([...new Set(addresses)]), since],
  );
  return new Set(rows.map((row) => row.address));
}
