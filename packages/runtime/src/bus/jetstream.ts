import {
  AckPolicy,
  connect,
  DeliverPolicy,
  Events,
  nanos,
  RetentionPolicy,
  StorageType,
  type Consumer,
  type ConsumerConfig,
  type JetStreamClient,
  type JetStreamManager,
  type NatsConnection,
  type StreamConfig,
} from 'nats';
import { whereUrlPoints } from '../config';
import { BusError, defaultErrorHandler, toBusError, type BusErrorHandler } from './errors';
import { apiErrorCode, ERR_CONSUMER_ALREADY_EXISTS, ERR_STREAM_NAME_IN_USE, isNoResponders, whileElecting } from './jetstreamApi';
import { JetStreamSubscription } from './jetstreamConsume';
import { JetStreamKv } from './jetstreamKv';
import { PubAckRouter, toNatsHeaders, type WireMessage } from './jetstreamPublish';
import { BusRules, STREAMS, type CheckedMessage, type ConsumerRule } from './rules';
import type {
  Bus,
  BusOptions,
  ConsumeOptions,
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
  /**
   * Replicas of a stream (and of the KV bucket) this process creates: 3 on a three-node cluster, 1 on a
   * single server. Used only when creating; an existing stream keeps what it has. Default 1.
   */
  streamReplicas?: number;
  /**
   * Called for each setting of an existing stream that differs from what this process would create it
   * with (the stream is left as it is). Default: reported through `onError`.
   */
  onStreamDrift?: (drift: StreamDrift) => void;
}

/** One setting of an existing stream that differs from the configuration; the server's value is kept. */
export interface StreamDrift {
  stream: string;
  setting: 'num_replicas' | 'max_age' | 'duplicate_window' | 'subjects' | 'retention' | 'storage';
  configured: string;
  existing: string;
}

/** How long a publish waits for a lost connection to come back before failing. */
const PUBLISH_RECONNECT_WAIT_MS = 5_000;
/**
 * How long connecting and creating streams keep trying while a cluster elects a leader (a node was just
 * lost: JetStream answers nothing for a few seconds), before the start fails.
 */
const ELECTION_WAIT_MS = 20_000;
/** How long a batch waits for its PubAcks when the JetStream options set no timeout (nats.js's default). */
const DEFAULT_PUBLISH_TIMEOUT_MS = 5_000;

/**
 * The NATS JetStream transport. The rules of `rules.ts` become the configuration of the server's streams
 * and durables (which then keep duplicate window, ack wait, redelivery and max deliveries), and every
 * input is checked with them before anything is sent. What is left here is the connection: publishing
 * (`jetstreamPublish.ts`), the pull loop (`jetstreamConsume.ts`), buckets (`jetstreamKv.ts`), and
 * recovering from reconnects and from streams the server has lost.
 */
export async function connectJetStreamBus(options: JetStreamBusOptions): Promise<Bus> {
  const rules = new BusRules(options);
  const servers = options.url.split(',').map((url) => url.trim());
  let nc: NatsConnection;
  try {
    // Never give up reconnecting: a service outlives server restarts and its consumers resume on reconnect.
    // noAsyncTraces: nats.js otherwise captures a stack trace on every publish, which was the largest
    // single cost of the bus in the dispatch benchmark (2-4x throughput without it).
    nc = await connect({ servers, name: options.name, maxReconnectAttempts: -1, reconnectTimeWait: 1_000, noAsyncTraces: true });
  } catch (err) {
    throw toBusError(`cannot connect to NATS at ${whereUrlPoints(options.url)}`, err);
  }
  try {
    const jsm = await whileElecting(() => nc.jetstreamManager(), ELECTION_WAIT_MS);
    const onError = options.onError ?? defaultErrorHandler;
    const replicas = options.streamReplicas ?? 1;
    if (!Number.isInteger(replicas) || replicas < 1 || replicas > 5) throw new BusError(`streamReplicas must be 1 to 5 (got ${replicas})`);
    const onDrift =
      options.onStreamDrift ??
      ((d: StreamDrift) => onError(new BusError(`stream ${d.stream} has ${d.setting} ${d.existing}, configured ${d.configured}; left as it is`)));
    return new JetStreamBus(nc, jsm, nc.jetstream(), rules, onError, replicas, onDrift);
  } catch (err) {
    await nc.close().catch(() => undefined);
    throw toBusError(`JetStream is not available at ${whereUrlPoints(options.url)}`, err);
  }
}

