import { counter, execute, inCoalescedTransaction, startDueWorkLoop, type Bus, type Logger, type Notifier, type Pool } from '@rrs/runtime';
import { OUTBOX_CHANNEL } from './outbox';
import { msUntilEarliest } from './sql/msUntilEarliest';

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

export interface RunningOutboxRelay {
  stop(): Promise<void>;
  relayOnce(): Promise<number>;
}

const PURGE_EVERY_MS = 60_000;

/**
 * Relays outbox rows to the bus on the runtime's due-work loop: claim a batch (SKIP LOCKED, so
 * replicas share), publish each with Nats-Msg-Id = its msg_id, mark published, commit. A crash between
 * publish and commit re-publishes the same msg ids, which the stream drops; a consumer dedupes by event
 * id beyond the window. Woken by `OUTBOX_CHANNEL` and by the earliest held-back row coming due.
 */
export async function startOutboxRelay(options: OutboxRelayOptions): Promise<RunningOutboxRelay> {
  const batchSize = options.batchSize ?? 500;
  let lastPurge = 0;

  const relayOnce = async (): Promise<number> => {
    // Two requests to PostgreSQL (a coalesced transaction): BEGIN with the claim; the mark with COMMIT.
    const count = await inCoalescedTransaction(options.pool, async (client) => {
      const { rows } = await client.query<{ id: number; msg_id: string; subject: string; payload: Buffer; headers: Record<string, string> }>(
        `SELECT id, msg_id, subject, payload, headers FROM outbox WHERE published_at IS NULL AND available_at <= clock_timestamp()
          ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`,
        [batchSize],
      );
      if (rows.length) {
        await Promise.all(rows.map((row) => options.bus.publish(row.subject, new Uint8Array(row.payload), { msgId: row.msg_id, headers: row.headers })));
        await execute(client, { text: 'UPDATE outbox SET published_at = clock_timestamp() WHERE id = ANY($1::bigint[])', values: [rows.map((row) => row.id)] });
      }
      return rows.length;
    });
    relayed.inc(count);
    return count;
  };

  /** Published rows are kept `retainMs` for inspection; deleted in bounded chunks once a minute. */
  async function purgePublished(): Promise<void> {
    if (Date.now() - lastPurge <= PURGE_EVERY_MS) return;
    lastPurge = Date.now();
    await options.pool.query(
      `DELETE FROM outbox WHERE id = ANY (ARRAY(SELECT id FROM outbox WHERE published_at < now() - make_interval(secs => $1 / 1000.0) LIMIT 5000))`,
      [options.retainMs ?? 86_400_000],
    );
  }

  const loop = startDueWorkLoop({
    name: 'outbox relay',
    logger: options.logger,
    notifier: options.notifier,
    channels: [OUTBOX_CHANNEL],
    idleMs: options.maxIdleMs ?? 30_000,
    // Rows due now but claimed by another replica: give it a moment rather than spin.
    contendedMs: 50,
    nextDueInMs: () => msUntilEarliest(options.pool, 'available_at', 'outbox', 'published_at IS NULL'),
    async round() {
      const count = await relayOnce();
      await purgePublished();
      return count >= batchSize;
    },
  });
  return { relayOnce, stop: () => loop.stop() };
}
