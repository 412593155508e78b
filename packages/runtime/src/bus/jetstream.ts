import {
  AckPolicy,
  connect,
  createInbox,
  DeliverPolicy,
  Events,
  headers as natsHeaders,
  KvWatchInclude,
  nanos,
  RetentionPolicy,
  StorageType,
  type Consumer,
  type ConsumerConfig,
  type ConsumerMessages,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
  type KV,
  type KvEntry as NatsKvEntry,
  type Msg,
  type MsgHdrs,
  type NatsConnection,
  type QueuedIterator,
  type StreamConfig,
  type Subscription as NatsSubscription,
} from 'nats';
import { BusError, defaultErrorHandler, toBusError, type BusErrorHandler } from './errors';
import type {
  Bus,
  BusMessage,
  BusOptions,
  ConsumeOptions,
  KvEntry,
  KvOptions,
  KvStore,
  MessageHandler,
  OutgoingMessage,
  PublishAck,
  PublishOptions,
  StreamName,
  Subscription,
} from './types';

export interface JetStreamBusOptions extends BusOptions {
  /** NATS server URL; several may be given comma separated. */
  url: string;
  /** Connection name shown by the server's monitoring. */
  name?: string;
  /** Failures with no caller to throw to (handler errors, pull loop errors). Default `console.error`. */
  onError?: BusErrorHandler;
}

const DEFAULT_CONCURRENCY = 16;
const DEFAULT_ACK_WAIT_MS = 30_000;
const DEFAULT_MAX_DELIVER = 10;
const DEFAULT_NAK_DELAY_MS = 1_000;
const DEFAULT_DUPLICATE_WINDOW_MS = 120_000;
const EVENTS_MAX_AGE_MS = 7 * 24 * 3_600_000;
/**
 * Lifetime of one pull request. A drain closes the request at once, so this only bounds how long an idle
 * consumer goes without re-asking the server; nats.js requires at least 1 000.
 */
const FETCH_EXPIRES_MS = 10_000;
const RETRY_BASE_MS = 250;
const RETRY_MAX_MS = 5_000;
/** How long a publish waits for a lost connection to come back before failing. */
const PUBLISH_RECONNECT_WAIT_MS = 5_000;
/** How long a batch waits for its PubAcks when the JetStream options set no timeout (nats.js's default). */
const DEFAULT_PUBLISH_TIMEOUT_MS = 5_000;
const MSG_ID_HEADER = 'Nats-Msg-Id';

const STREAM_ROOTS: Record<StreamName, string> = { STEPS: 'steps', EVENTS: 'events' };

/** JetStream API error codes the bus reacts to. */
const ERR_STREAM_NAME_IN_USE = 10058;
const ERR_CONSUMER_ALREADY_EXISTS = 10148;
const ERR_CONSUMER_NOT_FOUND = 10014;
const ERR_STREAM_NOT_FOUND = 10059;

export async function connectJetStreamBus(options: JetStreamBusOptions): Promise<Bus> {
  const prefix = validatePrefix(options.prefix ?? '');
  const duplicateWindowMs = options.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS;
  if (!(duplicateWindowMs > 0)) throw new BusError('duplicateWindowMs must be positive');
  const servers = options.url.split(',').map((url) => url.trim());
  let nc: NatsConnection;
  try {
    // Never give up reconnecting: a service outlives server restarts and its consumers resume on reconnect.
    // noAsyncTraces: nats.js otherwise captures a stack trace on every publish, which was the largest
    // single cost of the bus in the dispatch benchmark (2-4x throughput without it).
    nc = await connect({ servers, name: options.name, maxReconnectAttempts: -1, reconnectTimeWait: 1_000, noAsyncTraces: true });
  } catch (err) {
    throw toBusError(`cannot connect to NATS at ${options.url}`, err);
  }
  try {
    const jsm = await nc.jetstreamManager();
    return new JetStreamBus(nc, jsm, nc.jetstream(), { prefix, duplicateWindowMs, onError: options.onError ?? defaultErrorHandler });
  } catch (err) {
    await nc.close().catch(() => undefined);
    throw toBusError(`JetStream is not available at ${options.url}`, err);
  }
}

