import type { Consumer, ConsumerMessages, JsMsg, MsgHdrs, NatsConnection } from 'nats';
import { Delivery, HandlerSlots } from './delivery';
import { BusError, toBusError, type BusErrorHandler } from './errors';
import { isMissingResource, serverAtLeast } from './jetstreamApi';
import type { BusRules, ConsumerRule } from './rules';
import type { MessageHandler, Subscription } from './types';

/**
 * Lifetime of one pull request. A drain closes the request at once, so this only bounds how long an idle
 * consumer goes without re-asking the server; nats.js requires at least 1 000.
 */
const FETCH_EXPIRES_MS = 10_000;
const RETRY_BASE_MS = 250;
const RETRY_MAX_MS = 5_000;

export interface SubscriptionContext {
  nc: NatsConnection;
  consumer: Consumer;
  rule: ConsumerRule;
  rules: BusRules;
  handler: MessageHandler;
  onError: BusErrorHandler;
  isConnected: () => boolean;
  /** Resolves once the connection is up (true) or closed for good (false). */
  whenConnected: () => Promise<boolean>;
  /** Recreates streams and the durable after the server reported them missing. */
  recreate: () => Promise<void>;
  onDrained: (subscription: JetStreamSubscription) => void;
}

/**
 * One pull loop per `consume()`. Each pull asks for exactly as many messages as there are free handler
 * slots, so no message waits in a client buffer while its ack deadline runs, and competing processes get
 * the rest.
 */
export class JetStreamSubscription implements Subscription {
  private readonly handlers: HandlerSlots;
  private batch: ConsumerMessages | null = null;
  private draining = false;
  private wakeLoop: (() => void) | null = null;
  private loop: Promise<void> = Promise.resolve();
  private drained: Promise<void> | null = null;

  constructor(private readonly ctx: SubscriptionContext) {
    this.handlers = new HandlerSlots(ctx.handler, ctx.rule, ctx.onError, () => this.wake());
  }

  start(): void {
    this.loop = this.run().catch((err: unknown) => {
      this.ctx.onError(toBusError(`pull loop for ${this.label()} stopped`, err));
    });
  }

  drain(): Promise<void> {
    if (!this.drained) {
      this.drained = (async () => {
        this.draining = true;
        this.wake();
        void this.batch?.close();
        await this.loop;
        await this.handlers.idle();
        // Settlements are fire-and-forget publishes; flushing makes sure the server has them before we return.
        if (!this.ctx.nc.isClosed()) await this.ctx.nc.flush().catch(() => undefined);
        this.ctx.onDrained(this);
      })();
    }
    return this.drained;
  }

  private label(): string {
    return `${this.ctx.rule.streamName}/${this.ctx.rule.durable}`;
  }

  private async run(): Promise<void> {
    let failures = 0;
    let recreate = false;
    while (!this.draining) {
      if (this.ctx.nc.isClosed()) {
        this.ctx.onError(new BusError(`connection closed; consumer ${this.label()} stopped pulling`));
        return;
      }
      if (!(await this.untilConnected())) continue;
      const free = this.handlers.free;
      if (free <= 0) {
        await this.sleep();
        continue;
      }
      if (recreate) {
        try {
          await this.ctx.recreate();
          recreate = false;
        } catch (err) {
          failures++;
          this.ctx.onError(toBusError(`recreating ${this.label()} failed (attempt ${failures})`, err));
          await this.sleep(backoffMs(failures));
          continue;
        }
      }
      const startedAt = Date.now();
      let received = 0;
      try {
        const batch = await this.ctx.consumer.fetch({ max_messages: free, expires: FETCH_EXPIRES_MS });
        this.batch = batch;
        if (this.draining) void batch.close();
        for await (const raw of batch) {
          received++;
          // A pull re-issued by nats.js after a reconnect or missed heartbeats asks for a full batch again,
          // so a single fetch can deliver more than the slots that were free when it started.
          while (!this.draining && this.handlers.free <= 0) await this.sleep();
          if (this.draining) {
            // Delivered after drain began: hand it straight back rather than let it sit out the ack wait.
            safely(() => raw.nak(), this.ctx.onError, `returning ${raw.subject} #${raw.seq}`);
          } else {
            this.handlers.run(new JetStreamMessage(raw, this.ctx));
          }
        }
        if (received === 0 && Date.now() - startedAt < 100 && !this.draining) {
          // A pull that ends at once without messages or error would otherwise spin.
          failures++;
          await this.sleep(backoffMs(failures));
        } else {
          failures = 0;
        }
      } catch (err) {
        if (this.draining) break;
        failures++;
        this.ctx.onError(toBusError(`pulling from ${this.label()} failed (attempt ${failures})`, err));
        // Recreate only after the backoff: a stream or consumer being deleted right now cannot be re-added yet.
        recreate = isMissingResource(err);
        await this.sleep(backoffMs(failures));
      } finally {
        this.batch = null;
      }
    }
  }

