import pg from 'pg';
import type { Logger } from 'pino';

/**
 * One LISTEN connection per process for a service's channels. Transactions `pg_notify` on commit (new
 * due work, new outbox rows), so every replica's loops wake when work is committed anywhere. A lost
 * connection is re-established with backoff; `onReconnect` handlers run after it is back, since
 * notifications sent while disconnected are lost.
 */
export class Notifier {
  private client: pg.Client | null = null;
  private readonly handlers = new Map<string, Set<(payload: string) => void>>();
  private readonly reconnectHandlers = new Set<() => void>();
  private stopped = false;
  private retryTimer: NodeJS.Timeout | null = null;

  /** `name` labels the connection (`application_name` = `<name>-listen`). */
  constructor(private readonly url: string, private readonly name: string, private readonly logger: Logger) {}

  /** Subscribes to a channel; register every channel before `start()`. */
  on(channel: string, handler: (payload: string) => void): void {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`invalid LISTEN channel name: ${channel}`);
    const set = this.handlers.get(channel) ?? new Set();
    set.add(handler);
    this.handlers.set(channel, set);
  }

  onReconnect(handler: () => void): void {
    this.reconnectHandlers.add(handler);
  }

  /** Connects and listens; rejects when the first connection fails (a later loss reconnects by itself). */
  async start(): Promise<void> {
    await this.connect();
  }

  get connected(): boolean {
    return this.client !== null;
  }

  private async connect(attempt = 0): Promise<void> {
    if (this.stopped) return;
    const client = new pg.Client({ connectionString: this.url, application_name: `${this.name}-listen` });
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
      if (this.stopped) {
        await client.end().catch(() => undefined);
        return;
      }
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
