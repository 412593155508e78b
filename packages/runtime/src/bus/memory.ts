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

export interface MemoryBusOptions extends BusOptions {
  /** Failures with no caller to throw to (handler errors, watch callbacks). Default `console.error`. */
  onError?: BusErrorHandler;
}

const DEFAULT_CONCURRENCY = 16;
const DEFAULT_ACK_WAIT_MS = 30_000;
const DEFAULT_MAX_DELIVER = 10;
const DEFAULT_NAK_DELAY_MS = 1_000;
const DEFAULT_DUPLICATE_WINDOW_MS = 120_000;
const EVENTS_MAX_AGE_MS = 7 * 24 * 3_600_000;
const MSG_ID_HEADER = 'Nats-Msg-Id';

const STREAM_ROOTS: Record<StreamName, string> = { STEPS: 'steps', EVENTS: 'events' };

/** In-process bus with the JetStream bus's semantics; see `types.ts`. */
export function createMemoryBus(options: MemoryBusOptions = {}): Bus {
  return new MemoryBus(options);
}

/** Every timer the bus starts, so `close()` can cancel them all. None keeps the process alive. */
class Timers {
  private readonly active = new Set<NodeJS.Timeout>();
  private closed = false;

  after(ms: number, fn: () => void): NodeJS.Timeout | null {
    if (this.closed) return null;
    const timer = setTimeout(() => {
      this.active.delete(timer);
      fn();
    }, ms);
    timer.unref();
    this.active.add(timer);
    return timer;
  }

  cancel(timer: NodeJS.Timeout | null | undefined): void {
    if (!timer) return;
    clearTimeout(timer);
    this.active.delete(timer);
  }

  close(): void {
    this.closed = true;
    for (const timer of this.active) clearTimeout(timer);
    this.active.clear();
  }
}

class MemoryBus implements Bus {
  readonly kind = 'memory' as const;
  private readonly streams: Record<StreamName, MemoryStream>;
  private readonly buckets = new Map<string, MemoryBucket>();
  private readonly subscriptions = new Set<MemorySubscription>();
  private readonly timers = new Timers();
  private readonly onError: BusErrorHandler;
  private readonly prefix: string;
  private closing: Promise<void> | null = null;

  constructor(options: MemoryBusOptions) {
    this.prefix = options.prefix ?? '';
    if (this.prefix !== '' && !/^[A-Za-z0-9_-]+$/.test(this.prefix)) throw new BusError(`invalid bus prefix: ${this.prefix}`);
    const duplicateWindowMs = options.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS;
    if (!(duplicateWindowMs > 0)) throw new BusError('duplicateWindowMs must be positive');
    this.onError = options.onError ?? defaultErrorHandler;
    const name = (stream: StreamName): string => (this.prefix ? `${this.prefix.toUpperCase()}_${stream}` : stream);
    this.streams = {
      STEPS: new MemoryStream(name('STEPS'), true, null, duplicateWindowMs),
      EVENTS: new MemoryStream(name('EVENTS'), false, EVENTS_MAX_AGE_MS, duplicateWindowMs),
    };
  }

  async ensureStreams(): Promise<void> {
    this.assertOpen();
  }

  async publish(subject: string, data: Uint8Array, options: PublishOptions = {}): Promise<PublishAck> {
    this.assertOpen();
    return store(this.prepare({ subject, data, options }));
  }

  async publishBatch(messages: OutgoingMessage[]): Promise<PublishAck[]> {
    this.assertOpen();
    // Every message is checked before the first is stored, so an invalid one leaves nothing published.
    return messages.map((m) => this.prepare(m)).map(store);
  }

  private prepare(message: OutgoingMessage): PreparedMessage {
    const { subject, data, options = {} } = message;
    const stream = this.streams[streamOf(subject)];
    const headers = normalizeHeaders(options.headers);
    if (options.msgId) headers[MSG_ID_HEADER] = options.msgId;
    // Like JetStream, the dedupe id is whatever ends up in the Nats-Msg-Id header.
    const msgId = headers[MSG_ID_HEADER] || undefined;
    return { stream, subject, data, headers, msgId };
  }

  async consume(options: ConsumeOptions, handler: MessageHandler): Promise<Subscription> {
    this.assertOpen();
    const resolved = resolveConsumeOptions(options);
    const stream = this.streams[options.stream];
    const consumer = stream.upsertConsumer(resolved, this.timers);
    const subscription = new MemorySubscription(consumer, handler, resolved.concurrency, resolved.defaultNakDelayMs, this.onError, (s) =>
      this.subscriptions.delete(s),
    );
    this.subscriptions.add(subscription);
    consumer.attach(subscription);
    return subscription;
  }

