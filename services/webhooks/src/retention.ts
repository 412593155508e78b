import type { Leadership, Pool } from '@rrs/runtime';

/**
 * The delivery log is kept for a retention period, then deleted: settled deliveries (with their
 * attempts) last changed before it, and events no delivery refers to any more. Events carry recipients'
 * contact data, so they are not kept forever. Pending deliveries are never deleted.
 */
export async function purgeDeliveryLog(pool: Pool, retentionMs: number, options: { batch?: number; maxBatches?: number } = {}): Promise<{ deliveries: number; events: number }> {
  const batch = options.batch ?? 1_000;
  const maxBatches = options.maxBatches ?? 100;
  const out = { deliveries: 0, events: 0 };
  for (let round = 0; round < maxBatches; round++) {
    const { rowCount } = await pool.query(
      `DELETE FROM deliveries WHERE id = ANY (ARRAY(
         SELECT id FROM deliveries WHERE status <> 'pending' AND updated_at < now() - make_interval(secs => $1 / 1000.0) LIMIT $2))`,
      [retentionMs, batch],
    );
    out.deliveries += rowCount ?? 0;
    if ((rowCount ?? 0) < batch) break;
  }
  for (let round = 0; round < maxBatches; round++) {
    const { rowCount } = await pool.query(
      `DELETE FROM events WHERE id = ANY (ARRAY(
         SELECT e.id FROM events e WHERE e.received_at < now() - make_interval(secs => $1 / 1000.0)
           AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id) LIMIT $2))`,
      [retentionMs, batch],
    );
    out.events += rowCount ?? 0;
    if ((rowCount ?? 0) < batch) break;
  }
  return out;
}

/** Purges now and then every `everyMs`; returns the stop function. */
export function schedulePurgeDeliveryLog(pool: Pool, retentionMs: number, everyMs: number, onError: (err: unknown) => void, leader?: Pick<Leadership, 'ifLeader'>): () => void {
  // One replica purges (the housekeeping leader); the others would only repeat its DELETEs.
  const purge = () => purgeDeliveryLog(pool, retentionMs);
  const run = () => (leader ? leader.ifLeader(purge) : purge()).catch(onError);
  const timer = setInterval(run, everyMs);
  timer.unref();
  void run();
  return () => clearInterval(timer);
}