class JetStreamBus implements Bus {
  readonly kind = 'jetstream' as const;
  private streamsReady: Promise<void> | null = null;
  private readonly subscriptions = new Set<JetStreamSubscription>();
  private readonly watchers = new Set<() => void>();
  private closing: Promise<void> | null = null;
  private connected = true;
  private readonly reconnectWaiters = new Set<() => void>();
  private readonly pubAcks: PubAckRouter;

  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly js: JetStreamClient,
    private readonly rules: BusRules,
    private readonly onError: BusErrorHandler,
    private readonly streamReplicas: number,
    private readonly onStreamDrift: (drift: StreamDrift) => void,
  ) {
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
    const message = this.rules.outgoing({ subject, data, options });
    await this.ensureStreams();
    // A request written while disconnected is flushed on reconnect but its reply can be lost, so the publish
    // would time out even though the server is back; waiting for the reconnect avoids that.
    if (!(await this.whenConnected(PUBLISH_RECONNECT_WAIT_MS))) {
      throw new BusError(`publish to ${subject} failed: not connected to NATS`);
    }
    try {
      return await this.publishOnce(message);
    } catch (err) {
      if (!isNoResponders(err)) throw toBusError(`publish to ${subject} failed`, err);
    }
    // No stream answered: the server lost its state (or someone deleted the stream); recreate once and retry.
    this.streamsReady = null;
    await this.ensureStreams();
    try {
      return await this.publishOnce(message);
    } catch (err) {
      throw toBusError(`publish to ${subject} failed`, err);
    }
  }

  async publishBatch(messages: OutgoingMessage[]): Promise<PublishAck[]> {
    const batch = messages.map((m) => this.toWire(this.rules.outgoing(m)));
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
    const rule = this.rules.consumer(options);
    await this.ensureStreams();
    await this.upsertConsumer(rule);
    let consumer: Consumer;
    try {
      consumer = await whileElecting(() => this.js.consumers.get(rule.streamName, rule.durable), ELECTION_WAIT_MS);
    } catch (err) {
      throw toBusError(`cannot bind consumer ${rule.streamName}/${rule.durable}`, err);
    }
    const subscription = new JetStreamSubscription({
      nc: this.nc,
      consumer,
      rule,
      rules: this.rules,
      handler,
      onError: this.onError,
      isConnected: () => this.connected,
      whenConnected: () => this.whenConnected(),
      recreate: async () => {
        this.streamsReady = null;
        await this.ensureStreams();
        await this.upsertConsumer(rule);
      },
      onDrained: (s) => this.subscriptions.delete(s),
    });
    this.subscriptions.add(subscription);
    subscription.start();
    return subscription;
  }

  async kv(bucket: string, options: KvOptions): Promise<KvStore> {
    const name = this.rules.bucketName(bucket, options);
    try {
      // Created with the stream replica count; an existing bucket keeps its own (nats.js does not rewrite it).
      const kv = await this.js.views.kv(name, { ttl: options.ttlMs, history: 1, replicas: this.streamReplicas });
      // An existing bucket keeps the TTL it was created with; entries expire by that one.
      const ttlMs = (await kv.status()).ttl || options.ttlMs;
      return new JetStreamKv(this.jsm, kv, name, ttlMs, this.onError, this.watchers);
    } catch (err) {
      throw toBusError(`cannot open bucket ${name}`, err);
    }
  }

  async pending(stream: StreamName, durable: string): Promise<number> {
    const streamName = this.rules.streamName(stream);
    try {
      const info = await this.jsm.consumers.info(streamName, durable);
      return info.num_pending + info.num_ack_pending;
    } catch (err) {
      throw toBusError(`cannot read consumer ${streamName}/${durable}`, err);
    }
  }

  isConnected(): boolean {
    return this.connected && !this.nc.isClosed();
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

  private async publishOnce(message: CheckedMessage): Promise<PublishAck> {
    // The msgId travels in the checked headers, where the server reads it (nats.js's msgID option sets the same header).
    const ack = await this.js.publish(message.wireSubject, message.data, { headers: toNatsHeaders(message.headers) });
    return { stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate };
  }

  /** What goes on the wire for one message of a batch; throws before anything is sent if it cannot go. */
  private toWire(message: CheckedMessage): WireMessage {
    const maxPayload = this.nc.info?.max_payload;
    if (maxPayload !== undefined && message.data.length > maxPayload) {
      throw new BusError(`publish to ${message.subject} failed: ${message.data.length} bytes exceed the server's max_payload (${maxPayload})`);
    }
    let headers: WireMessage['headers'];
    try {
      headers = toNatsHeaders(message.headers);
    } catch (err) {
      throw toBusError(`publish to ${message.subject} failed`, err);
    }
    return { subject: message.subject, wireSubject: message.wireSubject, data: message.data, headers };
  }

  private async createStreams(): Promise<void> {
    for (const stream of Object.keys(STREAMS) as StreamName[]) {
      const { workQueue, maxAgeMs } = STREAMS[stream];
      await this.createStream({
        name: this.rules.streamName(stream),
        subjects: [this.rules.streamSubjects(stream)],
        retention: workQueue ? RetentionPolicy.Workqueue : RetentionPolicy.Limits,
        max_age: maxAgeMs === null ? 0 : nanos(maxAgeMs),
        storage: StorageType.File,
        duplicate_window: nanos(this.rules.duplicateWindowMs),
        num_replicas: this.streamReplicas,
      });
    }
  }

  /**
   * Creates a missing stream. An existing one is never updated: its replicas and limits are the
   * operator's (a service start with `streamReplicas: 1` must not scale an R3 stream down, nor one
   * replica's rollout undo another's settings); each difference is reported through `onStreamDrift`.
   */
  private async createStream(config: StreamConfigWanted): Promise<void> {
    try {
      await whileElecting(() => this.jsm.streams.add(config), ELECTION_WAIT_MS);
      return;
    } catch (err) {
      if (apiErrorCode(err) !== ERR_STREAM_NAME_IN_USE) throw err;
    }
    const existing = (await whileElecting(() => this.jsm.streams.info(config.name), ELECTION_WAIT_MS)).config;
    for (const drift of streamDrift(config, existing)) this.onStreamDrift(drift);
  }

  private async upsertConsumer(rule: ConsumerRule): Promise<void> {
    const config: Partial<ConsumerConfig> = {
      durable_name: rule.durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(rule.ackWaitMs),
      max_deliver: rule.maxDeliver,
      filter_subject: rule.wireFilterSubject,
    };
    try {
      try {
        // NATS 2.9 updates a durable in place on create; 2.10+ answers "already exists" and needs an update.
        await whileElecting(() => this.jsm.consumers.add(rule.streamName, config), ELECTION_WAIT_MS);
      } catch (err) {
        if (apiErrorCode(err) !== ERR_CONSUMER_ALREADY_EXISTS) throw err;
        await this.jsm.consumers.update(rule.streamName, rule.durable, {
          ack_wait: config.ack_wait,
          max_deliver: config.max_deliver,
          filter_subject: config.filter_subject,
        });
      }
    } catch (err) {
      throw toBusError(`cannot create consumer ${rule.streamName}/${rule.durable}`, err);
    }
  }
}

type StreamConfigWanted = Pick<StreamConfig, 'name' | 'subjects' | 'retention' | 'max_age' | 'storage' | 'duplicate_window' | 'num_replicas'>;

/** The settings of `existing` that differ from `wanted` (durations in nanoseconds, as the server keeps them). */
export function streamDrift(wanted: StreamConfigWanted, existing: Partial<StreamConfig>): StreamDrift[] {
  const out: StreamDrift[] = [];
  const compare = (setting: StreamDrift['setting'], configured: unknown, has: unknown) => {
    const a = JSON.stringify(configured ?? null);
    const b = JSON.stringify(has ?? null);
    if (a !== b) out.push({ stream: wanted.name, setting, configured: a, existing: b });
  };
  compare('num_replicas', wanted.num_replicas, existing.num_replicas);
  compare('max_age', wanted.max_age, existing.max_age ?? 0);
  compare('duplicate_window', wanted.duplicate_window, existing.duplicate_window);
  compare('subjects', wanted.subjects, existing.subjects);
  compare('retention', wanted.retention, existing.retention);
  compare('storage', wanted.storage, existing.storage);
  return out;
}