  async kv(bucket: string, options: KvOptions): Promise<KvStore> {
    this.assertOpen();
    if (!/^[-\w]+$/.test(bucket)) throw new BusError(`invalid bucket name: ${bucket}`);
    if (!(options.ttlMs > 0)) throw new BusError('ttlMs must be positive');
    const name = this.prefix ? `${this.prefix}_${bucket}` : bucket;
    let store = this.buckets.get(name);
    // An existing bucket keeps the TTL it was created with, as a JetStream bucket does.
    if (!store) {
      store = new MemoryBucket(name, options.ttlMs, this.onError);
      this.buckets.set(name, store);
    }
    return store;
  }

  async pending(stream: StreamName, durable: string): Promise<number> {
    const memoryStream = this.streams[stream];
    const consumer = memoryStream?.consumers.get(durable);
    if (!consumer) throw new BusError(`cannot read consumer ${memoryStream?.name ?? stream}/${durable}: consumer not found`);
    return consumer.pending();
  }

  close(): Promise<void> {
    if (!this.closing) {
      this.closing = (async () => {
        await Promise.allSettled([...this.subscriptions].map((s) => s.drain()));
        this.timers.close();
        for (const bucket of this.buckets.values()) bucket.close();
      })();
    }
    return this.closing;
  }

  private assertOpen(): void {
    if (this.closing) throw new BusError('bus is closed');
  }
}

/** A message checked by `publish`/`publishBatch` and not stored yet. */
interface PreparedMessage {
  stream: MemoryStream;
  subject: string;
  data: Uint8Array;
  headers: Record<string, string>;
  msgId: string | undefined;
}

function store(message: PreparedMessage): PublishAck {
  return message.stream.append(message.subject, message.data.slice(), message.headers, message.msgId);
}

interface StoredMessage {
  seq: number;
  subject: string;
  tokens: string[];
  data: Uint8Array;
  headers: Record<string, string>;
  storedAt: number;
}

interface ResolvedConsumeOptions {
  durable: string;
  filterSubject: string;
  concurrency: number;
  ackWaitMs: number;
  maxDeliver: number;
  defaultNakDelayMs: number;
}

class MemoryStream {
  /** Insertion order is sequence order, so the oldest message is always first. */
  readonly messages = new Map<number, StoredMessage>();
  readonly consumers = new Map<string, MemoryConsumer>();
  lastSeq = 0;
  /** Insertion order is acceptance time, so expired ids are always at the front. */
  private readonly accepted = new Map<string, { seq: number; at: number }>();

  constructor(
    readonly name: string,
    readonly workQueue: boolean,
    private readonly maxAgeMs: number | null,
    private readonly duplicateWindowMs: number,
  ) {}

  append(subject: string, data: Uint8Array, headers: Record<string, string>, msgId: string | undefined): PublishAck {
    const now = Date.now();
    for (const [id, { at }] of this.accepted) {
      if (now - at < this.duplicateWindowMs) break;
      this.accepted.delete(id);
    }
    if (msgId !== undefined) {
      const earlier = this.accepted.get(msgId);
      if (earlier) return { stream: this.name, seq: earlier.seq, duplicate: true };
    }
    this.expireOld(now);
    const seq = ++this.lastSeq;
    const tokens = subject.split('.');
    this.messages.set(seq, { seq, subject, tokens, data, headers, storedAt: now });
    if (msgId !== undefined) this.accepted.set(msgId, { seq, at: now });
    for (const consumer of this.consumers.values()) {
      if (subjectMatches(consumer.filterTokens, tokens)) consumer.dispatch();
    }
    return { stream: this.name, seq, duplicate: false };
  }

  remove(seq: number): void {
    this.messages.delete(seq);
  }

  upsertConsumer(options: ResolvedConsumeOptions, timers: Timers): MemoryConsumer {
    const filterTokens = options.filterSubject.split('.');
    if (this.workQueue) {
      for (const [durable, other] of this.consumers) {
        if (durable !== options.durable && subjectsOverlap(other.filterTokens, filterTokens)) {
          throw new BusError(
            `cannot create consumer ${this.name}/${options.durable}: filtered consumer not unique on workqueue stream (overlaps ${durable})`,
          );
        }
      }
    }
    let consumer = this.consumers.get(options.durable);
    if (!consumer) {
      consumer = new MemoryConsumer(this, options.durable, timers);
      this.consumers.set(options.durable, consumer);
    }
    consumer.configure(options.filterSubject, options.ackWaitMs, options.maxDeliver);
    return consumer;
  }

