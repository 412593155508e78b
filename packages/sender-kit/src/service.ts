import type { ErasedPerson } from '@rrs/proto';
import { openBus, type Bus, type BusConfig, type Pool, type ServiceContext, type Subscription } from '@rrs/runtime';
import type { SenderBaseConfig } from './config';
import { Redis } from 'ioredis';
import { createProviderRate, rateLimitedSend, type ProviderRate } from './providerRate';
import type { ProviderHealthSource } from './providers';
import { SINK_PROVIDER } from './providerOrder';
import { announceChannels, type AnnouncedEntry, type ChannelAvailability } from './registry';
import { StepResultPublisher } from './result';
import { startSender, type SendStep } from './sender';
import { consumeSenderErasures } from './personErasure';
import { openSendLog, type SenderMigrations, type SendLog } from './sendLog';
import type { SinkOutbox } from './sink';

/** What a sender has opened before it takes its first step: for a send step that needs them. */
export interface OpenedSender {
  pool: Pool;
  sendLog: SendLog;
  results: StepResultPublisher;
}

/** One channel a sender serves: its catalog entry and how it sends. */
export type ChannelSpec = {
  entry: Omit<AnnouncedEntry, 'sender'>;
  /** The provider behind the send step (`smtp`, `smsc`, `sink`, …), logged at start. */
  provider?: string;
  /** The channel's provider chain: its providers' circuit states go into the catalog entry. */
  health?: ProviderHealthSource;
  /**
   * The least lease of a send in progress (default: the ack wait). A provider whose call may still be
   * processed after the caller died (SMSC, up to its timeout) sets its call timeout here, so a step
   * redelivered after its sender died waits until that call cannot still land before asking again.
   */
  sendLeaseMs?: number;
} & (
  | { send: SendStep }
  /** A send step made from the sender's pool, send log and result publisher, once they are open. */
  | { sendWith: (opened: OpenedSender) => SendStep }
);

/** What a sender service can be handed instead of making its own (all-in-one mode, tests). */
export interface ChannelSenderDeps {
  bus?: Bus;
  /** The send log's pool; it belongs to the caller, who closes and checks it. */
  pool?: Pool;
  /** Where the sink provider puts messages: the dev inbox. */
  outbox?: SinkOutbox;
}

/** The bus settings are needed only when no bus is handed in (`options.bus`, as the all-in-one does). */
export type ChannelSenderConfig = Pick<SenderBaseConfig, 'databaseUrl' | 'concurrency'> &
  Partial<BusConfig> &
  Partial<Pick<SenderBaseConfig, 'maxDeliver' | 'ackWaitMs' | 'channelTtlMs' | 'providerRates' | 'redisUrl'>>;

export interface RunningChannelSender {
  bus: Bus;
  sendLog: SendLog;
  pool: Pool;
  /** Step outcomes to the scheduler, shared by the channels and anything reporting receipts. */
  results: StepResultPublisher;
  subscriptions: Subscription[];
  /** Marks one of the sender's channels (un)available in the catalog at once (account health). */
  setAvailability(key: string, availability: ChannelAvailability): Promise<void>;
}

/**
 * The provider rate of a channel's chain (`smsc>smsru`: its primary, `smsc`), if one is configured;
 * with REDIS_URL one Redis connection for the process, closed at stop.
 */
async function providerRates(config: ChannelSenderConfig, ctx: ServiceContext): Promise<(chain: string) => ProviderRate | undefined> {
  const rates = config.providerRates ?? {};
  if (Object.keys(rates).length === 0) return () => undefined;
  let redis: Redis | undefined;
  if (config.redisUrl) {
    redis = new Redis(config.redisUrl, { maxRetriesPerRequest: 2, enableOfflineQueue: true });
    ctx.lifecycle.onStop('provider rates (Redis)', async () => void (await redis?.quit()));
  }
  const made = new Map<string, ProviderRate>();
  return (chain) => {
    const provider = chain.split('>')[0];
    const perSecond = rates[provider];
    if (!perSecond) return undefined;
    if (!made.has(provider)) made.set(provider, createProviderRate({ provider, perSecond, redis, keyPrefix: config.busPrefix ? `rrs:${config.busPrefix}:provider-rate:` : undefined }));
    ctx.logger.info({ provider, perSecond, shared: Boolean(redis) }, 'provider send rate');
    return made.get(provider);
  };
}

/**
 * The common body of a sender service: bus, send log (its own schema), one consumer per channel, and the
 * catalog entries announced while it runs. Shutdown (LIFO) stops announcing first, then drains the
 * consumers, so no step is taken after the sender has begun to leave.
 */
export async function startChannelSender(
  config: ChannelSenderConfig,
  ctx: ServiceContext,
  options: {
    service: string;
    schema: string;
    channels: ChannelSpec[];
    /** The sender's own tables, migrated with the send log before any step is taken. */
    migrations?: SenderMigrations[];
    /** The sink's messages (the dev inbox): an erased person's are forgotten. */
    outbox?: SinkOutbox;
    /** What else the sender holds about an erased person (its own tables), erased after its send log. */
    eraseMore?: (erased: ErasedPerson, pool: Pool) => Promise<void>;
  } & Pick<ChannelSenderDeps, 'bus' | 'pool'>,
): Promise<RunningChannelSender> {
  // A sender's work arrives over the bus: without it the pod cannot do its job (not ready).
  const bus = await openBus(config, ctx, options.service, options.bus, { required: true });
  const { log: sendLog, pool } = await openSendLog({ databaseUrl: config.databaseUrl, schema: options.schema, pool: options.pool, migrations: options.migrations }, ctx);
  const results = new StepResultPublisher(bus);
  const rateOf = await providerRates(config, ctx);
  const subscriptions: Subscription[] = [];
  const erasures = await consumeSenderErasures({ bus, pool, service: options.service, logger: ctx.logger, outbox: options.outbox, eraseMore: options.eraseMore });
  ctx.lifecycle.onStop('erasures consumer', () => erasures.drain());
  for (const channel of options.channels) {
    if (channel.provider === SINK_PROVIDER) ctx.logger.warn({ channel: channel.entry.key, provider: channel.provider }, 'channel provider is the sink: messages are not delivered (they are recorded in the dev inbox)');
    else if (channel.provider) ctx.logger.info({ channel: channel.entry.key, provider: channel.provider }, 'channel provider');
    const send = 'send' in channel ? channel.send : channel.sendWith({ pool, sendLog, results });
    const rate = channel.provider ? rateOf(channel.provider) : undefined;
    const sub = await startSender({
      bus,
      channel: channel.entry.key,
      send: rate ? rateLimitedSend(send, rate) : send,
      sendLog,
      results,
      logger: ctx.logger,
      concurrency: config.concurrency,
      maxDeliver: config.maxDeliver,
      ackWaitMs: config.ackWaitMs,
      minLeaseMs: channel.sendLeaseMs,
    });
    subscriptions.push(sub);
    ctx.lifecycle.onStop(`${channel.entry.slug} steps consumer`, () => sub.drain());
  }
  const announcement = await announceChannels({
    bus,
    entries: options.channels.map((c) => ({ ...c.entry, sender: options.service })),
    logger: ctx.logger,
    ttlMs: config.channelTtlMs,
    health: new Map(options.channels.flatMap((c) => (c.health ? [[c.entry.key, c.health] as const] : []))),
  });
  ctx.lifecycle.onStop('channel catalog announcement', () => announcement.stop());
  return { bus, sendLog, pool, results, subscriptions, setAvailability: (key, availability) => announcement.setAvailability(key, availability) };
}
