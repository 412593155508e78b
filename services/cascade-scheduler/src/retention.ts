import { eventsV1 } from '@rrs/proto';
import { counter, histogram, inTransaction, startHousekeepingRounds, type Logger, type Pool, type PoolClient } from '@rrs/runtime';
import { addCounts, anonymizeRecipients, anonymizeReviewRequests, hashLedgers, recordLifecycleAction, type LifecycleCounts } from './anonymize';
import { announceErased, erasedIds, type ErasedIds } from './erasedAnnouncement';
import type { AddressHasher } from './personHash';

export const DEFAULT_RETENTION_DAYS = 365;
export const MIN_RETENTION_DAYS = 30;
export const MAX_RETENTION_DAYS = 3650;
/** A result can be redelivered for ~9 minutes (config.ts); a week past that no row of step_results matters. */
export const STEP_RESULTS_KEEP_DAYS = 7;
/** A digest row only stops today's digest going twice (ratingDigests.ts); a week keeps any time zone's today. */
export const RATING_DIGESTS_KEEP_DAYS = 7;
/** A staff link code is refused once expired (staffChats.ts); a day later its row is only clutter. */
export const STAFF_LINK_CODES_KEEP_DAYS = 1;

/**
 * Operational history pruned by every round, oldest first, by an index (migrations 0019, 0025), at most
 * 10 batches' worth a statement: $1 the age (ms), $2 the rows.
 */
const OPERATIONAL_PRUNES: Array<{ table: string; keepDays: number; calendarDays?: boolean; sql: string }> = [
  { table: 'step_results', keepDays: STEP_RESULTS_KEEP_DAYS,
    sql: `DELETE FROM step_results WHERE ctid = ANY (ARRAY(SELECT ctid FROM step_results WHERE received_at < now() - make_interval(secs => $1 / 1000.0) ORDER BY received_at LIMIT $2))` },
  // Its `day` is a calendar day (ratingDigests.ts), so its age is counted in real days even on the fast clock.
  { table: 'rating_digests', keepDays: RATING_DIGESTS_KEEP_DAYS, calendarDays: true,
    sql: `DELETE FROM rating_digests WHERE ctid = ANY (ARRAY(SELECT ctid FROM rating_digests WHERE day < (now() - make_interval(secs => $1 / 1000.0))::date ORDER BY day LIMIT $2))` },
  { table: 'staff_link_codes', keepDays: STAFF_LINK_CODES_KEEP_DAYS,
    sql: `DELETE FROM staff_link_codes WHERE code = ANY (ARRAY(SELECT code FROM staff_link_codes WHERE expires_at < now() - make_interval(secs => $1 / 1000.0) ORDER BY expires_at LIMIT $2))` },
];
const DAY_MS = 86_400_000;

const anonymized = counter({ name: 'scheduler_retention_rows_total', help: 'Rows anonymized or pruned by retention rounds, by table.', labelNames: ['table'] });
const rounds = counter({ name: 'scheduler_retention_rounds_total', help: 'Retention rounds run.' });
const roundSeconds = histogram({ name: 'scheduler_retention_round_seconds', help: 'Duration of one retention round.', buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30] });

export interface RetentionOptions {
  pool: Pool;
  hasher: AddressHasher;
  logger: Logger;
  /** Length of a day for the cutoffs (ms): 86 400 000, less with the fast clock. */
  dayMs?: number;
  /** Rows per transaction (default 500): a transaction never holds more locks than that. */
  batchSize?: number;
  /** Wait between rounds that found nothing more (default one hour). */
  intervalMs?: number;
}

/**
 * One retention round (docs/customer-respect.md, "Data lifecycle"): for each organization with
 * finished recipients still holding personal data, anonymizes (anonymize.ts) at most `batchSize` of
 * those finished longer ago than its `personal_data_retention_days`, and the review requests made
 * alone as long ago; their opt-outs older than the cutoff are kept as keyed hashes, their cooldown
 * rows dropped; one evidence row per organization; one PersonErased event (reason retention) per batch,
 * so the other services forget those recipients as an erased person's. Then prunes the operational
 * history (OPERATIONAL_PRUNES). Each batch is its own short transaction that locks only finished recipients (SKIP LOCKED),
 * which the dispatcher never waits on: it locks recipients with scheduled steps, SKIP LOCKED too.
 * Resolves whether a batch was full (more is due now).
 */