  private expireOld(now: number): void {
    if (this.maxAgeMs === null) return;
    for (const [seq, message] of this.messages) {
      if (now - message.storedAt < this.maxAgeMs) break;
      this.messages.delete(seq);
    }
  }
}

interface AckDeadline {
  /** Identifies the delivery; a nak or `working()` from an older delivery of the same message is ignored. */
  token: object;
  timer: NodeJS.Timeout | null;
}

/**
 * A durable consumer. Each message matching the filter is in exactly one state: not yet reached by the
 * cursor, awaiting ack, delayed (nak with delay), ready for redelivery, or finished (acked, termed, or out
 * of deliveries; a work queue then forgets the message).
 */
class MemoryConsumer {
  filterSubject = '';
  filterTokens: string[] = [];
  private ackWaitMs = DEFAULT_ACK_WAIT_MS;
  private maxDeliver = DEFAULT_MAX_DELIVER;
  /** Next stream sequence the consumer has not looked at yet. */
  private cursor = 1;
  /** Deliveries so far of every message delivered and not finished. */
  private readonly deliveries = new Map<number, number>();
  private readonly awaitingAck = new Map<number, AckDeadline>();
  private readonly delayed = new Map<number, NodeJS.Timeout | null>();
  /** Redeliveries go before new messages, oldest first. */
  private readonly ready = new Set<number>();
  private readonly subscribers: MemorySubscription[] = [];
  private nextSubscriber = 0;
  private dispatching = false;

  constructor(
    private readonly stream: MemoryStream,
    readonly durable: string,
    private readonly timers: Timers,
  ) {}

  configure(filterSubject: string, ackWaitMs: number, maxDeliver: number): void {
    this.filterSubject = filterSubject;
    this.filterTokens = filterSubject.split('.');
    this.ackWaitMs = ackWaitMs;
    this.maxDeliver = maxDeliver;
  }

  attach(subscriber: MemorySubscription): void {
    this.subscribers.push(subscriber);
    this.dispatch();
  }

  detach(subscriber: MemorySubscription): void {
    const index = this.subscribers.indexOf(subscriber);
    if (index >= 0) this.subscribers.splice(index, 1);
  }

  pending(): number {
    let notYetDelivered = 0;
    for (let seq = this.cursor; seq <= this.stream.lastSeq; seq++) {
      const message = this.stream.messages.get(seq);
      if (message && subjectMatches(this.filterTokens, message.tokens)) notYetDelivered++;
    }
    return notYetDelivered + this.awaitingAck.size + this.delayed.size + this.ready.size;
  }

  /** Hands out messages while some subscriber has a free slot. Called whenever either may have appeared. */
  dispatch(): void {
    if (this.dispatching) return;
    this.dispatching = true;
    try {
      for (;;) {
        const subscriber = this.pickSubscriber();
        if (!subscriber) return;
        const message = this.takeNext();
        if (!message) return;
        this.deliver(subscriber, message);
      }
    } finally {
      this.dispatching = false;
    }
  }

  ack(seq: number): void {
    if (this.deliveries.has(seq)) this.finish(seq);
  }

  nak(seq: number, token: object, delayMs: number): void {
    const deadline = this.awaitingAck.get(seq);
    if (!deadline || deadline.token !== token) return;
    this.timers.cancel(deadline.timer);
    this.awaitingAck.delete(seq);
    this.retry(seq, delayMs);
  }

  working(seq: number, token: object): void {
    const deadline = this.awaitingAck.get(seq);
    if (!deadline || deadline.token !== token) return;
    this.timers.cancel(deadline.timer);
    deadline.timer = this.timers.after(this.ackWaitMs, () => this.expire(seq, token));
  }

  private pickSubscriber(): MemorySubscription | undefined {
    const count = this.subscribers.length;
    for (let i = 0; i < count; i++) {
      const index = (this.nextSubscriber + i) % count;
      const subscriber = this.subscribers[index];
      if (subscriber.hasCapacity()) {
        this.nextSubscriber = (index + 1) % count;
        return subscriber;
      }
    }
    return undefined;
  }

  private takeNext(): StoredMessage | undefined {
    for (const seq of this.ready) {
      this.ready.delete(seq);
      const message = this.stream.messages.get(seq);
      if (message) return message;
      this.deliveries.delete(seq);
    }
    while (this.cursor <= this.stream.lastSeq) {
      const message = this.stream.messages.get(this.cursor++);
      if (message && subjectMatches(this.filterTokens, message.tokens)) return message;
    }
    return undefined;
  }

