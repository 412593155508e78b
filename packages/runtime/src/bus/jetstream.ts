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
import { apiErrorCode, ERR_CONSUMER_ALREADY_EXISTS, ERR_STREAM_NAME_IN_USE, isNoResponders } from './jetstreamApi';
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
}

/** How long a publish waits for a lost connection to come back before failing. */
const PUBLISH_RECONNECT_WAIT_MS = 5_000;
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
    const jsm = await nc.jetstreamManager();
    return new JetStreamBus(nc, jsm, nc.jetstream(), rules, options.onError ?? defaultErrorHandler);
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
      consumer = await this.js.consumers.get(rule.streamName, rule.durable);
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
      const kv = await this.js.views.kv(name, { ttl: options.ttlMs, history: 1 });
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
      await this.upsertStream({
        name: this.rules.streamName(stream),
        subjects: [this.rules.streamSubjects(stream)],
        retention: workQueue ? RetentionPolicy.Workqueue : RetentionPolicy.Limits,
        ...(maxAgeMs === null ? {} : { max_age: nanos(maxAgeMs) }),
        storage: StorageType.File,
        duplicate_window: nanos(this.rules.duplicateWindowMs),
        num_replicas: 1,
      });
    }
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
        await this.jsm.consumers.add(rule.streamName, config);
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
