import { Redis } from 'ioredis';
import { accountUnavailableReason, schedulerV1, type BotChannel } from '@rrs/proto';
import { join } from 'node:path';
import { collapseRepeats, createGrpcClient, migrate, reachAtStart, type ServiceContext } from '@rrs/runtime';
import { PermanentSendError, SinkOutbox, StepOutcome, startChannelSender, startReceiptEndpoint, type ReceiptRoute, type ChannelSenderConfig, type ChannelSenderDeps, type RunningChannelSender, type SendStep } from '@rrs/sender-kit';
import { unlinkChat, type BotScheduler } from './botLinking';
import { botWebhookPath, type BotClient } from './bots';
import { linkedChat, sendThroughBot, type BotRoute } from './botSend';
import { botWebhookRoute } from './botWebhooks';
import { startStaffChatMessages } from './staffChats';
import { greenApiReceiptRoute } from './greenApiReceipts';
import { ChatLinks } from './chatLinks';
import type { BotAccount, BotsConfig, MessengerAccount, MessengerConfig } from './config';
import { AccountHealth } from './health';
import { MessengerProviderHealth } from './providerHealth';
import { maxBot } from './maxBot';
import { telegramBot } from './telegramBot';
import { renderMessengerText } from './message';
import { greenApiProvider, sinkMessengerProvider, type MessengerProvider } from './provider';
import { createSendRateLimiter } from './rateLimit';

/** Why a messenger without a working account (and not a named sink) can't send: catalog and step reason, `account_missing` (its steps reroute as for a blocked account). */
export const NO_WORKING_ACCOUNT = accountUnavailableReason('missing');

/** The provider of a messenger without an account: unreachable behind its health, and refusing if ever called. */
function noAccountProvider(channel: MessengerChannel): MessengerProvider {
  return {
    name: 'none',
    async send() {
      throw new PermanentSendError(NO_WORKING_ACCOUNT, `${channel} has no working account (${channel}_ID_INSTANCE, ${channel}_API_TOKEN)`);
    },
  };
}

/** MAX comes first among the phone channels. */
export const CHANNELS = ['MAX', 'TELEGRAM'] as const;
export type MessengerChannel = (typeof CHANNELS)[number];
export const SCHEMA = 'channel_messenger';
/** The service's own migrations (the bots' chat links), in the send log's schema beside sender-kit's. */
export const MIGRATIONS_DIR = join(__dirname, '..', 'migrations');

const ENTRIES = {
  MAX: { key: 'MAX', slug: 'max', label: 'MAX', contactField: 'phone', position: 30 },
  TELEGRAM: { key: 'TELEGRAM', slug: 'telegram', label: 'Telegram', contactField: 'phone', position: 40 },
} as const;

export interface MessengerDeps extends ChannelSenderDeps {
  providers?: Partial<Record<MessengerChannel, MessengerProvider>>;
  /** Key prefix of the shared rate buckets in Redis (tests isolate themselves with it). */
  rateKeyPrefix?: string;
  /** Official bots handed in (the all-in-one's sink bots, tests) instead of those of `config.bots`, with their webhook secrets. */
  bots?: Partial<Record<BotChannel, { bot: BotClient; webhookSecret: string }>>;
  /** The scheduler's link-code and opt-out calls (tests, all-in-one); unset = a client of `config.bots.schedulerAddress`. */
  scheduler?: BotScheduler;
}

const E164 = /^\+[1-9]\d{6,14}$/;

/**
 * The messenger send step: "not registered on this messenger" is UNREACHABLE, so the scheduler moves on.
 * So is every step while the working account can't send (blocked, logged out, …: `account_<state>`),
 * without calling the gateway at all.
 */
export function messengerSend(provider: MessengerProvider, health?: Pick<AccountHealth, 'usable'>, bot?: BotRoute): SendStep {
  return async (step, ctx) => {
    const phone = step.recipient?.phone ?? '';
    if (!E164.test(phone)) throw new PermanentSendError('missing_contact', 'the recipient has no E.164 phone number');
    // A contact who linked the official bot gets it there, whatever the working account's state.
    const chat = bot ? await linkedChat(bot, step, phone) : null;
    if (bot && chat) return sendThroughBot(bot, chat, step);
    const account = health?.usable;
    if (account && !account.usable) return { outcome: StepOutcome.STEP_OUTCOME_UNREACHABLE, reason: account.reason };
    const answer = await provider.send({ stepId: step.stepId, phone, text: renderMessengerText(step), link: step.reviewUrl, resumed: ctx.resumed });
    if (answer.kind === 'not_registered') return { outcome: StepOutcome.STEP_OUTCOME_UNREACHABLE, reason: 'not_registered' };
    return { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId: answer.providerMessageId, provider: provider.name };
  };
}

