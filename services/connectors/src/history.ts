import { counter, type Leadership, type Logger, type Pool } from '@rrs/runtime';

const purged = counter({ name: 'connectors_history_purged_rows_total', help: 'Connector history rows deleted past their age, by table.', labelNames: ['table'] });

/** An OAuth consent not completed is refused after its expiry; a day later its row is only clutter. */
export const OAUTH_STATE_KEEP_AFTER_EXPIRY_MS = 86_400_000;
/** Rows per DELETE: short statements between the inbox worker's rounds. */
export const HISTORY_PURGE_BATCH = 1_000;
const MAX_BATCHES_PER_ROUND = 100;

/**
 * The purge statements, by indexes (crm_events_processed; migration 0004), oldest first: $1 the age in
 * ms, $2 the batch size. Exported for the plan check (test/history.test.ts).
 */
export const PURGE_STATEMENTS = {
  crm_events: `DELETE FROM crm_events WHERE id = ANY (ARRAY(
      SELECT id FROM crm_events WHERE status <> 'pending' AND processed_at < now() - make_interval(secs => $1 / 1000.0) ORDER BY processed_at LIMIT $2))`,
  write_backs: `DELETE FROM write_backs WHERE event_id = ANY (ARRAY(
      SELECT event_id FROM write_backs WHERE status <> 'pending' AND coalesce(done_at, created_at) < now() - make_interval(secs => $1 / 1000.0)
       ORDER BY coalesce(done_at, created_at) LIMIT $2))`,
  amocrm_oauth_states: `DELETE FROM amocrm_oauth_states WHERE state_hash = ANY (ARRAY(
      SELECT state_hash FROM amocrm_oauth_states WHERE expires_at < now() - make_interval(secs => $1 / 1000.0) ORDER BY expires_at LIMIT $2))`,
} as const;

/**
 * One purge round (docs/operations.md, "Data lifecycle"): processed inbox events and settled
 * write-backs older than the retention (`CONNECTOR_EVENT_RETENTION_DAYS`), and amoCRM OAuth states a
 * day past their expiry, each in batches. Pending events and write-backs are the work still to do:
 * never deleted. `deal_cascades` is kept (ids only: what stops a CRM retry from starting a deal again).
 */
export async function purgeConnectorHistory(pool: Pool, options: { retentionMs: number; logger?: Logger; batch?: number }): Promise<Record<keyof typeof PURGE_STATEMENTS, number>> {
  const batch = options.batch ?? HISTORY_PURGE_BATCH;
  const started = Date.now();
  const ages: Record<keyof typeof PURGE_STATEMENTS, number> = { crm_events: options.retentionMs, write_backs: options.retentionMs, amocrm_oauth_states: OAUTH_STATE_KEEP_AFTER_EXPIRY_MS };
  const counts = { crm_events: 0, write_backs: 0, amocrm_oauth_states: 0 };
  for (const table of Object.keys(PURGE_STATEMENTS) as Array<keyof typeof PURGE_STATEMENTS>) {
    for (let round = 0; round < MAX_BATCHES_PER_ROUND; round++) {
      const { rowCount } = await pool.query(PURGE_STATEMENTS[table], [ages[table], batch]);
      counts[table] += rowCount ?? 0;
      if ((rowCount ?? 0) < batch) break;
    }
    purged.inc({ table }, counts[table]);
  }
  options.logger?.info({ ...counts, ms: Date.now() - started }, 'connector history purged');
  return counts;
}

/** Purges hourly on the housekeeping leader (one replica); returns the stop function. */
export function schedulePurgeConnectorHistory(pool: Pool, retentionMs: number, logger: Logger, leader: Pick<Leadership, 'ifLeader'>, everyMs = 3_600_000): () => void {
  const run = () => leader.ifLeader(() => purgeConnectorHistory(pool, { retentionMs, logger })).catch((err) => logger.warn({ err }, 'connector history purge failed'));
  const timer = setInterval(run, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