  private deliver(subscriber: MemorySubscription, message: StoredMessage): void {
    const deliveryCount = (this.deliveries.get(message.seq) ?? 0) + 1;
    this.deliveries.set(message.seq, deliveryCount);
    const token = {};
    const timer = this.timers.after(this.ackWaitMs, () => this.expire(message.seq, token));
    this.awaitingAck.set(message.seq, { token, timer });
    subscriber.run(new MemoryMessage(this, message, deliveryCount, token));
  }

  private expire(seq: number, token: object): void {
    const deadline = this.awaitingAck.get(seq);
    if (!deadline || deadline.token !== token) return;
    this.awaitingAck.delete(seq);
    this.retry(seq, 0);
  }

  private retry(seq: number, delayMs: number): void {
    if ((this.deliveries.get(seq) ?? 0) >= this.maxDeliver) {
      this.finish(seq);
      return;
    }
    if (delayMs > 0) {
      const timer = this.timers.after(delayMs, () => {
        this.delayed.delete(seq);
        this.ready.add(seq);
        this.dispatch();
      });
      this.delayed.set(seq, timer);
      return;
    }
    this.ready.add(seq);
    this.dispatch();
  }

  private finish(seq: number): void {
    const deadline = this.awaitingAck.get(seq);
    if (deadline) {
      this.timers.cancel(deadline.timer);
      this.awaitingAck.delete(seq);
    }
    if (this.delayed.has(seq)) {
      this.timers.cancel(this.delayed.get(seq));
      this.delayed.delete(seq);
    }
    this.ready.delete(seq);
    this.deliveries.delete(seq);
    if (this.stream.workQueue) this.stream.remove(seq);
  }
}

class MemoryMessage implements BusMessage {
  readonly subject: string;
  readonly data: Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
  readonly seq: number;
  private settled = false;

  constructor(
    private readonly consumer: MemoryConsumer,
    message: StoredMessage,
    readonly deliveryCount: number,
    private readonly token: object,
  ) {
    this.subject = message.subject;
    // Each delivery gets its own copy: a handler mutating its buffer must not change a redelivery.
    this.data = message.data.slice();
    this.headers = { ...message.headers };
    this.seq = message.seq;
  }

  ack(): void {
    if (this.settle()) this.consumer.ack(this.seq);
  }

  nak(delayMs = 0): void {
    if (this.settle()) this.consumer.nak(this.seq, this.token, Math.max(0, delayMs));
  }

  term(_reason?: string): void {
    if (this.settle()) this.consumer.ack(this.seq);
  }

  working(): void {
    if (!this.settled) this.consumer.working(this.seq, this.token);
  }

  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    return true;
  }
}

class MemorySubscription implements Subscription {
  private readonly inFlight = new Set<Promise<void>>();
  private draining = false;
  private drained: Promise<void> | null = null;

  constructor(
    private readonly consumer: MemoryConsumer,
    private readonly handler: MessageHandler,
    private readonly concurrency: number,
    private readonly defaultNakDelayMs: number,
    private readonly onError: BusErrorHandler,
    private readonly onDrained: (subscription: MemorySubscription) => void,
  ) {}

  hasCapacity(): boolean {
    return !this.draining && this.inFlight.size < this.concurrency;
  }

  run(message: MemoryMessage): void {
    const running: Promise<void> = this.handle(message).finally(() => {
      this.inFlight.delete(running);
      this.consumer.dispatch();
    });
    this.inFlight.add(running);
  }

  drain(): Promise<void> {
    if (!this.drained) {
      this.draining = true;
      this.consumer.detach(this);
      this.drained = (async () => {
        while (this.inFlight.size > 0) await Promise.allSettled([...this.inFlight]);
        this.onDrained(this);
      })();
    }
    return this.drained;
  }

  private async handle(message: MemoryMessage): Promise<void> {
    // Handlers never run inside publish() or consume(), as with a real server.
    await Promise.resolve();
    try {
      await this.handler(message);
    } catch (err) {
      this.onError(
        toBusError(`handler for ${message.subject} #${message.seq} (delivery ${message.deliveryCount}) failed`, err),
      );
      message.nak(this.defaultNakDelayMs);
    }
  }
}

interface StoredEntry {
  value: Uint8Array;
  revision: number;
  createdAt: number;
}

class MemoryBucket implements KvStore {
  /** Insertion order is write order (a put re-inserts), so expired entries are always at the front. */
  private readonly store = new Map<string, StoredEntry>();
  private readonly watchers = new Set<(key: string, entry: KvEntry | null) => void>();
  private revision = 0;

