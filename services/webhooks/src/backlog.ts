import { gauge, inTransaction, type Pool } from '@rrs/runtime';
import { countBacklog, type DeliveryBacklog } from './deliveries';

/*
 * The delivery backlog as metrics, sampled when /metrics is scraped. One COUNT over the pending rows (see
 * countBacklog), at most once per MIN_SAMPLE_INTERVAL_MS however many scrapers there are, bounded by a
 * statement timeout. Whatever cannot be sampled is reported as no value, never as 0. Every replica reads the same table, so every replica reports the same numbers:
 * aggregate with max, never sum.
 */

/** A scrape within this long of the last sample reuses it. */
const MIN_SAMPLE_INTERVAL_MS = 5_000;
/** A sample slower than this is abandoned server-side; the gauges are then left out of the scrape. */
const SAMPLE_TIMEOUT_MS = 2_000;

/** The pools of the webhooks services of this process (one, except in tests running replicas side by side). */
const sources: Pool[] = [];
let last: { at: number; backlog: Promise<DeliveryBacklog> } | null = null;

function sample(): Promise<DeliveryBacklog> | null {
  const pool = sources[sources.length - 1];
  if (!pool) return null;
  if (last && Date.now() - last.at < MIN_SAMPLE_INTERVAL_MS) return last.backlog;
  const backlog = inTransaction(pool, async (client) => {
    await client.query(`SET LOCAL statement_timeout = ${SAMPLE_TIMEOUT_MS}`);
    return countBacklog(client);
  });
  last = { at: Date.now(), backlog };
  // A failed sample is not reused: the next scrape tries again.
  backlog.catch(() => {
    if (last?.backlog === backlog) last = null;
  });
  return backlog;
}

const pending = gauge({
  name: 'webhook_deliveries_pending',
  help: 'Pending webhook deliveries by state: due (waiting for a worker), in_flight (attempt under way), retry_scheduled (waiting for the next attempt). Sampled at scrape time; every replica reports the same table: aggregate with max.',
  labelNames: ['state'],
  async collect() {
    try {
      const backlog = await sample();
      if (!backlog) return;
      this.set({ state: 'due' }, backlog.due);
      this.set({ state: 'in_flight' }, backlog.inFlight);
      this.set({ state: 'retry_scheduled' }, backlog.retryScheduled);
    } catch {
      // Unknown is left out rather than reported as 0, which would read as "no backlog".
      this.reset();
    }
  },
});

const oldestDue = gauge({
  name: 'webhook_deliveries_oldest_due_seconds',
  help: 'How long the longest-waiting due webhook delivery has been due (0 when none is). Sampled at scrape time with webhook_deliveries_pending.',
  async collect() {
    try {
      const backlog = await sample();
      this.set(backlog ? backlog.oldestDueSeconds : NaN);
    } catch {
      // A gauge without labels cannot be left out; NaN is no value to graphs and alerts (unlike 0).
      this.set(NaN);
    }
  },
});

/** Starts reporting the backlog of the deliveries in this pool; the returned function stops it. */
export function watchDeliveryBacklog(pool: Pool): () => void {
  sources.push(pool);
  last = null;
  return () => {
    const index = sources.indexOf(pool);
    if (index >= 0) sources.splice(index, 1);
    last = null;
    if (sources.length === 0) {
      pending.reset();
      oldestDue.set(NaN);
    }
  };
}
