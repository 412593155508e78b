import { Redis } from 'ioredis';
import { collapseRepeats, type ServiceContext } from '@rrs/runtime';
import { PermanentSendError, SinkOutbox, StepOutcome, startChannelSender, type ChannelSenderConfig, type ChannelSenderDeps, type SendStep } from '@rrs/sender-kit';
import type { MessengerAccount, MessengerConfig } from './config';
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

/** The messenger send step: "not registered on this messenger" is UNREACHABLE, so the scheduler moves on. */
export function messengerSend(provider: MessengerProvider): SendStep {
  return async (step, ctx) => {
    const phone = step.recipient?.phone ?? '';
    if (!E164.test(phone)) throw new PermanentSendError('missing_contact', 'the recipient has no E.164 phone number');
    const answer = await provider.send({ stepId: step.stepId, phone, text: renderMessengerText(step), link: step.reviewUrl, resumed: ctx.resumed });
    if (answer.kind === 'not_registered') return { outcome: StepOutcome.STEP_OUTCOME_UNREACHABLE, reason: 'not_registered' };
    return { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId: answer.providerMessageId };
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
    const client = new Redis(config.redisUrl, { maxRetriesPerRequest: 1 });
    // ioredis reports every failed reconnect: while Redis is down, one line per cause per interval.
    const redisErrors = collapseRepeats(ctx.logger);
    client.on('error', (err) => redisErrors.warn({ err }, 'redis (send rates) error'));
    ctx.lifecycle.onStop('redis', async () => {
      await client.quit().catch(() => client.disconnect());
      redisErrors.flush();
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
  const running = await startChannelSender(config, ctx, {
    service: 'channel-messenger',
    schema: SCHEMA,
    bus: deps.bus,
    pool: deps.pool,
    channels: CHANNELS.map((channel) => ({
      entry: { ...ENTRIES[channel], capabilities: ['send', 'reachability'] },
      send: messengerSend(providers[channel]),
      provider: providers[channel].name,
    })),
  });
  return { ...running, outbox, providers };
}
