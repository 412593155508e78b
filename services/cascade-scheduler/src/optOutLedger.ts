import type { schedulerV1, SuppressionSource } from '@rrs/proto';
import { InvalidError, NotFoundError, sqlArray, type Pool, type PoolClient, type Statement } from '@rrs/runtime';
import { isUuid } from './ids';
import { personAddresses } from './personAddresses';
import type { AddressHasher } from './personHash';

/*
 * The organization's opt-out ledger (docs/customer-respect.md): an address in it receives nothing more
 * from the organization, on any channel. An opt-out is recorded for every address known to belong to
 * the person (a recipient's email and phone), so a later request that knows only one of them is stopped
 * too. The first record of an address is kept: its time and source are the evidence.
 */

interface SuppressionRow {
  address: string;
  channel: string;
  source: string;
  recipient_id: string | null;
  note: string;
  created_at: Date;
}

const COLUMNS = 'address, channel, source, recipient_id, note, created_at';

export function suppressionOf(row: SuppressionRow): schedulerV1.Suppression {
  return { address: row.address, channel: row.channel, source: row.source, recipientId: row.recipient_id ?? '', note: row.note, createdAt: row.created_at };
}

export interface OptOut {
  organizationId: string;
  person: { email: string; phone: string };
  /** The channel it came through (`EMAIL`, `SMS`, …). */
  channel: string;
  source: SuppressionSource;
  /** The recipient it came from; null when it came from no recipient (a bot chat linked from a review request). */
  recipientId: string | null;
}

/** Records the person's opt-out; returns how many of their addresses were newly suppressed. */
export async function recordOptOut(client: PoolClient, optOut: OptOut): Promise<number> {
  const addresses = personAddresses(optOut.person);
  if (addresses.length === 0) return 0;
  const { rowCount } = await client.query(
    `INSERT INTO suppressions (organization_id, address, channel, source, recipient_id)
     SELECT $1, address, $3, $4, $5 FROM unnest($2::text[]) AS address
     ON CONFLICT DO NOTHING`,
    [optOut.organizationId, sqlArray(addresses), optOut.channel, optOut.source, optOut.recipientId],
  );
  return rowCount ?? 0;
}

/** The first request of a suppression check: the addresses asked about, and the statement that looks them up. */
export interface SuppressionLookup {
  wanted: string[];
  statement: Statement;
}

/**
 * `suppressedAmong`'s first request, for a caller that sends it with others (intake, admission.ts); null
 * when there is no address to check. `suppressedFrom` reads its rows.
 */
export function suppressionLookup(organizationIds: Iterable<string>, addresses: Iterable<string>): SuppressionLookup | null {
  const wanted = [...new Set(addresses)];
  if (wanted.length === 0) return null;
  // Organizations × addresses may pair an address with another organization than its recipient's;
  // callers look up by the recipient's own organization, so such a row is never consulted.
  return {
    wanted,
    statement: {
      text: `SELECT organization_id, address FROM suppressions WHERE organization_id = ANY($1::uuid[]) AND address = ANY($2::text[])
     UNION ALL SELECT organization_id, NULL FROM hashed_ledger_organizations WHERE organization_id = ANY($1::uuid[])`,
      values: [sqlArray([...new Set(organizationIds)]), sqlArray(wanted)],
    },
  };
}

/** What a `suppressionLookup` found (its rows): looks the keyed hashes up too when an organization's ledger holds hashes. */
export async function suppressedFrom(client: Pool | PoolClient, hasher: AddressHasher, lookup: SuppressionLookup, rows: ReadonlyArray<{ organization_id: string; address: string | null }>): Promise<Set<string>> {
  const found = new Set(rows.flatMap((row) => (row.address === null ? [] : [`${row.organization_id}|${row.address}`])));
  const hashedOrganizations = rows.flatMap((row) => (row.address === null ? [row.organization_id] : []));
  if (hashedOrganizations.length === 0) return found;
  const byHash = new Map(lookup.wanted.map((address) => [hasher.hash(address), address]));
  const { rows: hashed } = await client.query<{ organization_id: string; address: string }>(
    'SELECT organization_id, address FROM suppressions WHERE organization_id = ANY($1::uuid[]) AND address = ANY($2::text[])',
    [sqlArray(hashedOrganizations), sqlArray([...byHash.keys()])],
  );
  for (const row of hashed) found.add(`${row.organization_id}|${byHash.get(row.address)}`);
  return found;
}

