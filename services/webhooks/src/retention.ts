import { counter, type Leadership, type Logger, type Pool } from '@rrs/runtime';

const purged = counter({ name: 'webhooks_delivery_log_purged_rows_total', help: 'Delivery log rows deleted past the retention, by table.', labelNames: ['table'] });

/**
 * The purge statements, by the indexes of migration 0005, oldest first: $1 the retention (ms), $2 the
 * batch size. Exported for the plan check (test/retention.test.ts). `OFFSET 0` keeps the NOT EXISTS a
 * probe of `deliveries (event_id, …)` per event read: as an anti join the planner would read that whole
 * index once per batch.
 */
export const PURGE_DELIVERIES_SQL = `DELETE FROM deliveries WHERE id = ANY (ARRAY(
    SELECT id FROM deliveries WHERE status <> 'pending' AND updated_at < now() - make_interval(secs => $1 / 1000.0) ORDER BY updated_at LIMIT $2))`;
export const PURGE_EVENTS_SQL = `DELETE FROM events WHERE id = ANY (ARRAY(
    SELECT e.id FROM events e WHERE e.received_at < now() - make_interval(secs => $1 / 1000.0)
      AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id OFFSET 0) ORDER BY e.received_at LIMIT $2))`;

/**
 * The delivery log is kept for a retention period, then deleted: settled deliveries (with their
 * attempts) last changed before it, and events no delivery refers to any more. Events carry recipients'
 * contact data, so they are not kept forever. Pending deliveries are never deleted.
 */
export async function purgeDeliveryLog(pool: Pool, retentionMs: number, options: { batch?: number; maxBatches?: number; logger?: Logger } = {}): Promise<{ deliveries: number; events: number }> {
  const batch = options.batch ?? 1_000;
  const maxBatches = options.maxBatches ?? 100;
  const started = Date.now();
  const out = { deliveries: 0, events: 0 };
  for (let round = 0; round < maxBatches; round++) {
    const { rowCount } = await pool.query(PURGE_DELIVERIES_SQL, [retentionMs, batch]);
    out.deliveries += rowCount ?? 0;
    if ((rowCount ?? 0) < batch) break;
  }
  for (let round = 0; round < maxBatches; round++) {
    const { rowCount } = await pool.query(PURGE_EVENTS_SQL, [retentionMs, batch]);
    out.events += rowCount ?? 0;
    if ((rowCount ?? 0) < batch) break;
  }
  purged.inc({ table: 'deliveries' }, out.deliveries);
  purged.inc({ table: 'events' }, out.events);
  options.logger?.info({ ...out, ms: Date.now() - started }, 'delivery log purged');
  return out;
}

/** Purges now and then every `everyMs`; returns the stop function. */
export function schedulePurgeDeliveryLog(pool: Pool, retentionMs: number, everyMs: number, logger: Logger, leader?: Pick<Leadership, 'ifLeader'>): () => void {
  // One replica purges (the housekeeping leader); the others would only repeat its DELETEs.
  const purge = () => purgeDeliveryLog(pool, retentionMs, { logger });
  const run = () => (leader ? leader.ifLeader(purge) : purge()).catch((err) => logger.warn({ err }, 'delivery log purge failed'));
  const timer = setInterval(run, everyMs);
  timer.unref();
  void run();
  return () => clearInterval(timer);
}
