import { Redis } from 'ioredis';
import { collapseRepeats, reachAtStart, type ServiceContext } from '@rrs/runtime';
import { PermanentSendError, SinkOutbox, StepOutcome, startChannelSender, type ChannelSenderConfig, type ChannelSenderDeps, type RunningChannelSender, type SendStep } from '@rrs/sender-kit';
import type { MessengerAccount, MessengerConfig } from './config';
import { AccountHealth } from './health';
import { renderMessengerText } from './message';
import { greenApiProvider, sinkMessengerProvider, type MessengerProvider } from './provider';
import { createSendRateLimiter } from './rateLimit';

/** MAX comes first among the phone channels. */
export const CHANNELS = ['MAX', 'TELEGRAM'] as const;
export type MessengerChannel = (typeof CHANNELS)[number];
export const SCHEMA = 'channel_messenger';

const ENTRIES = {
  MAX: { key: 'MAX', slug: 'max', label: 'MAX', contactField: 'phone', position: 30 },
  TELEGRAM: { key: 'TELEGRAM', slug: 'telegram', label: 'Telegram', contactField: 'phone', position: 40 },
} as const;

export interface MessengerDeps extends ChannelSenderDeps {
  providers?: Partial<Record<MessengerChannel, MessengerProvider>>;
  /** Key prefix of the shared rate buckets in Redis (tests isolate themselves with it). */
  rateKeyPrefix?: string;
}

const E164 = /^\+[1-9]\d{6,14}$/;

/**
 * The messenger send step: "not registered on this messenger" is UNREACHABLE, so the scheduler moves on.
 * So is every step while the working account can't send (blocked, logged out, …: `account_<state>`),
 * without calling the gateway at all.
 */
export function messengerSend(provider: MessengerProvider, health?: Pick<AccountHealth, 'usable'>): SendStep {
  return async (step, ctx) => {
    const phone = step.recipient?.phone ?? '';
    if (!E164.test(phone)) throw new PermanentSendError('missing_contact', 'the recipient has no E.164 phone number');
    const account = health?.usable;
    if (account && !account.usable) return { outcome: StepOutcome.STEP_OUTCOME_UNREACHABLE, reason: account.reason };
    const answer = await provider.send({ stepId: step.stepId, phone, text: renderMessengerText(step), link: step.reviewUrl, resumed: ctx.resumed });
    if (answer.kind === 'not_registered') return { outcome: StepOutcome.STEP_OUTCOME_UNREACHABLE, reason: 'not_registered' };
    return { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId: answer.providerMessageId, provider: provider.name };
  };
}

export async function startMessengerSender(
  config: ChannelSenderConfig & Partial<Pick<MessengerConfig, 'max' | 'telegram' | 'redisUrl'>>,
  ctx: ServiceContext,
  deps: MessengerDeps = {},
) {
  const outbox = deps.outbox ?? new SinkOutbox();
  let redis: Redis | undefined;
  if (config.redisUrl) {
    const client = new Redis(config.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
    // ioredis reports every failed reconnect: while Redis is down, one line per cause per interval.
    const redisErrors = collapseRepeats(ctx.logger);
    client.on('error', (err) => redisErrors.warn({ err }, 'redis (send rates) error'));
    ctx.lifecycle.onStop('redis', async () => {
      await client.quit().catch(() => client.disconnect());
      redisErrors.flush();
    });
    await reachAtStart({ variable: 'REDIS_URL', url: config.redisUrl, what: 'Redis' }, () => client.connect());
    // Without the shared send-rate buckets nothing is sent (unmetered sends could get the account blocked): not ready.
    ctx.health.addCheck('channel-messenger-redis', async () => {
      await client.ping();
    });
    redis = client;
  }
  const accounts: Record<MessengerChannel, MessengerAccount | undefined> = { MAX: config.max, TELEGRAM: config.telegram };
  const providers = {} as Record<MessengerChannel, MessengerProvider>;
  for (const channel of CHANNELS) {
    const account = accounts[channel];
    providers[channel] =
      deps.providers?.[channel] ??
      (account
        ? greenApiProvider(channel.toLowerCase(), account, createSendRateLimiter({ redis, keyPrefix: `${deps.rateKeyPrefix ?? 'rrs'}:msg-rate:${channel.toLowerCase()}:${account.idInstance}`, perAccountPerSecond: account.perAccountPerSecond, perChatPerSecond: account.perChatPerSecond }))
        : sinkMessengerProvider(channel, outbox));
  }
  // Account health: asked before announcing, so a blocked account never enters the catalog as usable.
  let setAvailability: RunningChannelSender['setAvailability'] | undefined;
  const health: Partial<Record<MessengerChannel, AccountHealth>> = {};
  for (const channel of CHANNELS) {
    const account = accounts[channel];
    if (!account || deps.providers?.[channel]) continue;
    const accountHealth = new AccountHealth({
      channel,
      account,
      intervalMs: account.healthIntervalMs ?? 60_000,
      logger: ctx.logger,
      onChange: async (usable, reason) => {
        await setAvailability?.(channel, { available: usable, reason });
      },
    });
    await accountHealth.start();
    ctx.lifecycle.onStop(`${channel} account health`, () => accountHealth.stop());
    health[channel] = accountHealth;
  }
  const availability = (channel: MessengerChannel) => {
    const usable = health[channel]?.usable;
    return usable && !usable.usable ? { unavailable: true, unavailableReason: usable.reason } : {};
  };
  const running = await startChannelSender(config, ctx, {
    service: 'channel-messenger',
    schema: SCHEMA,
    bus: deps.bus,
    pool: deps.pool,
    channels: CHANNELS.map((channel) => ({
      entry: { ...ENTRIES[channel], capabilities: ['send', 'reachability'], ...availability(channel) },
      send: messengerSend(providers[channel], health[channel]),
      provider: providers[channel].name,
    })),
  });
  setAvailability = running.setAvailability;
  // A change while the sender was starting: put the state as it is now.
  for (const channel of CHANNELS) {
    const usable = health[channel]?.usable;
    if (usable && !usable.usable) await running.setAvailability(channel, { available: false, reason: usable.reason });
  }
  return { ...running, outbox, providers, health };
}
