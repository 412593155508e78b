import { BusError, defaultErrorHandler, type BusErrorHandler } from './errors';
import { MemoryConsumer, MemorySubscription, type StoredMessage } from './memoryConsumer';
import { MemoryBucket } from './memoryKv';
import { BusRules, DuplicateWindow, STREAMS, subjectMatches, subjectsOverlap, type CheckedMessage, type ConsumerRule } from './rules';
import type * as contract from './types';

export interface MemoryBusOptions extends contract.BusOptions {
  /** Failures with no caller to throw to (handler errors, watch callbacks). Default `console.error`. */
  onError?: BusErrorHandler;
}

/**
 * In-process bus: the transport is a function call. It keeps the rules of `rules.ts` and `delivery.ts`
 * itself, where JetStream keeps them on the server: streams with their retention and duplicate window
 * here, durable consumers with ack wait and delivery counts in `memoryConsumer.ts`, buckets in
 * `memoryKv.ts`.
 */
export function createMemoryBus(options: MemoryBusOptions = {}): contract.Bus {
  return new MemoryBus(options);
}

/** Every timer the bus starts, so `close()` can cancel them all. None keeps the process alive. */
export class Timers {
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

class MemoryBus implements contract.Bus {
  readonly kind = 'memory' as const;
  private readonly rules: BusRules;
  private readonly streams: Record<contract.StreamName, MemoryStream>;
  private readonly buckets = new Map<string, MemoryBucket>();
  private readonly subscriptions = new Set<MemorySubscription>();
  private readonly timers = new Timers();
  private readonly onError: BusErrorHandler;
  private closing: Promise<void> | null = null;

  constructor(options: MemoryBusOptions) {
    this.rules = new BusRules(options);
    this.onError = options.onError ?? defaultErrorHandler;
    const stream = (name: contract.StreamName): MemoryStream => new MemoryStream(name, this.rules, this.timers);
    this.streams = { STEPS: stream('STEPS'), EVENTS: stream('EVENTS'), RATINGS: stream('RATINGS') };
  }

  async ensureStreams(): Promise<void> {
    this.assertOpen();
  }

  async publish(subject: string, data: Uint8Array, options: contract.PublishOptions = {}): Promise<contract.PublishAck> {
    this.assertOpen();
    return this.store(this.rules.outgoing({ subject, data, options }));
  }

  async publishBatch(messages: contract.OutgoingMessage[]): Promise<contract.PublishAck[]> {
    this.assertOpen();
    // Every message is checked before the first is stored, so an invalid one leaves nothing published.
    return messages.map((m) => this.rules.outgoing(m)).map((m) => this.store(m));
  }

  async consume(options: contract.ConsumeOptions, handler: contract.MessageHandler): Promise<contract.Subscription> {
    this.assertOpen();
    const rule = this.rules.consumer(options);
    const consumer = this.streams[rule.stream].upsertConsumer(rule);
    const subscription = new MemorySubscription(consumer, handler, rule, this.onError, (s) => this.subscriptions.delete(s));
    this.subscriptions.add(subscription);
    consumer.attach(subscription);
    return subscription;
  }

  async kv(bucket: string, options: contract.KvOptions): Promise<contract.KvStore> {
    this.assertOpen();
    const name = this.rules.bucketName(bucket, options);
    let store = this.buckets.get(name);
    // An existing bucket keeps the TTL it was created with, as a JetStream bucket does.
    if (!store) {
      store = new MemoryBucket(name, options.ttlMs, this.onError);
      this.buckets.set(name, store);
    }
    return store;
  }

  async pending(stream: contract.StreamName, durable: string): Promise<number> {
    const memoryStream = this.streams[stream];
    const consumer = memoryStream?.consumers.get(durable);
    if (!consumer) throw new BusError(`cannot read consumer ${memoryStream?.name ?? stream}/${durable}: consumer not found`);
    return consumer.pending();
  }

  isConnected(): boolean {
    return !this.closing;
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

  private store(message: CheckedMessage): contract.PublishAck {
    // The stream keeps its own copy: a caller reusing its buffer must not change what is delivered.
    return this.streams[message.stream].append(message.subject, message.data.slice(), message.headers ?? {}, message.msgId);
  }

  private assertOpen(): void {
    if (this.closing) throw new BusError('bus is closed');
  }
}

/** One stream: messages in sequence order, its duplicate window, its retention, its durables. */
export class MemoryStream {
  /** Insertion order is sequence order, so the oldest message is always first. */
  readonly messages = new Map<number, StoredMessage>();
  readonly consumers = new Map<string, MemoryConsumer>();
  readonly name: string;
  readonly workQueue: boolean;
  lastSeq = 0;
  private readonly maxAgeMs: number | null;
  private readonly duplicates: DuplicateWindow;

  constructor(
    stream: contract.StreamName,
    rules: BusRules,
    private readonly timers: Timers,
  ) {
    this.name = rules.streamName(stream);
    this.workQueue = STREAMS[stream].workQueue;
    this.maxAgeMs = STREAMS[stream].maxAgeMs;
    this.duplicates = new DuplicateWindow(rules.duplicateWindowMs);
  }

  append(subject: string, data: Uint8Array, headers: Record<string, string>, msgId: string | undefined): contract.PublishAck {
    const now = Date.now();
    const earlier = this.duplicates.earlier(msgId, now);
    if (earlier !== undefined) return { stream: this.name, seq: earlier, duplicate: true };
    this.expireOld(now);
    const seq = ++this.lastSeq;
    const tokens = subject.split('.');
    this.messages.set(seq, { seq, subject, tokens, data, headers, storedAt: now });
    if (msgId !== undefined) this.duplicates.accept(msgId, seq, now);
    for (const consumer of this.consumers.values()) {
      if (subjectMatches(consumer.filterTokens, tokens)) consumer.stored();
    }
    return { stream: this.name, seq, duplicate: false };
  }

  remove(seq: number): void {
    this.drop(seq);
  }

  private drop(seq: number): void {
    const message = this.messages.get(seq);
    if (!message) return;
    this.messages.delete(seq);
    for (const consumer of this.consumers.values()) consumer.dropped(message);
  }

  upsertConsumer(rule: ConsumerRule): MemoryConsumer {
    const filterTokens = rule.filterSubject.split('.');
    if (this.workQueue) {
      for (const [durable, other] of this.consumers) {
        if (durable !== rule.durable && subjectsOverlap(other.filterTokens, filterTokens)) {
          throw new BusError(`cannot create consumer ${this.name}/${rule.durable}: filtered consumer not unique on workqueue stream (overlaps ${durable})`);
        }
      }
    }
    let consumer = this.consumers.get(rule.durable);
    if (!consumer) {
      consumer = new MemoryConsumer(this, rule.durable, this.timers);
      this.consumers.set(rule.durable, consumer);
    }
    consumer.configure(rule.filterSubject, rule.ackWaitMs, rule.maxDeliver);
    return consumer;
  }

  private expireOld(now: number): void {
    if (this.maxAgeMs === null) return;
    for (const [seq, message] of this.messages) {
      if (now - message.storedAt < this.maxAgeMs) break;
      this.drop(seq);
    }
  }
}