  /** A pull written while disconnected could be lost; wait for the reconnect (or a drain) instead. */
  private async untilConnected(): Promise<boolean> {
    if (this.ctx.isConnected()) return true;
    const connected = this.ctx.whenConnected();
    const outcome = await Promise.race([connected, this.sleep().then(() => 'woken' as const)]);
    if (outcome === 'woken') return false;
    this.wake();
    return outcome;
  }

  /** Resolves when a handler finishes, drain starts, or `ms` passes. */
  private sleep(ms?: number): Promise<void> {
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = (): void => {
        clearTimeout(timer);
        if (this.wakeLoop === done) this.wakeLoop = null;
        resolve();
      };
      if (ms !== undefined) {
        timer = setTimeout(done, ms);
        timer.unref();
      }
      this.wakeLoop = done;
    });
  }

  private wake(): void {
    this.wakeLoop?.();
  }
}

class JetStreamMessage extends Delivery {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
  readonly deliveryCount: number;
  readonly seq: number;
  /** Servers before 2.10.4 do not recognise "+TERM <reason>" and treat it as no settlement at all. */
  private readonly termReasons: boolean;
  private readonly onError: BusErrorHandler;

  constructor(
    private readonly raw: JsMsg,
    ctx: SubscriptionContext,
  ) {
    super(ctx.rule.maxDeliver);
    this.termReasons = serverAtLeast(ctx.nc, [2, 10, 4]);
    this.onError = ctx.onError;
    this.subject = ctx.rules.localSubject(raw.subject);
    this.data = raw.data;
    this.headers = headersToRecord(raw.headers);
    this.deliveryCount = raw.info.redeliveryCount;
    this.seq = raw.seq;
  }

  protected sendAck(): void {
    this.send('ack', () => this.raw.ack());
  }

  protected sendNak(delayMs: number): void {
    this.send('nak', () => (delayMs > 0 ? this.raw.nak(delayMs) : this.raw.nak()));
  }

  protected sendTerm(reason: string | undefined): void {
    this.send('term', () => (reason && this.termReasons ? this.raw.term(reason) : this.raw.term()));
  }

  protected sendWorking(): void {
    safely(() => this.raw.working(), this.onError, `extending ${this.subject} #${this.seq}`);
  }

  private send(kind: string, send: () => void): void {
    safely(send, this.onError, `${kind} of ${this.subject} #${this.seq}`);
  }
}

function headersToRecord(hdrs: MsgHdrs | undefined): Record<string, string> {
  const record: Record<string, string> = {};
  if (!hdrs) return record;
  for (const key of hdrs.keys()) record[key] = hdrs.get(key);
  return record;
}

function backoffMs(failures: number): number {
  const base = Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** Math.min(failures - 1, 10));
  return base / 2 + Math.random() * (base / 2);
}

function safely(action: () => void, onError: BusErrorHandler, what: string): void {
  try {
    action();
  } catch (err) {
    onError(toBusError(`${what} failed`, err));
  }
}