const BOT_ACCOUNTS = { MAX: maxBot, TELEGRAM: telegramBot } as const;

/** The official bots configured (or handed in), each with its webhook secret. */
function configuredBots(config: Partial<BotsConfig> | undefined, deps: MessengerDeps, limiterOf: (channel: MessengerChannel, account: BotAccount) => { acquire(chat: string): Promise<void> }) {
  const bots: Partial<Record<MessengerChannel, { bot: BotClient; webhookSecret: string }>> = {};
  for (const channel of CHANNELS) {
    const given = deps.bots?.[channel];
    const account = channel === 'MAX' ? config?.max : config?.telegram;
    if (given) bots[channel] = given;
    else if (account) bots[channel] = { bot: BOT_ACCOUNTS[channel](account, limiterOf(channel, account)), webhookSecret: account.webhookSecret };
  }
  return bots;
}

export async function startMessengerSender(
  config: ChannelSenderConfig & Partial<Pick<MessengerConfig, 'max' | 'telegram' | 'sink' | 'redisUrl' | 'bots'>>,
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
  // A messenger with neither a working account nor the sink (production without MESSENGER_SINK naming
  // it): never called, its steps are UNREACHABLE and its catalog entry unavailable.
  const withoutAccount: Partial<Record<MessengerChannel, Pick<AccountHealth, 'usable'>>> = {};
  for (const channel of CHANNELS) {
    const account = accounts[channel];
    const sink = config.sink === undefined || config.sink.includes(channel);
    if (!deps.providers?.[channel] && !account && !sink) withoutAccount[channel] = { usable: { usable: false, reason: NO_WORKING_ACCOUNT } };
    providers[channel] =
      deps.providers?.[channel] ??
      (account
        ? greenApiProvider(channel.toLowerCase(), account, createSendRateLimiter({ redis, keyPrefix: `${deps.rateKeyPrefix ?? 'rrs'}:msg-rate:${channel.toLowerCase()}:${account.idInstance}`, perAccountPerSecond: account.perAccountPerSecond, perChatPerSecond: account.perChatPerSecond }))
        : sink ? sinkMessengerProvider(channel, outbox) : noAccountProvider(channel));
  }
  const providerHealth = Object.fromEntries(CHANNELS.map((channel) => [channel, new MessengerProviderHealth(providers[channel].name, !withoutAccount[channel])])) as Record<MessengerChannel, MessengerProviderHealth>;
  // Account health: asked before announcing, so a blocked account never enters the catalog as usable.
  let setAvailability: RunningChannelSender['setAvailability'] | undefined;
  const health: Partial<Record<MessengerChannel, AccountHealth>> = {};
  /** What decides whether the channel can send: its account's health, or the lack of an account. */
  const usableOf = (channel: MessengerChannel) => health[channel] ?? withoutAccount[channel];
  for (const channel of CHANNELS) {
    const account = accounts[channel];
    if (!account || deps.providers?.[channel]) continue;
    const accountHealth = new AccountHealth({
      channel,
      account,
      intervalMs: account.healthIntervalMs ?? 60_000,
      logger: ctx.logger,
      onChange: async (usable, reason) => {
        providerHealth[channel].set(usable, reason);
        await setAvailability?.(channel, { available: usable, reason });
      },
    });
    await accountHealth.start();
    ctx.lifecycle.onStop(`${channel} account health`, () => accountHealth.stop());
    health[channel] = accountHealth;
  }
  // Official bots: their chat links live in the send log's database, opened by startChannelSender below.
  const bots = configuredBots(config.bots, deps, (channel, account) =>
    createSendRateLimiter({ redis, keyPrefix: `${deps.rateKeyPrefix ?? 'rrs'}:msg-rate:${channel.toLowerCase()}-bot`, perAccountPerSecond: account.perBotPerSecond, perChatPerSecond: account.perChatPerSecond }),
  );
  const anyBot = Object.keys(bots).length > 0;
  let scheduler = deps.scheduler;
  if (anyBot && !scheduler) {
    const handle = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, config.bots?.schedulerAddress ?? '127.0.0.1:50052');
    ctx.lifecycle.onStop('scheduler client', () => handle.close());
    scheduler = handle.client;
  }
  // The chat links are read through the send log's pool once its migration ran (after startChannelSender):
  // a step that comes due before waits for them, so it never takes the working account for a linked contact.
  let linksReady!: (links: ChatLinks) => void;
  let linksFailed!: (err: unknown) => void;
  const chatLinks = new Promise<ChatLinks>((resolve, reject) => ((linksReady = resolve), (linksFailed = reject)));
  chatLinks.catch(() => undefined);
  const routes: Partial<Record<MessengerChannel, BotRoute>> = {};
  for (const channel of CHANNELS) {
    const configured = bots[channel];
    if (!configured || !scheduler) continue;
    const linking = { bot: configured.bot, scheduler };
    routes[channel] = { bot: configured.bot, links: chatLinks, unlink: async (chatId) => unlinkChat({ ...linking, links: await chatLinks }, chatId, 'bot_blocked') };
  }
  const availability = (channel: MessengerChannel) => {
    const usable = usableOf(channel)?.usable;
    return usable && !usable.usable ? { unavailable: true, unavailableReason: usable.reason } : {};
  };
  // Receipts come only from a real working account whose webhook token is set (the sink has none).
  const receipts = (channel: MessengerChannel) => (accounts[channel]?.webhookToken !== undefined && !deps.providers?.[channel] ? accounts[channel] : undefined);
  const capabilities = (channel: MessengerChannel) => ['send', 'reachability', ...(receipts(channel) ? ['delivery_receipts'] : []), ...(bots[channel] ? ['official_bot'] : [])];
  const running = await startChannelSender(config, ctx, {
    service: 'channel-messenger',
    schema: SCHEMA,
    bus: deps.bus,
    pool: deps.pool,
    outbox,
    eraseMore: (erased, pool) => new ChatLinks(pool).forgetRecipients(erased.organizationId, erased.recipientIds).then(() => undefined),
    channels: CHANNELS.map((channel) => ({
      entry: { ...ENTRIES[channel], capabilities: capabilities(channel), ...availability(channel), ...(bots[channel] ? { botLink: bots[channel].bot.link } : {}) },
      send: messengerSend(providers[channel], usableOf(channel), routes[channel]),
      provider: providers[channel].name,
      // A messenger without a working account has no provider to announce: its entry says why it is unavailable.
      ...(withoutAccount[channel] ? {} : { health: providerHealth[channel] }),
    })),
  });
  setAvailability = running.setAvailability;
  const pool = running.pool;
  try {
    await migrate(pool, { schema: SCHEMA, dir: MIGRATIONS_DIR, logger: ctx.logger });
  } catch (err) {
    linksFailed(err);
    throw err;
  }
  const links = new ChatLinks(pool);
  linksReady(links);
  // One webhook port for the bots' updates and the working accounts' receipts.
  const webhookRoutes: ReceiptRoute[] = [];
  const served = scheduler ? CHANNELS.flatMap((channel) => (bots[channel] ? [{ bot: bots[channel].bot, secret: bots[channel].webhookSecret, links, scheduler: scheduler!, logger: ctx.logger }] : [])) : [];
  webhookRoutes.push(...served.map(botWebhookRoute));
  for (const channel of CHANNELS) {
    const account = receipts(channel);
    if (account) webhookRoutes.push(greenApiReceiptRoute({ channel, idInstance: account.idInstance, token: account.webhookToken!, results: running.results, sendLog: running.sendLog }));
  }
  let botWebhookPort: number | undefined;
  if (webhookRoutes.length > 0) {
    const server = await startReceiptEndpoint({ channel: 'BOTS', host: config.bots?.webhookHost ?? '0.0.0.0', port: config.bots?.webhookPort ?? 9474, routes: webhookRoutes, logger: ctx.logger });
    ctx.lifecycle.onStop('messenger webhooks server', () => server.close());
    botWebhookPort = server.port;
    const publicUrl = config.bots?.webhookPublicUrl;
    for (const { bot, secret } of served) {
      if (!publicUrl) continue;
      // A platform that can't be reached now must not stop the sender: the webhook stays as it was set.
      await bot.registerWebhook(`${publicUrl}${botWebhookPath(bot.channel)}`, secret).then(
        () => ctx.logger.info({ channel: bot.channel, url: `${publicUrl}${botWebhookPath(bot.channel)}` }, 'bot webhook registered'),
        (err: unknown) => ctx.logger.error({ err, channel: bot.channel }, 'registering the bot webhook failed; set it by hand (docs/channels.md) or restart'),
      );
    }
  }
  // Rating alerts to the staff chats linked through the bots (docs/console.md, "Rating alerts").
  if (anyBot && scheduler) {
    const staffBots = Object.fromEntries(CHANNELS.flatMap((channel) => (bots[channel] ? [[channel, bots[channel].bot]] : [])));
    const staffMessages = await startStaffChatMessages({ bus: running.bus, sendLog: running.sendLog, bots: staffBots, scheduler, logger: ctx.logger, ackWaitMs: config.ackWaitMs });
    ctx.lifecycle.onStop('staff chat alerts consumer', () => staffMessages.drain());
  }
  // A change while the sender was starting: put the state as it is now.
  for (const channel of CHANNELS) {
    const usable = usableOf(channel)?.usable;
    if (usable && !usable.usable) await running.setAvailability(channel, { available: false, reason: usable.reason });
  }
  return { ...running, outbox, providers, health, chatLinks: links, botWebhookPort, bots };
}
