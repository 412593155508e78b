import { counter, type Bus, type Logger, type Pool } from '@rrs/runtime';
import { Wakeable, type Notifier } from './notifier';
import { OUTBOX_CHANNEL } from './store';

const relayed = counter({ name: 'scheduler_outbox_relayed_total', help: 'Outbox events published to the bus.' });

export interface OutboxRelayOptions {
  pool: Pool;
  bus: Bus;
  notifier: Notifier;
  logger: Logger;
  batchSize?: number;
  maxIdleMs?: number;
  /** Published rows are deleted after this long (they are kept a while for inspection). */
  retainMs?: number;
}

/**
 * Relays outbox rows to the bus: claim a batch (SKIP LOCKED, so replicas share), publish each with
 * Nats-Msg-Id = its msg_id, mark published, commit. A crash between publish and commit re-publishes
 * the same msg ids, which the stream drops; a consumer dedupes by event id beyond the window.
 */
export async function startOutboxRelay(o: OutboxRelayOptions): Promise<{ stop(): Promise<void>; relayOnce(): Promise<number> }> {
  const batchSize = o.batchSize ?? 500;
  const wakeable = new Wakeable();
  o.notifier.on(OUTBOX_CHANNEL, (payload) => {
    const at = Number(payload);
    wakeable.wake(payload !== '' && Number.isFinite(at) ? at : undefined);
  });
  o.notifier.onReconnect(() => wakeable.wake());
  let running = true;
  let failures = 0;
  let lastPurge = 0;

  async function relayOnce(): Promise<number> {
    const client = await o.pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<{ id: number; msg_id: string; subject: string; payload: Buffer; headers: Record<string, string> }>(
        `SELECT id, msg_id, subject, payload, headers FROM outbox WHERE published_at IS NULL AND available_at <= clock_timestamp()
          ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
        [batchSize],
      );
      if (rows.length) {
        await Promise.all(rows.map((r) => o.bus.publish(r.subject, new Uint8Array(r.payload), { msgId: r.msg_id, headers: r.headers })));
        await client.query('UPDATE outbox SET published_at = clock_timestamp() WHERE id = ANY($1::bigint[])', [rows.map((r) => r.id)]);
      }
      await client.query('COMMIT');
      relayed.inc(rows.length);
      return rows.length;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  const loop = (async () => {
    while (running) {
      try {
        const n = await relayOnce();
        failures = 0;
        if (Date.now() - lastPurge > 60_000) {
          lastPurge = Date.now();
          await o.pool.query(
            `DELETE FROM outbox WHERE id = ANY (ARRAY(SELECT id FROM outbox WHERE published_at < now() - make_interval(secs => $1 / 1000.0) LIMIT 5000))`,
            [o.retainMs ?? 86_400_000],
          );
        }
        if (n >= batchSize) continue;
        const { rows } = await o.pool.query<{ ms: number | null }>(
          `SELECT (extract(epoch FROM min(available_at) - clock_timestamp()) * 1000)::float8 AS ms FROM outbox WHERE published_at IS NULL`,
        );
        const maxIdle = o.maxIdleMs ?? 30_000;
        const wait = rows[0].ms === null ? maxIdle : Math.min(maxIdle, Math.max(0, rows[0].ms));
        // Rows due now but claimed by another replica: give it a moment rather than spin.
        if (running) await wakeable.sleep(n === 0 ? Math.max(wait, 50) : wait);
      } catch (err) {
        failures++;
        const delay = Math.min(5_000, 100 * 2 ** Math.min(failures, 6));
        o.logger.warn({ err, retryInMs: delay }, 'outbox relay failed');
        if (running) await wakeable.sleep(delay);
      }
    }
  })();

  return {
    relayOnce,
    async stop() {
      running = false;
      wakeable.wake();
      await loop;
    },
  };
}
