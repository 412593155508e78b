import { counter, type Leadership, type Logger, type Pool } from '@rrs/runtime';

/**
 * How long a member's session, password reset or invitation is kept after it expired: nothing reads an
 * expired one (a session is refused after SESSION_ABSOLUTE_MS, 14 days; a reset after an hour; an
 * invitation after 7 days, and an accepted one is the member row), so the month only leaves the operator
 * time to look at recent sign-ins.
 */
export const MEMBER_TOKENS_KEEP_AFTER_EXPIRY_DAYS = 30;
/** Rows per DELETE. */
export const MEMBER_TOKENS_PURGE_BATCH = 1_000;
const MAX_BATCHES_PER_ROUND = 100;
const DAY_MS = 86_400_000;

const purged = counter({ name: 'contacts_member_tokens_purged_rows_total', help: 'Expired member sessions, password resets and invitations deleted, by table.', labelNames: ['table'] });

/**
 * The purge statements, by the expiry indexes (contacts migration 0010), oldest first: $1 the age past
 * expiry in ms, $2 the batch size. Exported for the plan check (test/memberTokenPurge.test.ts).
 */
export const MEMBER_TOKEN_PURGES = {
  member_sessions: `DELETE FROM member_sessions WHERE id = ANY (ARRAY(
      SELECT id FROM member_sessions WHERE expires_at < now() - make_interval(secs => $1 / 1000.0) ORDER BY expires_at LIMIT $2))`,
  member_password_resets: `DELETE FROM member_password_resets WHERE id = ANY (ARRAY(
      SELECT id FROM member_password_resets WHERE expires_at < now() - make_interval(secs => $1 / 1000.0) ORDER BY expires_at LIMIT $2))`,
  member_invitations: `DELETE FROM member_invitations WHERE id = ANY (ARRAY(
      SELECT id FROM member_invitations WHERE expires_at < now() - make_interval(secs => $1 / 1000.0) ORDER BY expires_at LIMIT $2))`,
} as const;

type Table = keyof typeof MEMBER_TOKEN_PURGES;

/** One round: each table's rows expired longer ago than the keep, in batches; a metric and a log line. */
export async function purgeExpiredMemberTokens(pool: Pool, options: { logger?: Logger; keepAfterExpiryMs?: number; batch?: number } = {}): Promise<Record<Table, number>> {
  const keepMs = options.keepAfterExpiryMs ?? MEMBER_TOKENS_KEEP_AFTER_EXPIRY_DAYS * DAY_MS;
  const batch = options.batch ?? MEMBER_TOKENS_PURGE_BATCH;
  const started = Date.now();
  const counts: Record<Table, number> = { member_sessions: 0, member_password_resets: 0, member_invitations: 0 };
  for (const table of Object.keys(MEMBER_TOKEN_PURGES) as Table[]) {
    for (let round = 0; round < MAX_BATCHES_PER_ROUND; round++) {
      const { rowCount } = await pool.query(MEMBER_TOKEN_PURGES[table], [keepMs, batch]);
      counts[table] += rowCount ?? 0;
      if ((rowCount ?? 0) < batch) break;
    }
    purged.inc({ table }, counts[table]);
  }
  options.logger?.info({ ...counts, ms: Date.now() - started }, 'expired member tokens purged');
  return counts;
}

/** Purges hourly on the housekeeping leader (one replica); returns the stop function. */
export function schedulePurgeExpiredMemberTokens(pool: Pool, logger: Logger, leader: Pick<Leadership, 'ifLeader'>, everyMs = 3_600_000): () => void {
  const run = () => leader.ifLeader(() => purgeExpiredMemberTokens(pool, { logger })).catch((err) => logger.warn({ err }, 'expired member token purge failed'));
  const timer = setInterval(run, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