/**
 * `organization|address` of each given address that is suppressed: by the address, or by its keyed
 * hash (an opt-out whose person was erased or retained past its time, anonymize.ts). Addresses are
 * hashed only for organizations whose ledger holds hashes (hashed_ledger_organizations), found by the
 * same request; a second one looks the hashes up.
 */
export async function suppressedAmong(client: Pool | PoolClient, hasher: AddressHasher, organizationIds: Iterable<string>, addresses: Iterable<string>): Promise<Set<string>> {
  const lookup = suppressionLookup(organizationIds, addresses);
  if (!lookup) return new Set();
  const { rows } = await client.query<{ organization_id: string; address: string | null }>(lookup.statement.text, lookup.statement.values as unknown[]);
  return suppressedFrom(client, hasher, lookup, rows);
}

const MAX_PAGE = 500;

export async function listSuppressions(pool: Pool, request: schedulerV1.ListSuppressionsRequest): Promise<schedulerV1.ListSuppressionsResponse> {
  const limit = request.limit || 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new InvalidError([{ parameter: 'limit', detail: `an integer from 1 to ${MAX_PAGE}` }]);
  if (!isUuid(request.organizationId)) return { suppressions: [], nextAfter: '' };
  const { rows } = await pool.query<SuppressionRow>(
    `SELECT ${COLUMNS} FROM suppressions
      WHERE organization_id = $1 AND ($2 = '' OR address = $2) AND ($3 = '' OR address > $3)
      ORDER BY address LIMIT $4`,
    [request.organizationId, request.address, request.after, limit + 1],
  );
  const page = rows.slice(0, limit);
  return { suppressions: page.map(suppressionOf), nextAfter: rows.length > limit ? page[page.length - 1].address : '' };
}

/** An operator's suppression of one address (normalized by the caller); an existing record is kept. */
export async function addSuppression(pool: Pool, request: schedulerV1.AddSuppressionRequest): Promise<schedulerV1.AddSuppressionResponse> {
  if (!request.address) throw InvalidError.field('/address', 'an email address or a phone number');
  if (request.note.length > 500) throw InvalidError.field('/note', 'at most 500 characters');
  if (!isUuid(request.organizationId)) throw new NotFoundError('organization');
  const source: SuppressionSource = 'admin';
  const { rows: inserted } = await pool.query<SuppressionRow>(
    `INSERT INTO suppressions (organization_id, address, source, note) VALUES ($1, $2, $3, $4)
     ON CONFLICT DO NOTHING RETURNING ${COLUMNS}`,
    [request.organizationId, request.address, source, request.note],
  );
  if (inserted[0]) return { suppression: suppressionOf(inserted[0]), created: true };
  const { rows } = await pool.query<SuppressionRow>(`SELECT ${COLUMNS} FROM suppressions WHERE organization_id = $1 AND address = $2`, [request.organizationId, request.address]);
  return { suppression: suppressionOf(rows[0]), created: false };
}

/** Lifts a suppression (the person asked to hear from the organization again); `not_found` when there is none. */
export async function removeSuppression(pool: Pool, request: schedulerV1.RemoveSuppressionRequest): Promise<schedulerV1.RemoveSuppressionResponse> {
  const { rowCount } = isUuid(request.organizationId)
    ? await pool.query('DELETE FROM suppressions WHERE organization_id = $1 AND address = $2', [request.organizationId, request.address])
    : { rowCount: 0 };
  if (!rowCount) throw new NotFoundError('suppression', { message: 'this address is not suppressed' });
  return {};
}
