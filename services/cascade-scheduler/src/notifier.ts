import pg from 'pg';
import type { Logger } from '@rrs/runtime';

/**
 * One LISTEN connection per process for the scheduler's channels. Transactions `pg_notify` on commit
 * (new due work, new outbox rows), so every replica's loops wake when work is committed anywhere.
 * A lost connection is re-established with backoff; `onReconnect` lets loops re-check, since
 * notifications sent while disconnected are lost.
 */
export class Notifier {
  private client: pg.Client | null = null;
  private readonly handlers = new Map<string, Set<(payload: string) => void>>();
  private readonly reconnectHandlers = new Set<() => void>();
  private stopped = false;
  private retryTimer: NodeJS.Timeout | null = null;

  constructor(private readonly url: string, private readonly schema: string, private readonly logger: Logger) {}

  on(channel: string, handler: (payload: string) => void): void {
    const set = this.handlers.get(channel) ?? new Set();
    set.add(handler);
    this.handlers.set(channel, set);
  }

  onReconnect(handler: () => void): void {
    this.reconnectHandlers.add(handler);
  }

  async start(): Promise<void> {
    await this.connect();
  }

  private async connect(attempt = 0): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.url, application_name: `${this.schema}-listen` });
    client.on('notification', (n) => {
      for (const h of this.handlers.get(n.channel) ?? []) h(n.payload ?? '');
    });
    client.on('error', (err) => {
      this.logger.warn({ err }, 'LISTEN connection lost; reconnecting');
      void client.end().catch(() => undefined);
      if (this.client === client) this.client = null;
      this.scheduleReconnect(1);
    });
    try {
      await client.connect();
      for (const channel of this.handlers.keys()) await client.query(`LISTEN ${channel}`);
      this.client = client;
      if (attempt > 0) for (const h of this.reconnectHandlers) h();
    } catch (err) {
      void client.end().catch(() => undefined);
      if (attempt === 0) throw err;
      this.logger.warn({ err, attempt }, 'LISTEN reconnect failed');
      this.scheduleReconnect(attempt + 1);
    }
  }

  private scheduleReconnect(attempt: number): void {
    if (this.stopped || this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.connect(attempt);
    }, Math.min(10_000, 250 * 2 ** attempt));
    this.retryTimer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await this.client?.end().catch(() => undefined);
    this.client = null;
  }
}

/** A sleep that ends early when `wake()` is called; the loops' only way of waiting. */
export class Wakeable {
  private timer: NodeJS.Timeout | null = null;
  private resolve: (() => void) | null = null;
  private pendingWake = false;
  /** Earliest wake time asked for while not sleeping (a notification racing with the loop's own check). */
  private pendingAt: number | null = null;
  /** When the current sleep ends by timer (ms since epoch); used to ignore wakes for later times. */
  private until = 0;

  sleep(ms: number): Promise<void> {
    if (this.pendingWake) {
      this.pendingWake = false;
      return Promise.resolve();
    }
    let until = Date.now() + ms;
    if (this.pendingAt !== null) {
      until = Math.min(until, this.pendingAt);
      this.pendingAt = null;
    }
    return new Promise((resolve) => {
      this.until = until;
      this.resolve = resolve;
      this.timer = setTimeout(() => this.wake(), Math.max(0, until - Date.now()));
      this.timer.unref();
    });
  }

  /** Wakes the sleeper now, or when `at` (ms since epoch) is given and is earlier than its timer, at `at`. */
  wake(at?: number): void {
    if (!this.resolve) {
      if (at === undefined || at <= Date.now()) this.pendingWake = true;
      else this.pendingAt = Math.min(this.pendingAt ?? Infinity, at);
      return;
    }
    if (at !== undefined && at > Date.now()) {
      if (at >= this.until) return;
      if (this.timer) clearTimeout(this.timer);
      this.until = at;
      this.timer = setTimeout(() => this.wake(), at - Date.now());
      this.timer.unref();
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    const r = this.resolve;
    this.resolve = null;
    this.timer = null;
    r();
  }
}