export async function retentionRound(options: RetentionOptions): Promise<{ counts: LifecycleCounts; organizations: number; more: boolean }> {
  const batchSize = options.batchSize ?? 500;
  const dayMs = options.dayMs ?? DAY_MS;
  const started = process.hrtime.bigint();
  const counts: LifecycleCounts = {};
  let more = false;
  let organizations = 0;
  for (const { organization_id: organizationId, days } of await organizationsToRetain(options.pool)) {
    const done = await inTransaction(options.pool, async (client) => {
      const { rows: now } = await client.query<{ now: Date }>('SELECT now()');
      const cutoff = new Date(now[0].now.getTime() - days * dayMs);
      const { rows: due } = await client.query<{ id: string }>(
        `SELECT id FROM recipients WHERE organization_id = $1 AND anonymized_at IS NULL AND finished_at IS NOT NULL AND finished_at < $2
          ORDER BY finished_at LIMIT $3 FOR UPDATE SKIP LOCKED`,
        [organizationId, cutoff, batchSize],
      );
      const { addresses, counts: recipients } = await anonymizeRecipients(client, organizationId, due.map((row) => row.id), { outbox: false });
      const { rows: alone } = await client.query<{ id: string }>(
        `SELECT id FROM review_requests WHERE organization_id = $1 AND anonymized_at IS NULL AND recipient_id IS NULL AND created_at < $2
          ORDER BY created_at LIMIT $3 FOR UPDATE SKIP LOCKED`,
        [organizationId, cutoff, batchSize],
      );
      const requests = await anonymizeReviewRequests(client, organizationId, alone.map((row) => row.id));
      await announceRetention(client, organizationId, await erasedIds(client, organizationId, due.map((row) => row.id)), alone.map((row) => row.id));
      const ledgers = await hashLedgers(client, options.hasher, organizationId, addresses, cutoff);
      const mine = addCounts(addCounts(addCounts({}, recipients), requests), ledgers);
      if (Object.keys(mine).length > 0) await recordLifecycleAction(client, { organizationId, kind: 'retention', actor: 'retention', counts: mine });
      return { counts: mine, full: due.length >= batchSize || alone.length >= batchSize };
    });
    if (Object.keys(done.counts).length > 0) organizations++;
    addCounts(counts, done.counts);
    more ||= done.full;
  }
  for (const prune of OPERATIONAL_PRUNES) {
    const { rowCount } = await options.pool.query(prune.sql, [prune.keepDays * (prune.calendarDays ? DAY_MS : dayMs), batchSize * 10]);
    addCounts(counts, { [prune.table]: rowCount ?? 0 });
    more ||= (rowCount ?? 0) >= batchSize * 10;
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  rounds.inc();
  roundSeconds.observe(seconds);
  for (const [table, n] of Object.entries(counts)) anonymized.inc({ table }, n);
  options.logger.info({ counts, organizations, more, ms: Math.round(seconds * 1000) }, 'retention round');
  return { counts, organizations, more };
}

/**
 * The batch's ids for the other services (docs/customer-respect.md, "Retention in every service"):
 * the PersonErased event an erasure writes, reason retention, in the batch's transaction. Its id is the
 * organization's and the batch's first row's: a recipient or request is anonymized by one batch only.
 */
async function announceRetention(client: PoolClient, organizationId: string, ids: ErasedIds, alone: string[]): Promise<void> {
  const first = ids.recipientIds[0] ?? alone[0];
  if (!first) return;
  await announceErased(client, {
    id: `person-erased:retention:${organizationId}:${first}`,
    organizationId,
    reason: eventsV1.ErasureReason.ERASURE_REASON_RETENTION,
    ids: { ...ids, reviewRequestIds: [...ids.reviewRequestIds, ...alone] },
  });
}

/**
 * Organizations with finished recipients or lone review requests still holding personal data, with
 * their retention: a skip scan of the retention indexes (one index probe per organization).
 */
async function organizationsToRetain(pool: Pool): Promise<Array<{ organization_id: string; days: number }>> {
  const { rows } = await pool.query<{ organization_id: string; days: number }>(
    `WITH RECURSIVE held AS (
        (SELECT organization_id FROM recipients WHERE anonymized_at IS NULL AND finished_at IS NOT NULL ORDER BY organization_id LIMIT 1)
        UNION ALL
        SELECT (SELECT r.organization_id FROM recipients r WHERE r.anonymized_at IS NULL AND r.finished_at IS NOT NULL AND r.organization_id > held.organization_id
                 ORDER BY r.organization_id LIMIT 1)
          FROM held WHERE held.organization_id IS NOT NULL),
      alone AS (
        (SELECT organization_id FROM review_requests WHERE anonymized_at IS NULL AND recipient_id IS NULL ORDER BY organization_id LIMIT 1)
        UNION ALL
        SELECT (SELECT rr.organization_id FROM review_requests rr WHERE rr.anonymized_at IS NULL AND rr.recipient_id IS NULL AND rr.organization_id > alone.organization_id
                 ORDER BY rr.organization_id LIMIT 1)
          FROM alone WHERE alone.organization_id IS NOT NULL)
     SELECT o.organization_id, coalesce(os.personal_data_retention_days, $1)::int AS days
       FROM (SELECT organization_id FROM held UNION SELECT organization_id FROM alone) o
       LEFT JOIN organization_settings os ON os.organization_id = o.organization_id
      WHERE o.organization_id IS NOT NULL ORDER BY o.organization_id`,
    [DEFAULT_RETENTION_DAYS],
  );
  return rows;
}

/** Pause after a full batch before the next one (ms): the rounds stay in the background. */
const PAUSE_AFTER_FULL_BATCH_MS = 100;

/** The retention rounds: every `intervalMs`, sooner while batches come back full. */
export function startRetention(options: RetentionOptions): { stop(): Promise<void> } {
  return startHousekeepingRounds({ name: 'retention', logger: options.logger, intervalMs: options.intervalMs ?? 3_600_000, pauseMs: PAUSE_AFTER_FULL_BATCH_MS, round: () => retentionRound(options) });
}