interface ResolvedConsumeOptions {
  stream: StreamName;
  streamName: string;
  durable: string;
  filterSubject: string;
  concurrency: number;
  ackWaitMs: number;
  maxDeliver: number;
  defaultNakDelayMs: number;
}

class JetStreamBus implements Bus {
  readonly kind = 'jetstream' as const;
  private streamsReady: Promise<void> | null = null;
  private readonly subscriptions = new Set<JetStreamSubscription>();
  private readonly watchers = new Set<() => void>();
  private closing: Promise<void> | null = null;
  private readonly prefix: string;
  private readonly duplicateWindowMs: number;
  private readonly onError: BusErrorHandler;
  private connected = true;
  private readonly reconnectWaiters = new Set<() => void>();
  private readonly pubAcks: PubAckRouter;

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly js: JetStreamClient,
    settings: { prefix: string; duplicateWindowMs: number; onError: BusErrorHandler },
  ) {
    this.prefix = settings.prefix;
    this.duplicateWindowMs = settings.duplicateWindowMs;
    this.onError = settings.onError;
    this.pubAcks = new PubAckRouter(nc, js.getOptions().timeout || DEFAULT_PUBLISH_TIMEOUT_MS);
    void nc.closed().then((err) => {
      if (err && !this.closing) this.onError(toBusError('NATS connection closed', err));
    });
    void this.trackConnection();
  }

  ensureStreams(): Promise<void> {
    if (!this.streamsReady) {
      this.streamsReady = this.createStreams().catch((err: unknown) => {
        this.streamsReady = null;
        throw toBusError('cannot create streams', err);
      });
    }
    return this.streamsReady;
  }

  async publish(subject: string, data: Uint8Array, options: PublishOptions = {}): Promise<PublishAck> {
    streamOf(subject);
    await this.ensureStreams();
    // A request written while disconnected is flushed on reconnect but its reply can be lost, so the publish
    // would time out even though the server is back; waiting for the reconnect avoids that.
    if (!(await this.whenConnected(PUBLISH_RECONNECT_WAIT_MS))) {
      throw new BusError(`publish to ${subject} failed: not connected to NATS`);
    }
    try {
      return await this.publishOnce(subject, data, options);
    } catch (err) {
      if (!isNoResponders(err)) throw toBusError(`publish to ${subject} failed`, err);
    }
    // No stream answered: the server lost its state (or someone deleted the stream); recreate once and retry.
    this.streamsReady = null;
    await this.ensureStreams();
    try {
      return await this.publishOnce(subject, data, options);
    } catch (err) {
      throw toBusError(`publish to ${subject} failed`, err);
    }
  }

  async publishBatch(messages: OutgoingMessage[]): Promise<PublishAck[]> {
    const batch = messages.map((m) => this.prepare(m));
    if (batch.length === 0) return [];
    await this.ensureStreams();
    const acks: PublishAck[] = new Array<PublishAck>(batch.length);
    let unstored = batch.map((_, i) => i);
    for (let attempt = 1; ; attempt++) {
      // As in publish: a batch written while disconnected would be flushed on reconnect with its acks lost.
      if (!(await this.whenConnected(PUBLISH_RECONNECT_WAIT_MS))) {
        throw new BusError(`publish of ${unstored.length} of ${batch.length} messages failed: not connected to NATS`);
      }
      unstored = await this.pubAcks.send(batch, unstored, acks);
      if (unstored.length === 0) return acks;
      if (attempt === 2) {
        throw new BusError(`publish to ${batch[unstored[0]].subject} failed: no stream answered (${unstored.length} of ${batch.length} messages not stored)`);
      }
      // No stream answered: the server lost its state (or someone deleted a stream); recreate once and resend those.
      this.streamsReady = null;
      await this.ensureStreams();
    }
  }

  async consume(options: ConsumeOptions, handler: MessageHandler): Promise<Subscription> {
    if (this.closing) throw new BusError('bus is closed');
    const resolved = this.resolveConsumeOptions(options);
    await this.ensureStreams();
    await this.upsertConsumer(resolved);
    let consumer: Consumer;
    try {
      consumer = await this.js.consumers.get(resolved.streamName, resolved.durable);
    } catch (err) {
      throw toBusError(`cannot bind consumer ${resolved.streamName}/${resolved.durable}`, err);
    }
    const subscription = new JetStreamSubscription({
      nc: this.nc,
      consumer,
      options: resolved,
      handler,
      prefixLength: this.prefix ? this.prefix.length + 1 : 0,
      onError: this.onError,
      isConnected: () => this.connected,
      whenConnected: () => this.whenConnected(),
      recreate: async () => {
        this.streamsReady = null;
        await this.ensureStreams();
        await this.upsertConsumer(resolved);
      },
      onDrained: (s) => this.subscriptions.delete(s),
    });
    this.subscriptions.add(subscription);
    subscription.start();
    return subscription;
  }

  async kv(bucket: string, options: KvOptions): Promise<KvStore> {
    if (!/^[-\w]+$/.test(bucket)) throw new BusError(`invalid bucket name: ${bucket}`);
    if (!(options.ttlMs > 0)) throw new BusError('ttlMs must be positive');
    const name = this.prefix ? `${this.prefix}_${bucket}` : bucket;
    try {
      const kv = await this.js.views.kv(name, { ttl: options.ttlMs, history: 1 });
      // An existing bucket keeps the TTL it was created with; entries expire by that one.
      const ttlMs = (await kv.status()).ttl || options.ttlMs;
      return new JetStreamKv(this.jsm, kv, name, ttlMs, this.onError, this.watchers);
    } catch (err) {
      throw toBusError(`cannot open bucket ${name}`, err);
    }
  }

  async pending(stream: StreamName, durable: string): Promise<number> {
    try {
      const info = await this.jsm.consumers.info(this.streamName(stream), durable);
      return info.num_pending + info.num_ack_pending;
    } catch (err) {
      throw toBusError(`cannot read consumer ${this.streamName(stream)}/${durable}`, err);
    }
  }

  close(): Promise<void> {
    if (!this.closing) {
      this.closing = (async () => {
        await Promise.allSettled([...this.subscriptions].map((s) => s.drain()));
        for (const stop of [...this.watchers]) stop();
        if (this.nc.isClosed()) return;
        try {
          await this.nc.drain();
        } catch (err) {
          if (!this.nc.isClosed()) throw toBusError('closing the NATS connection failed', err);
        }
      })();
    }
    return this.closing;
  }

  /** Resolves true once connected (at once if connected), false after `timeoutMs` or when the connection closes. */
  private whenConnected(timeoutMs?: number): Promise<boolean> {
    if (this.connected) return Promise.resolve(true);
    if (this.nc.isClosed()) return Promise.resolve(false);
    return new Promise((resolve) => {
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => done(), timeoutMs);
      timer?.unref();
      const done = (): void => {
        clearTimeout(timer);
        this.reconnectWaiters.delete(done);
        resolve(this.connected);
      };
      this.reconnectWaiters.add(done);
    });
  }

  private async trackConnection(): Promise<void> {
    try {
      for await (const status of this.nc.status()) {
        if (status.type === Events.Disconnect) {
          this.connected = false;
          this.pubAcks.failAll('lost the connection to NATS');
        }
        if (status.type === Events.Reconnect) {
          this.connected = true;
          for (const wake of [...this.reconnectWaiters]) wake();
        }
      }
    } finally {
      this.connected = false;
      this.pubAcks.failAll('the NATS connection closed');
      for (const wake of [...this.reconnectWaiters]) wake();
    }
  }

  private streamName(stream: StreamName): string {
    return this.prefix ? `${this.prefix.toUpperCase()}_${stream}` : stream;
  }

  private fullSubject(subject: string): string {
    return this.prefix ? `${this.prefix}.${subject}` : subject;
  }

  private async publishOnce(subject: string, data: Uint8Array, options: PublishOptions): Promise<PublishAck> {
    const ack = await this.js.publish(this.fullSubject(subject), data, { msgID: options.msgId, headers: toNatsHeaders(options.headers) });
    return { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate };
  }

  /** Checks one message of a batch and builds what goes on the wire, so nothing is sent if any is invalid. */
  private prepare(message: OutgoingMessage): PreparedMessage {
    const { subject, data, options = {} } = message;
    streamOf(subject);
    const maxPayload = this.nc.info?.max_payload;
    if (maxPayload !== undefined && data.length > maxPayload) {
      throw new BusError(`publish to ${subject} failed: ${data.length} bytes exceed the server's max_payload (${maxPayload})`);
    }
    let headers: MsgHdrs | undefined;
    try {
      headers = toNatsHeaders(options.headers);
      // Set last, as js.publish does: the msgId wins over a Nats-Msg-Id the caller put in the headers.
      if (options.msgId) (headers ??= natsHeaders()).set(MSG_ID_HEADER, options.msgId);
    } catch (err) {
      throw toBusError(`publish to ${subject} failed`, err);
    }
    return { subject, fullSubject: this.fullSubject(subject), data, headers };
  }

  private async createStreams(): Promise<void> {
    const common: Partial<StreamConfig> = {
      storage: StorageType.File,
      duplicate_window: nanos(this.duplicateWindowMs),
      num_replicas: 1,
    };
    await this.upsertStream({
      ...common,
      name: this.streamName('STEPS'),
      subjects: [this.fullSubject('steps.>')],
      retention: RetentionPolicy.Workqueue,
    });
    await this.upsertStream({
      ...common,
      name: this.streamName('EVENTS'),
      subjects: [this.fullSubject('events.>')],
      retention: RetentionPolicy.Limits,
      max_age: nanos(EVENTS_MAX_AGE_MS),
    });
  }

  private async upsertStream(config: Partial<StreamConfig> & { name: string }): Promise<void> {
    try {
      await this.jsm.streams.add(config);
    } catch (err) {
      if (apiErrorCode(err) !== ERR_STREAM_NAME_IN_USE) throw err;
      const { name, ...update } = config;
      await this.jsm.streams.update(name, update);
    }
  }

  private async upsertConsumer(options: ResolvedConsumeOptions): Promise<void> {
    const config: Partial<ConsumerConfig> = {
      durable_name: options.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(options.ackWaitMs),
      max_deliver: options.maxDeliver,
      filter_subject: this.fullSubject(options.filterSubject),
    };
    try {
      try {
        // NATS 2.9 updates a durable in place on create; 2.10+ answers "already exists" and needs an update.
        await this.jsm.consumers.add(options.streamName, config);
      } catch (err) {
        if (apiErrorCode(err) !== ERR_CONSUMER_ALREADY_EXISTS) throw err;
        await this.jsm.consumers.update(options.streamName, options.durable, {
          ack_wait: config.ack_wait,
          max_deliver: config.max_deliver,
          filter_subject: config.filter_subject,
        });
      }
    } catch (err) {
      throw toBusError(`cannot create consumer ${options.streamName}/${options.durable}`, err);
    }
  }

  private resolveConsumeOptions(options: ConsumeOptions): ResolvedConsumeOptions {
    validateDurable(options.durable);
    if (streamOf(options.filterSubject, true) !== options.stream) {
      throw new BusError(`filter ${options.filterSubject} is not within stream ${options.stream}`);
    }
    const resolved: ResolvedConsumeOptions = {
      stream: options.stream,
      streamName: this.streamName(options.stream),
      durable: options.durable,
      filterSubject: options.filterSubject,
      concurrency: options.concurrency ?? DEFAULT_CONCURRENCY,
      ackWaitMs: options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS,
      maxDeliver: options.maxDeliver ?? DEFAULT_MAX_DELIVER,
      defaultNakDelayMs: options.defaultNakDelayMs ?? DEFAULT_NAK_DELAY_MS,
    };
    if (!Number.isInteger(resolved.concurrency) || resolved.concurrency < 1) throw new BusError('concurrency must be a positive integer');
    if (!(resolved.ackWaitMs > 0)) throw new BusError('ackWaitMs must be positive');
    if (!Number.isInteger(resolved.maxDeliver) || resolved.maxDeliver < 1) throw new BusError('maxDeliver must be a positive integer');
    if (!(resolved.defaultNakDelayMs >= 0)) throw new BusError('defaultNakDelayMs must not be negative');
    return resolved;
  }
}

