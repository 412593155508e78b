import { execute, sqlArray, type PoolClient, type Statement } from '@rrs/runtime';
import { personAddresses } from './personAddresses';

/*
 * The cooldown (docs/customer-respect.md): a person to whom the organization sent a review request, or
 * who rated, within its `cooldownDays` is not asked again. `person_activity` keeps, per address, when a
 * step last went out and when the person last rated; every address of the recipient is written, so a
 * later request that knows only the phone still matches an email-only history.
 */

const DAY_SECONDS = 86_400;

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

/**
 * The transaction's clock (`dbNow`'s), with the addresses among these that were sent a request, or whose
 * person rated, within `cooldownDays` before it (to the millisecond, as the clock reads in JavaScript):
 * one statement, so intake reads both in the request that opens its transaction (admission.ts).
 */
export function clockAndRecentlyAsked(organizationId: string, addresses: string[], cooldownDays: number): Statement {
  if (addresses.length === 0 || cooldownDays <= 0) return { text: `SELECT clock_timestamp() AS now, '{}'::text[] AS asked` };
  return {
    text: `SELECT c.now, ARRAY(SELECT address FROM person_activity
      WHERE organization_id = $1 AND address = ANY($2::text[]) AND (last_sent_at > c.since OR last_rated_at > c.since)) AS asked
      FROM (SELECT now, date_trunc('milliseconds', now) - make_interval(secs => $3) AS since FROM (SELECT clock_timestamp() AS now) t) c`,
    values: [organizationId, sqlArray([...new Set(addresses)]), cooldownDays * DAY_SECONDS],
  };
}

/** What `clockAndRecentlyAsked` read. */
export function clockAndAsked(row: { now: Date; asked: string[] }): { now: Date; asked: Set<string> } {
  return { now: row.now, asked: new Set(row.asked) };
}