  constructor(
    private readonly name: string,
    private readonly ttlMs: number,
    private readonly onError: BusErrorHandler,
  ) {}

  async put(key: string, value: Uint8Array): Promise<number> {
    this.validateKey(key);
    this.expireOld();
    const stored: StoredEntry = { value: value.slice(), revision: ++this.revision, createdAt: Date.now() };
    this.store.delete(key);
    this.store.set(key, stored);
    this.notify(key, stored);
    return stored.revision;
  }

  async get(key: string): Promise<KvEntry | null> {
    this.validateKey(key);
    this.expireOld();
    const stored = this.store.get(key);
    return stored ? toEntry(key, stored) : null;
  }

  async delete(key: string): Promise<void> {
    this.validateKey(key);
    // A delete is a write (JetStream stores a marker), so it takes a revision even for a missing key.
    ++this.revision;
    this.store.delete(key);
    this.notify(key, null);
  }

  async entries(): Promise<KvEntry[]> {
    this.expireOld();
    return [...this.store.entries()]
      .map(([key, stored]) => toEntry(key, stored))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async watch(onChange: (key: string, entry: KvEntry | null) => void): Promise<() => void> {
    this.watchers.add(onChange);
    return () => {
      this.watchers.delete(onChange);
    };
  }

  close(): void {
    this.watchers.clear();
  }

  private notify(key: string, stored: StoredEntry | null): void {
    for (const watcher of this.watchers) {
      const entry = stored ? toEntry(key, stored) : null;
      // Asynchronous and in write order, as with a JetStream watch; a throwing watcher cannot fail the write.
      queueMicrotask(() => {
        if (!this.watchers.has(watcher)) return;
        try {
          watcher(key, entry);
        } catch (err) {
          this.onError(toBusError(`kv ${this.name}: watch callback failed for ${key}`, err));
        }
      });
    }
  }

  private expireOld(): void {
    const now = Date.now();
    for (const [key, stored] of this.store) {
      if (stored.createdAt + this.ttlMs > now) break;
      this.store.delete(key);
    }
  }

  private validateKey(key: string): void {
    if (key.startsWith('.') || key.endsWith('.') || !/^[-/=.\w]+$/.test(key)) {
      throw new BusError(`kv ${this.name}: invalid key: ${key}`);
    }
  }
}

function toEntry(key: string, stored: StoredEntry): KvEntry {
  return { key, value: stored.value.slice(), revision: stored.revision, createdAt: stored.createdAt };
}

function resolveConsumeOptions(options: ConsumeOptions): ResolvedConsumeOptions {
  if (!/^[A-Za-z0-9_-]+$/.test(options.durable)) throw new BusError(`invalid durable name: ${options.durable}`);
  if (streamOf(options.filterSubject, true) !== options.stream) {
    throw new BusError(`filter ${options.filterSubject} is not within stream ${options.stream}`);
  }
  const resolved: ResolvedConsumeOptions = {
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

/** Same rules as nats.js: header names are printable ASCII without ':'; values lose surrounding blanks. */
function normalizeHeaders(headers: Record<string, string> | undefined): Record<string, string> {
  const normalized: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers ?? {})) {
    if (key === '') throw new BusError('header names must not be empty');
    for (let i = 0; i < key.length; i++) {
      const c = key.charCodeAt(i);
      if (c === 58 || c < 33 || c > 126) throw new BusError(`'${key[i]}' is not a valid character for a header key`);
    }
    if (/[\r\n]/.test(value)) throw new BusError('invalid header value - \\r and \\n are not allowed.');
    normalized[key] = value.trim();
  }
  return normalized;
}

/** Stream a subject (or, with `allowWildcards`, a filter) belongs to; throws for anything outside the bus. */
function streamOf(subject: string, allowWildcards = false): StreamName {
  const tokens = subject.split('.');
  const valid = tokens.every((t, i) => {
    if (t === '' || /\s/.test(t)) return false;
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

function subjectMatches(filter: string[], subject: string[]): boolean {
  for (let i = 0; i < filter.length; i++) {
    if (filter[i] === '>') return subject.length > i;
    if (i >= subject.length) return false;
    if (filter[i] !== '*' && filter[i] !== subject[i]) return false;
  }
  return filter.length === subject.length;
}

/** Whether some subject matches both filters (JetStream's rule for work-queue consumers). */
function subjectsOverlap(a: string[], b: string[]): boolean {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    if (a[i] === '>' || b[i] === '>') return true;
    if (a[i] !== '*' && b[i] !== '*' && a[i] !== b[i]) return false;
  }
  return a.length === b.length;
}
