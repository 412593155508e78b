import { counter, inCoalescedTransaction, startDueWorkLoop, type Logger, type Notifier, type Pool } from '@rrs/runtime';
import { closeResponseWindow, type Timing } from './engine';
import { readStates, saveStates, WINDOW_CHANNEL } from './recipientStore';

const closed = counter({ name: 'scheduler_response_windows_closed_total', help: 'Waiting recipients whose response window closed without a rating (finished exhausted).' });

export interface ResponseWindowOptions {
  pool: Pool;
  notifier: Notifier;
  logger: Logger;
  minuteMs: number;
  batchSize?: number;
}

/**
 * Finishes the recipients whose response window closed without a rating: claims them (SKIP LOCKED, so
 * a rating being recorded for one wins, and replicas share the work), finishes each `exhausted` and
 * writes its finish event, in one transaction per batch. Sleeps until the earliest window closes, or a
 * notification of a new waiting recipient.
 */
export function startResponseWindowCloser(options: ResponseWindowOptions): { stop(): Promise<void> } {
  const batchSize = options.batchSize ?? 500;
  const loop = startDueWorkLoop({
    name: 'response windows',
    logger: options.logger,
    notifier: options.notifier,
    channels: [WINDOW_CHANNEL],
    nextDueInMs: async () => {
      const { rows } = await options.pool.query<{ ms: number | null }>(
        `SELECT (EXTRACT(EPOCH FROM min(window_closes_at) - clock_timestamp()) * 1000)::float8 AS ms FROM recipients WHERE status = 'waiting'`,
      );
      return rows[0].ms;
    },
    // Three requests to PostgreSQL a round (a coalesced transaction, docs/cascades.md): BEGIN with the
    // clock and the due recipients in one statement; their states; the writes with COMMIT.
    round: () =>
      inCoalescedTransaction(options.pool, async (client) => {
        const { rows } = await client.query<{ now: Date; id: string | null }>(
          `WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now)
           SELECT clock.now, w.id FROM clock LEFT JOIN LATERAL (
             SELECT id FROM recipients WHERE status = 'waiting' AND window_closes_at <= clock.now ORDER BY window_closes_at LIMIT $1) w ON true`,
          [batchSize],
        );
        const now = rows[0].now;
        const ids = rows.flatMap((row) => (row.id === null ? [] : [row.id]));
        if (ids.length === 0) return false;
        const { states } = await readStates(client, { ids }, { lock: 'skip' });
        const timing: Timing = { now, minuteMs: options.minuteMs };
        for (const state of states.values()) closeResponseWindow(state, timing);
        await saveStates(client, states.values(), now);
        closed.inc(states.size);
        return ids.length === batchSize;
      }),
  });
  return { stop: () => loop.stop() };
}
