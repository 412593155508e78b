import { join } from 'node:path';
import type { Metadata } from '@grpc/grpc-js';
import { ConflictError, counter, DomainError, execute, inCoalescedTransaction, inTransaction, queryEach, type Leadership, type Pool, type PoolClient, type QueryResult, type ServiceContext, type Statement } from '@rrs/runtime';

export const IDEMPOTENCY_MIGRATIONS_DIR = join(__dirname, '..', 'migrations');
export const IDEMPOTENCY_COMPONENT = 'idempotency';
export const DEFAULT_IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** gRPC metadata the gateway sets when a request carries an Idempotency-Key. */
export const MD_IDEMPOTENCY_KEY = 'idempotency-key';
export const MD_IDEMPOTENCY_FINGERPRINT = 'idempotency-fingerprint';

export interface IdempotencyRequest {
  organizationId: string;
  key: string;
  /** See requestFingerprint(). */
  fingerprint: string;
}

export function idempotencyFromMetadata(metadata: Metadata, organizationId: string): IdempotencyRequest | undefined {
  const key = metadata.get(MD_IDEMPOTENCY_KEY)[0];
  const fingerprint = metadata.get(MD_IDEMPOTENCY_FINGERPRINT)[0];
  if (typeof key !== 'string' || key === '') return undefined;
  if (typeof fingerprint !== 'string' || fingerprint === '') {
    // The gateway sends both; a key alone is a caller's bug, not a field the client could correct.
    throw new DomainError('invalid', 'invalid_request', 'an idempotency key needs a request fingerprint');
  }
  return { organizationId, key, fingerprint };
}

export interface Codec<T> {
  encode(value: T): Uint8Array;
  decode(bytes: Uint8Array): T;
}

const replays = counter({ name: 'idempotent_replays_total', help: 'Requests answered from a saved Idempotency-Key response.' });

/**
 * Runs `effect` in a transaction (the runtime's `inTransaction`, so a connection that broke inside it
 * is destroyed, never reused). With an idempotency key, the response is saved in that same
 * transaction, so "effect happened" and "response saved" can never disagree:
 * - a repeat with the same fingerprint returns the saved response and runs nothing;
 * - a repeat with another fingerprint fails with conflict `idempotency_key_reused`;
 * - a repeat while the first is still running fails at once with conflict `idempotency_key_in_use`
 *   (the first holds a transaction-scoped advisory lock on the key).
 * Only successful effects are saved: an effect that throws rolls back, so nothing happened and the key
 * may be used again.
 *
 * `coalesced`: the transaction is the runtime's `inCoalescedTransaction` (BEGIN travels with the key's lock
 * and the saved answer's read, the saved answer with COMMIT: three round trips fewer for a start under a key, one without);
 * for an effect whose statements that need no answer go through `execute`, and whose other statements
 * can be written as literals when something waits in front of them.
 *
 * `reads`: the effect's first reads (independent of each other and of the key), sent in the request that
 * takes the key's lock and reads its saved answer — a replay or a key in use reads them for nothing —
 * and handed to `effect` as their results, in order.
 */
export async function runIdempotent<T>(
  pool: Pool,
  request: IdempotencyRequest | undefined,
  codec: Codec<T>,
  effect: (client: PoolClient, reads: QueryResult[]) => Promise<T>,
  options: { ttlMs?: number; coalesced?: boolean; reads?: Statement[] } = {},
): Promise<{ result: T; replayed: boolean }> {
  const transaction = options.coalesced ? inCoalescedTransaction : inTransaction;
  const reads = options.reads ?? [];
  const outcome = await transaction(pool, async (client) => {
    if (!request) return { result: await effect(client, reads.length > 0 ? await queryEach(client, reads) : []), replayed: false };
    const { saved, reads: read } = await savedResponse(client, request, reads);
    if (saved) return { result: codec.decode(saved), replayed: true };
    const result = await effect(client, read);
    // No answer is read: in a coalesced transaction the record goes with COMMIT.
    await execute(client, {
      text: `INSERT INTO idempotency_keys (organization_id, key, fingerprint, response, expires_at)
       VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5 / 1000.0))
       ON CONFLICT (organization_id, key) DO UPDATE
         SET fingerprint = excluded.fingerprint, response = excluded.response, created_at = now(), expires_at = excluded.expires_at`,
      values: [request.organizationId, request.key, request.fingerprint, Buffer.from(codec.encode(result)), options.ttlMs ?? DEFAULT_IDEMPOTENCY_TTL_MS],
    });
    return { result, replayed: false };
  });
  if (outcome.replayed) replays.inc();
  return outcome;
}