/** A batch message, checked and ready to be written. */
interface PreparedMessage {
  /** Without the bus prefix, for errors. */
  subject: string;
  fullSubject: string;
  data: Uint8Array;
  headers: MsgHdrs | undefined;
}

interface PendingBatch {
  answer(index: number, msg: Msg): void;
  fail(error: BusError): void;
}

/** Marks a PubAck that is a no-responders status: no stream took the subject. */
const NO_RESPONDERS = Symbol('no responders');

const utf8 = new TextDecoder();

/**
 * Pipelined JetStream publishing: a batch is written in one go with core publishes whose reply subjects
 * are tokens under one private inbox, and a single wildcard subscription routes each PubAck to its batch.
 * This replaces a request (reply subscription, timer, flush) per message. Tokens are never reused, so
 * an ack that arrives after its batch has failed finds no entry and is dropped.
 */
class PubAckRouter {
  private subscription: NatsSubscription | null = null;
  private inbox = '';
  private lastToken = 0;
  private readonly waiting = new Map<string, { batch: PendingBatch; index: number }>();
  private readonly batches = new Set<PendingBatch>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly timeoutMs: number,
  ) {}

  /**
   * Writes the messages at `indexes` and fills their acks in `acks`. Resolves with the indexes that no
   * stream answered (in input order), once every other one is stored; rejects on the first message that
   * was not stored, or when some are still unanswered after the timeout.
   */
  send(messages: readonly PreparedMessage[], indexes: readonly number[], acks: PublishAck[]): Promise<number[]> {
    return new Promise((resolve, reject) => {
      let inbox: string;
      try {
        inbox = this.replyInbox();
      } catch (err) {
        reject(toBusError('publish batch failed: cannot subscribe to its acks', err));
        return;
      }
      const tokens: string[] = [];
      const noResponders: number[] = [];
      let unanswered = indexes.length;
      let settled = false;
      const finish = (error?: BusError): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.batches.delete(batch);
        if (error) {
          for (const token of tokens) this.waiting.delete(token);
          reject(error);
        } else {
          resolve(noResponders.sort((a, b) => a - b));
        }
      };
      const batch: PendingBatch = {
        answer: (index, msg) => {
          const ack = readPubAck(msg, messages[index].subject);
          if (ack instanceof BusError) return finish(ack);
          if (ack === NO_RESPONDERS) noResponders.push(index);
          else acks[index] = ack;
          if (--unanswered === 0) finish();
        },
        fail: finish,
      };
      const timer = setTimeout(() => {
        finish(new BusError(`publish batch timed out: ${unanswered} of ${indexes.length} messages not acknowledged within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      timer.unref();
      this.batches.add(batch);
      // Kept synchronous: nats.js flushes its buffer in a microtask (or at 32 KiB), so the batch goes out in a
      // few large writes instead of one per message.
      for (const index of indexes) {
        const message = messages[index];
        const token = (++this.lastToken).toString(36);
        tokens.push(token);
        this.waiting.set(token, { batch, index });
        try {
          this.nc.publish(message.fullSubject, message.data, { reply: `${inbox}.${token}`, headers: message.headers });
        } catch (err) {
          finish(toBusError(`publish to ${message.subject} failed`, err));
          return;
        }
      }
    });
  }

  /** Fails every batch still waiting: their acks may never arrive. */
  failAll(reason: string): void {
    for (const batch of [...this.batches]) batch.fail(new BusError(`publish batch failed: ${reason} while acks were outstanding`));
  }

  private replyInbox(): string {
    if (this.subscription && !this.subscription.isClosed()) return this.inbox;
    const inbox = createInbox();
    this.subscription = this.nc.subscribe(`${inbox}.*`, {
      callback: (err, msg) => {
        if (err) {
          this.failAll(`the ack subscription failed (${err.message})`);
          return;
        }
        const token = msg.subject.slice(inbox.length + 1);
        const entry = this.waiting.get(token);
        if (!entry) return;
        this.waiting.delete(token);
        entry.batch.answer(entry.index, msg);
      },
    });
    this.inbox = inbox;
    return inbox;
  }
}

/** A PubAck, the no-responders status, or why the message was not stored. */
function readPubAck(msg: Msg, subject: string): PublishAck | typeof NO_RESPONDERS | BusError {
  if (msg.data.length === 0) {
    if (msg.headers?.code === 503) return NO_RESPONDERS;
    return new BusError(`publish to ${subject} failed: unexpected reply status ${msg.headers?.code ?? 'none'} ${msg.headers?.description ?? ''}`.trimEnd());
  }
  let reply: { stream?: unknown; seq?: unknown; duplicate?: unknown; error?: { code?: number; err_code?: number; description?: string } };
  try {
    reply = JSON.parse(utf8.decode(msg.data)) as typeof reply;
  } catch (err) {
    return toBusError(`publish to ${subject} failed: unreadable ack`, err);
  }
  if (reply.error) {
    const { description = 'unknown error', err_code: errCode, code } = reply.error;
    return new BusError(`publish to ${subject} failed: ${description} (${errCode ?? code})`, { cause: reply.error });
  }
  if (typeof reply.stream !== 'string' || reply.stream === '' || typeof reply.seq !== 'number') {
    return new BusError(`publish to ${subject} failed: invalid ack`);
  }
  return { stream: reply.stream, seq: reply.seq, duplicate: reply.duplicate === true };
}

interface SubscriptionContext {
  nc: NatsConnection;
  consumer: Consumer;
  options: ResolvedConsumeOptions;
  handler: MessageHandler;
  prefixLength: number;
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
class JetStreamSubscription implements Subscription {
  private readonly inFlight = new Set<Promise<void>>();
  private batch: ConsumerMessages | null = null;
  private draining = false;
  private wakeLoop: (() => void) | null = null;
  private loop: Promise<void> = Promise.resolve();
  private drained: Promise<void> | null = null;

  constructor(private readonly ctx: SubscriptionContext) {}

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
        while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
        // Settlements are fire-and-forget publishes; flushing makes sure the server has them before we return.
        if (!this.ctx.nc.isClosed()) await this.ctx.nc.flush().catch(() => undefined);
        this.ctx.onDrained(this);
      })();
    }
    return this.drained;
  }

  private label(): string {
    return `${this.ctx.options.streamName}/${this.ctx.options.durable}`;
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
      const free = this.ctx.options.concurrency - this.inFlight.size;
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
          while (!this.draining && this.inFlight.size >= this.ctx.options.concurrency) await this.sleep();
          if (this.draining) {
            // Delivered after drain began: hand it straight back rather than let it sit out the ack wait.
            safely(() => raw.nak(), this.ctx.onError, `returning ${raw.subject} #${raw.seq}`);
          } else {
            this.dispatch(raw);
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

  private dispatch(raw: JsMsg): void {
    const msg = new JetStreamMessage(raw, {
      prefixLength: this.ctx.prefixLength,
      maxDeliver: this.ctx.options.maxDeliver,
      termReasons: serverAtLeast(this.ctx.nc, [2, 10, 4]),
      onError: this.ctx.onError,
    });
    const running: Promise<void> = this.handle(msg).finally(() => {
      this.inFlight.delete(running);
      this.wake();
    });
    this.inFlight.add(running);
  }

  private async handle(msg: JetStreamMessage): Promise<void> {
    try {
      await this.ctx.handler(msg);
    } catch (err) {
      this.ctx.onError(toBusError(`handler for ${msg.subject} #${msg.seq} (delivery ${msg.deliveryCount}) failed`, err));
      msg.nak(this.ctx.options.defaultNakDelayMs);
    }
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

class JetStreamMessage implements BusMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
  readonly deliveryCount: number;
  readonly seq: number;
  private settled = false;

  private readonly maxDeliver: number;
  private readonly termReasons: boolean;
  private readonly onError: BusErrorHandler;

  constructor(
    private readonly raw: JsMsg,
    options: { prefixLength: number; maxDeliver: number; termReasons: boolean; onError: BusErrorHandler },
  ) {
    this.maxDeliver = options.maxDeliver;
    this.termReasons = options.termReasons;
    this.onError = options.onError;
    this.subject = raw.subject.slice(options.prefixLength);
    this.data = raw.data;
    this.headers = headersToRecord(raw.headers);
    this.deliveryCount = raw.info.redeliveryCount;
    this.seq = raw.seq;
  }

  ack(): void {
    this.settle('ack', () => this.raw.ack());
  }

  nak(delayMs = 0): void {
    // On the last delivery a nak would leave the message ack-pending until ack_wait passes, and (work queue)
    // stored forever; term drops it now, which is what "no longer redelivered" means.
    if (this.deliveryCount >= this.maxDeliver) {
      this.term(`max deliveries (${this.maxDeliver}) reached`);
      return;
    }
    this.settle('nak', () => (delayMs > 0 ? this.raw.nak(delayMs) : this.raw.nak()));
  }

  term(reason?: string): void {
    // Servers before 2.10.4 do not recognise "+TERM <reason>" and treat it as no settlement at all.
    this.settle('term', () => (reason && this.termReasons ? this.raw.term(reason) : this.raw.term()));
  }

  working(): void {
    if (this.settled) return;
    safely(() => this.raw.working(), this.onError, `extending ${this.subject} #${this.seq}`);
  }

  private settle(kind: string, send: () => void): void {
    if (this.settled) return;
    this.settled = true;
    safely(send, this.onError, `${kind} of ${this.subject} #${this.seq}`);
  }
}

class JetStreamKv implements KvStore {
  constructor(
    private readonly jsm: JetStreamManager,
    private readonly kv: KV,
    private readonly name: string,
    private readonly ttlMs: number,
    private readonly onError: BusErrorHandler,
    private readonly watchers: Set<() => void>,
  ) {}

  async put(key: string, value: Uint8Array): Promise<number> {
    try {
      return await this.kv.put(key, value);
    } catch (err) {
      throw toBusError(`kv ${this.name}: put ${key} failed`, err);
    }
  }

  async get(key: string): Promise<KvEntry | null> {
    let entry: NatsKvEntry | null;
    try {
      entry = await this.kv.get(key);
    } catch (err) {
      throw toBusError(`kv ${this.name}: get ${key} failed`, err);
    }
    return entry && this.isLive(entry) ? toKvEntry(entry) : null;
  }

  async delete(key: string): Promise<void> {
    try {
      await this.kv.delete(key);
    } catch (err) {
      throw toBusError(`kv ${this.name}: delete ${key} failed`, err);
    }
  }

  async entries(): Promise<KvEntry[]> {
    // The keys from the stream's subjects, then each key's last value. A watch that waits to be told it
    // has seen every key (nats.js initializedFn) hangs when a value expires between the count and its
    // delivery; reading the subjects has no such window.
    const prefix = `$KV.${this.name}.`;
    let subjects: Record<string, number>;
    try {
      subjects = (await this.jsm.streams.info(`KV_${this.name}`, { subjects_filter: `${prefix}>` })).state.subjects ?? {};
    } catch (err) {
      throw toBusError(`kv ${this.name}: listing entries failed`, err);
    }
    const keys = Object.keys(subjects).filter((s) => s.startsWith(prefix)).map((s) => s.slice(prefix.length));
    const found = await Promise.all(keys.map((key) => this.get(key)));
    return found.filter((e): e is KvEntry => e !== null).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async watch(onChange: (key: string, entry: KvEntry | null) => void): Promise<() => void> {
    let iterator: QueuedIterator<NatsKvEntry>;
    try {
      iterator = await this.kv.watch({ key: '>', include: KvWatchInclude.UpdatesOnly });
    } catch (err) {
      throw toBusError(`kv ${this.name}: watch failed`, err);
    }
    let stopped = false;
    const stop = (): void => {
      if (stopped) return;
      stopped = true;
      this.watchers.delete(stop);
      iterator.stop();
    };
    this.watchers.add(stop);
    void (async () => {
      try {
        for await (const entry of iterator) {
          try {
            onChange(entry.key, entry.operation === 'PUT' ? toKvEntry(entry) : null);
          } catch (err) {
            this.onError(toBusError(`kv ${this.name}: watch callback failed for ${entry.key}`, err));
          }
        }
        if (!stopped) this.onError(new BusError(`kv ${this.name}: watch ended unexpectedly`));
      } catch (err) {
        if (!stopped) this.onError(toBusError(`kv ${this.name}: watch failed`, err));
      }
    })();
    return stop;
  }

  /** The server expires entries on its own schedule; an entry past its TTL is treated as gone right away. */
  private isLive(entry: NatsKvEntry): boolean {
    return entry.operation === 'PUT' && entry.created.getTime() + this.ttlMs > Date.now();
  }
}

function toKvEntry(entry: NatsKvEntry): KvEntry {
  return { key: entry.key, value: entry.value, revision: entry.revision, createdAt: entry.created.getTime() };
}

/** nats.js rejects invalid header names and values itself but lets an empty name through. */
function toNatsHeaders(record: Record<string, string> | undefined): MsgHdrs | undefined {
  if (!record) return undefined;
  let hdrs: MsgHdrs | undefined;
  for (const [key, value] of Object.entries(record)) {
    if (key === '') throw new BusError('header names must not be empty');
    (hdrs ??= natsHeaders()).set(key, value);
  }
  return hdrs;
}

function headersToRecord(hdrs: MsgHdrs | undefined): Record<string, string> {
  const record: Record<string, string> = {};
  if (!hdrs) return record;
  for (const key of hdrs.keys()) record[key] = hdrs.get(key);
  return record;
}

/** Stream a subject (or, with `allowWildcards`, a filter) belongs to; throws for anything outside the bus. */
function streamOf(subject: string, allowWildcards = false): StreamName {
  const tokens = subject.split('.');
  const valid = tokens.every((t, i) => {
    if (t === '' || /[\s]/.test(t)) return false;
    if (t === '>') return allowWildcards && i === tokens.length - 1;
    if (t === '*') return allowWildcards;
    return !t.includes('*') && !t.includes('>');
  });
  if (valid && tokens.length >= 2) {
    for (const [stream, root] of Object.entries(STREAM_ROOTS) as [StreamName, string][]) {
      if (tokens[0] === root) return stream;
    }
  }
  throw new BusError(`subject ${subject} is not within the bus streams (steps.>, events.>)`);
}

function validatePrefix(prefix: string): string {
  if (prefix !== '' && !/^[A-Za-z0-9_-]+$/.test(prefix)) throw new BusError(`invalid bus prefix: ${prefix}`);
  return prefix;
}

function validateDurable(durable: string): void {
  if (!/^[A-Za-z0-9_-]+$/.test(durable)) throw new BusError(`invalid durable name: ${durable}`);
}

function apiErrorCode(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null || !('api_error' in err)) return undefined;
  const apiError = (err as { api_error?: { err_code?: number } }).api_error;
  return apiError?.err_code;
}

function isNoResponders(err: unknown): boolean {
  return typeof err === 'object' && err !== null && 'code' in err && (err as { code: unknown }).code === '503';
}

function isMissingResource(err: unknown): boolean {
  const code = apiErrorCode(err);
  if (code === ERR_CONSUMER_NOT_FOUND || code === ERR_STREAM_NOT_FOUND) return true;
  if (isNoResponders(err)) return true;
  const message = err instanceof Error ? err.message : '';
  return message === 'consumer not found' || message === 'stream not found' || message === 'consumer deleted';
}

function serverAtLeast(nc: NatsConnection, wanted: [number, number, number]): boolean {
  const version = (nc.info?.version ?? '0.0.0').split(/[.-]/).map((part) => Number.parseInt(part, 10) || 0);
  for (let i = 0; i < 3; i++) {
    if ((version[i] ?? 0) !== wanted[i]) return (version[i] ?? 0) > wanted[i];
  }
  return true;
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
