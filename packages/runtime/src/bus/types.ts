/**
 * The message bus every service talks through. Two transports share these semantics: NATS JetStream
 * (production, integration tests) and an in-process bus (all-in-one mode, unit tests). The rules behind
 * them are written once, in `rules.ts` (names, subjects, headers, dedupe, consumer limits, KV) and
 * `delivery.ts` (settlement); the contract suite in `test/bus.*.test.ts` holds both transports to them.
 *
 * Streams (names are prefixed by `BusOptions.prefix`, so tests can isolate themselves):
 * - `STEPS` on `steps.>`: work-queue retention. A due step goes to `steps.<channel>` (a small request's to
 *   `steps.<channel>.small`); senders answer on `steps.result.batch`. Each subject is read by exactly one durable consumer.
 * - `EVENTS` on `events.>`: limits retention, for integrator events (`events.cascade.recipient.finished`).
 * - `RATINGS` on `ratings.>`: work-queue retention, ratings the review form accepted while the scheduler
 *   could not record them (`ratings.submitted`), read by the scheduler's ratings intake.
 *
 * Invariants the two implementations keep:
 * - A publish carrying `msgId` that was already accepted within the duplicate window is dropped and
 *   answered `{ duplicate: true }`.
 * - Every delivered message is settled exactly once by the handler: `ack()`, `nak(delayMs)` or `term()`.
 *   A handler that throws without settling gets `nak(defaultNakDelayMs)`; a message never settled is
 *   redelivered after `ackWaitMs` (a handler still running keeps its message in progress, so that is a
 *   handler that returned without settling, or a process that died).
 * - After `maxDeliver` deliveries a message is no longer redelivered; `deliveryCount` lets the handler
 *   see its last chance and record a dead letter.
 */

export type StreamName = 'STEPS' | 'EVENTS' | 'RATINGS';

export interface PublishOptions {
  /** Deduplication id (JetStream `Nats-Msg-Id`). */
  msgId?: string;
  headers?: Record<string, string>;
}

/** One message of a `publishBatch`; `subject` and `options` mean what they mean for `publish`. */
export interface OutgoingMessage {
  subject: string;
  data: Uint8Array;
  options?: PublishOptions;
}

export interface PublishAck {
  stream: string;
  seq: number;
  duplicate: boolean;
}

export interface BusMessage {
  /** Subject without the bus prefix, e.g. `steps.email`. */
  readonly subject: string;
  readonly data: Uint8Array;
  readonly headers: Readonly<Record<string, string>>;
  /** 1 on the first delivery. */
  readonly deliveryCount: number;
  /** Stream sequence, stable across redeliveries. */
  readonly seq: number;
  ack(): void;
  /** Redeliver after `delayMs` (0 = as soon as possible). */
  nak(delayMs?: number): void;
  /** Never redeliver. */
  term(reason?: string): void;
  /** Extend the ack deadline while a long operation runs. */
  working(): void;
}

export interface ConsumeOptions {
  stream: StreamName;
  /** Durable consumer name; consumers with the same name share the work. */
  durable: string;
  /** Subject filter without the prefix, e.g. `steps.email` or `events.>`. */
  filterSubject: string;
  /** Messages handled at once by this process. Default 16. */
  concurrency?: number;
  /**
   * Default 4 000. A running handler keeps its message in progress, so this bounds how long a message
   * taken by a process that died waits before another consumer gets it, not how long a handler may run.
   */
  ackWaitMs?: number;
  /** Default 10. */
  maxDeliver?: number;
  /** Delay used when a handler throws without settling. Default 1 000. */
  defaultNakDelayMs?: number;
}

export type MessageHandler = (msg: BusMessage) => Promise<void>;

export interface Subscription {
  /** Stops fetching new messages and waits for the handlers in flight to settle. */
  drain(): Promise<void>;
}

export interface KvEntry {
  key: string;
  value: Uint8Array;
  revision: number;
  /** When the value was written (ms since epoch). */
  createdAt: number;
}

export interface KvStore {
  put(key: string, value: Uint8Array): Promise<number>;
  get(key: string): Promise<KvEntry | null>;
  delete(key: string): Promise<void>;
  /** Live entries (written within the bucket TTL, not deleted). */
  entries(): Promise<KvEntry[]>;
  /** Calls back on every put and delete until the returned function is called. */
  watch(onChange: (key: string, entry: KvEntry | null) => void): Promise<() => void>;
}

export interface KvOptions {
  /** Entries older than this are gone (JetStream `max_age`). */
  ttlMs: number;
}

export interface Bus {
  readonly kind: 'jetstream' | 'memory';
  /** Creates streams if missing (idempotent). */
  ensureStreams(): Promise<void>;
  publish(subject: string, data: Uint8Array, options?: PublishOptions): Promise<PublishAck>;
  /**
   * Publishes several messages at once. Resolves with one ack per message, in input order, once every
   * message is stored (a msgId seen within the duplicate window is answered `duplicate: true`, as with
   * publish). Rejects with a BusError if any message was not stored; the others may have been, so the
   * caller retries the whole batch with the same msgIds. Subjects and headers are checked for every
   * message before any is sent: one invalid message rejects the batch with nothing published.
   */
  publishBatch(messages: OutgoingMessage[]): Promise<PublishAck[]>;
  consume(options: ConsumeOptions, handler: MessageHandler): Promise<Subscription>;
  kv(bucket: string, options: KvOptions): Promise<KvStore>;
  /** Number of messages a durable consumer has not yet had acked (pending + in flight). */
  pending(stream: StreamName, durable: string): Promise<number>;
  /**
   * Whether the transport is connected to its server right now (JetStream: between a disconnect and the
   * reconnect it is not; the in-process bus: until closed). What readiness reports as `nats`.
   */
  isConnected(): boolean;
  close(): Promise<void>;
}

export interface BusOptions {
  /**
   * Prefix for subjects (`<prefix>.steps.email`), streams (`<PREFIX>_STEPS`) and buckets (`<prefix>_channels`).
   * Empty in production; tests set a unique one.
   */
  prefix?: string;
  /** Duplicate window for msgId dedupe. Default 120 000 (JetStream's default). */
  duplicateWindowMs?: number;
}