/**
 * Takes the key's advisory lock for this transaction and returns the live saved response of the same
 * request, if any; refuses a key that is held by a request still running or was used with another body.
 */
async function savedResponse(client: PoolClient, request: IdempotencyRequest, reads: Statement[]): Promise<{ saved: Buffer | null; reads: QueryResult[] }> {
  // One request (in a coalesced transaction, with BEGIN): the lock first, then the read and the effect's
  // own first reads, which a key held elsewhere or a replay reads for nothing — two round trips fewer
  // for every start under a key.
  const [{ rows: lock }, { rows }, ...read] = await queryEach(client, [
    { text: 'SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS ok', values: [`${request.organizationId}:${request.key}`] },
    { text: 'SELECT fingerprint, response FROM idempotency_keys WHERE organization_id = $1 AND key = $2 AND expires_at > now()', values: [request.organizationId, request.key] },
    ...reads,
  ]);
  if (!lock[0].ok) {
    throw new ConflictError('idempotency_key_in_use', 'a request with this Idempotency-Key is still being processed; retry shortly', { details: { retryAfterSeconds: 1 } });
  }
  if (!rows[0]) return { saved: null, reads: read };
  if (rows[0].fingerprint !== request.fingerprint) {
    throw new ConflictError('idempotency_key_reused', 'this Idempotency-Key was already used with a different request');
  }
  return { saved: rows[0].response, reads: read };
}

/**
 * Whether the same request (same key and fingerprint) already has a live saved answer: a pre-check (a dry
 * run) of a request that will be replayed must not refuse what the replay will answer. Reads only; takes no lock.
 */
export async function hasSavedAnswer(pool: Pool | PoolClient, request: IdempotencyRequest): Promise<boolean> {
  const { rows } = await pool.query('SELECT 1 FROM idempotency_keys WHERE organization_id = $1 AND key = $2 AND fingerprint = $3 AND expires_at > now()', [
    request.organizationId,
    request.key,
    request.fingerprint,
  ]);
  return rows.length > 0;
}

/** Deletes expired keys in bounded batches; returns how many were deleted. */
export async function purgeExpiredIdempotencyKeys(pool: Pool, batch = 5_000): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await pool.query(
      `DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(SELECT ctid FROM idempotency_keys WHERE expires_at <= now() LIMIT $1))`,
      [batch],
    );
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < batch) return total;
  }
}

/** Purges now and then every `everyMs` (only while `leader` leads, when given); returns the stop function. */
export function schedulePurge(pool: Pool, everyMs: number, onError: (err: unknown) => void, leader?: Pick<Leadership, 'ifLeader'>): () => void {
  const purge = () => purgeExpiredIdempotencyKeys(pool);
  const run = () => (leader ? leader.ifLeader(purge) : purge()).catch(onError);
  const timer = setInterval(run, everyMs);
  timer.unref();
  void run();
  return () => clearInterval(timer);
}

/** The migrations of the idempotency table, for `openServiceDatabase`'s `migrations`. */
export const IDEMPOTENCY_MIGRATIONS = { dir: IDEMPOTENCY_MIGRATIONS_DIR, component: IDEMPOTENCY_COMPONENT };

/** Purges expired keys every `everyMs` until the service stops. */
export function startIdempotencyPurge(pool: Pool, ctx: ServiceContext, everyMs = 3_600_000, leader?: Pick<Leadership, 'ifLeader'>): void {
  ctx.lifecycle.onStop('idempotency purge', schedulePurge(pool, everyMs, (err) => ctx.logger.warn({ err }, 'purging expired idempotency keys failed'), leader));
}
