import { z } from 'zod';
import { ConfigError, envField, readEnv, type Env } from '@rrs/runtime';
import { senderBaseConfig, senderEnvShape, type SenderBaseConfig } from '@rrs/sender-kit';

/**
 * Steps in flight per messenger replica: fewer than other senders, because a messenger step waits for
 * a send-rate token (1/s per chat, 20–30/s per account) for up to 3 s; more in flight would only wait
 * longer and be nak'ed for `rate_limited` more often.
 */
export const MESSENGER_SENDER_CONCURRENCY = 16;

/** One messenger's working account at the gateway (GREEN-API shape: api URL, instance id, token). */
export interface MessengerAccount {
  apiUrl: string;
  idInstance: string;
  apiToken: string;
  timeoutMs: number;
  /** Messages per second for the whole account, shared by every replica. */
  perAccountPerSecond: number;
  /** Messages per second to one chat. */
  perChatPerSecond: number;
  /** Pause between two instance state checks (getStateInstance). */
  healthIntervalMs?: number;
  /** How long a `checkAccount` answer is reused for a phone number (a number without an account: a tenth of it). */
  accountCacheMs?: number;
  /**
   * The account's `webhookUrlToken` (GREEN-API sends it as `Authorization: Bearer …`); set = its delivery
   * receipts are taken at `POST /receipts/greenapi/<channel>` on the webhook port (docs/channels.md).
   */
  webhookToken?: string;
}

/** One messenger's official bot (docs/channels.md "Official bots"). */
export interface BotAccount {
  /** MAX: `https://platform-api2.max.ru`; Telegram: `https://api.telegram.org`. */
  apiUrl: string;
  token: string;
  /** The bot's user name, for the deep links (`https://t.me/<name>`, `https://max.ru/<name>`). */
  name: string;
  /** Sent back by the platform with every webhook update (Telegram `secret_token`, MAX `secret`). */
  webhookSecret: string;
  timeoutMs: number;
  perBotPerSecond: number;
  perChatPerSecond: number;
}

export interface BotsConfig {
  max?: BotAccount;
  telegram?: BotAccount;
  /** Where the webhook endpoint (bot updates, working-account receipts) listens (`BOT_WEBHOOK_HOST`, `BOT_WEBHOOK_PORT`). */
  webhookHost: string;
  webhookPort: number;
  /** The public base URL the platforms reach the endpoint at; set = the webhooks are registered at start. */
  webhookPublicUrl?: string;
  /** The scheduler, which issues and resolves link codes and keeps the opt-out ledger. */
  schedulerAddress: string;
}

/** The messengers, by their lower-case names in `MESSENGER_SINK`. */
export const MESSENGER_NAMES = { max: 'MAX', telegram: 'TELEGRAM' } as const;
export type MessengerKey = (typeof MESSENGER_NAMES)[keyof typeof MESSENGER_NAMES];

export interface MessengerConfig extends SenderBaseConfig {
  /** The working accounts; a messenger without one uses the sink when listed in `sink`, else it is unavailable. */
  max?: MessengerAccount;
  telegram?: MessengerAccount;
  /**
   * The messengers that use the sink provider: outside production every one without a working account;
   * in production only those `MESSENGER_SINK` names (docs/channels.md, "The sink and production").
   * Unset (tests, callers of startMessengerSender) = every one without an account.
   */
  sink?: MessengerKey[];
  /** Unset = in-memory rate limits (one replica only). */
  redisUrl?: string;
  bots: BotsConfig;
}

function account(vars: Record<string, unknown>, prefix: 'MAX' | 'TELEGRAM', defaults: { perAccount: number }): MessengerAccount | undefined {
  const id = vars[`${prefix}_ID_INSTANCE`] as string | undefined;
  const token = vars[`${prefix}_API_TOKEN`] as string | undefined;
  const webhookToken = vars[`${prefix}_WEBHOOK_TOKEN`] as string | undefined;
  if (!id && !token && webhookToken !== undefined) throw new ConfigError(`${prefix}_WEBHOOK_TOKEN`, `needs the working account (${prefix}_ID_INSTANCE, ${prefix}_API_TOKEN) whose receipts it authenticates`);
  if (!id && !token) return undefined;
  if (!id) throw new ConfigError(`${prefix}_ID_INSTANCE`, `is required when ${prefix}_API_TOKEN is set`);
  if (!token) throw new ConfigError(`${prefix}_API_TOKEN`, `is required when ${prefix}_ID_INSTANCE is set`);
  return {
    apiUrl: vars[`${prefix}_API_URL`] as string,
    idInstance: id,
    apiToken: token,
    timeoutMs: vars.MESSENGER_TIMEOUT_MS as number,
    perAccountPerSecond: (vars[`${prefix}_RATE_PER_SECOND`] as number | undefined) ?? defaults.perAccount,
    perChatPerSecond: 1,
    healthIntervalMs: vars.MESSENGER_HEALTH_INTERVAL_MS as number,
    accountCacheMs: vars.MESSENGER_ACCOUNT_CACHE_MS as number,
    webhookToken,
  };
}

function bot(vars: Record<string, unknown>, prefix: 'MAX' | 'TELEGRAM', perChatPerSecond: number): BotAccount | undefined {
  const names = [`${prefix}_BOT_TOKEN`, `${prefix}_BOT_NAME`, `${prefix}_BOT_WEBHOOK_SECRET`] as const;
  const given = names.filter((name) => vars[name] !== undefined);
  if (given.length === 0) return undefined;
  const missing = names.find((name) => vars[name] === undefined);
  if (missing) throw new ConfigError(missing, `is required when ${given.join(', ')} ${given.length === 1 ? 'is' : 'are'} set (a bot needs its token, name and webhook secret)`);
  return {
    apiUrl: vars[`${prefix}_BOT_API_URL`] as string,
    token: vars[`${prefix}_BOT_TOKEN`] as string,
    name: vars[`${prefix}_BOT_NAME`] as string,
    webhookSecret: vars[`${prefix}_BOT_WEBHOOK_SECRET`] as string,
    timeoutMs: vars.MESSENGER_TIMEOUT_MS as number,
    perBotPerSecond: vars[`${prefix}_BOT_RATE_PER_SECOND`] as number,
    perChatPerSecond,
  };
}

/** A bot's user name: 5–32 of letters, digits and `_` (Telegram's rule; MAX names fit it). */
const BOT_NAME = z.string().regex(/^[A-Za-z][A-Za-z0-9_]{4,31}$/, 'must be the bot user name without @ (5-32 of A-Za-z0-9_)').optional();
/** Telegram's `secret_token` allows 1–256 of `A-Za-z0-9_-`; at least 16 so it can't be guessed. */
const WEBHOOK_SECRET = z.string().regex(/^[A-Za-z0-9_-]{16,256}$/, 'must be 16-256 of A-Za-z0-9_-').optional();

export function buildConfig(env: Env): MessengerConfig {
  const vars = readEnv(
    {
      ...senderEnvShape,
      // Each service has its own default ops port, so they can run side by side on one host.
      OPS_PORT: envField.port(9468),
      SENDER_CONCURRENCY: envField.int(MESSENGER_SENDER_CONCURRENCY, 1),
      MAX_API_URL: envField.url(['http', 'https']).default('https://api.green-api.com/v3'),
      MAX_ID_INSTANCE: z.string().regex(/^\d+$/, 'must be the numeric instance id').optional(),
      MAX_API_TOKEN: z.string().min(8).optional(),
      MAX_RATE_PER_SECOND: envField.int(20, 1),
      MAX_WEBHOOK_TOKEN: WEBHOOK_SECRET,
      TELEGRAM_API_URL: envField.url(['http', 'https']).default('https://api.green-api.com/v3'),
      TELEGRAM_ID_INSTANCE: z.string().regex(/^\d+$/, 'must be the numeric instance id').optional(),
      TELEGRAM_API_TOKEN: z.string().min(8).optional(),
      TELEGRAM_RATE_PER_SECOND: envField.int(30, 1),
      TELEGRAM_WEBHOOK_TOKEN: WEBHOOK_SECRET,
      MESSENGER_TIMEOUT_MS: envField.int(10_000, 100),
      /** GREEN-API recommends asking the instance state once a minute; never more than every 5 s. */
      MESSENGER_HEALTH_INTERVAL_MS: envField.int(60_000, 5_000),
      MESSENGER_ACCOUNT_CACHE_MS: envField.int(86_400_000, 0),
      REDIS_URL: envField.url(['redis', 'rediss']).optional(),
      MAX_BOT_API_URL: envField.url(['http', 'https']).default('https://platform-api2.max.ru'),
      MAX_BOT_TOKEN: z.string().min(8).optional(),
      MAX_BOT_NAME: BOT_NAME,
      MAX_BOT_WEBHOOK_SECRET: WEBHOOK_SECRET,
      MAX_BOT_RATE_PER_SECOND: envField.int(20, 1),
      TELEGRAM_BOT_API_URL: envField.url(['http', 'https']).default('https://api.telegram.org'),
      TELEGRAM_BOT_TOKEN: z.string().regex(/^\d+:[A-Za-z0-9_-]{20,}$/, 'must be the token BotFather gave (<id>:<secret>)').optional(),
      TELEGRAM_BOT_NAME: BOT_NAME,
      TELEGRAM_BOT_WEBHOOK_SECRET: WEBHOOK_SECRET,
      TELEGRAM_BOT_RATE_PER_SECOND: envField.int(30, 1),
      BOT_WEBHOOK_HOST: envField.host(),
      BOT_WEBHOOK_PORT: envField.port(9474),
      BOT_WEBHOOK_PUBLIC_URL: envField.baseUrl().optional(),
      SCHEDULER_ADDR: envField.address('127.0.0.1:50052'),
      /** Messengers that use the sink on purpose (`max`, `telegram`): the only way to a sink in production. */
      MESSENGER_SINK: z.string().regex(/^[a-z]+(,[a-z]+)*$/, 'must be a comma-separated list, e.g. max,telegram').optional(),
      NODE_ENV: envField.nodeEnv(),
    },
    env,
  );
  const max = account(vars, 'MAX', { perAccount: vars.MAX_RATE_PER_SECOND });
  const telegram = account(vars, 'TELEGRAM', { perAccount: vars.TELEGRAM_RATE_PER_SECOND });
  return {
    ...senderBaseConfig(vars),
    max,
    telegram,
    sink: messengerSink(vars.MESSENGER_SINK, { MAX: max, TELEGRAM: telegram }, vars.NODE_ENV === 'production'),
    redisUrl: vars.REDIS_URL,
    bots: {
      // MAX: at most two messages a second to one dialog (dev.max.ru/docs-api/methods/POST/messages);
      // Telegram: about one a second to one chat (core.telegram.org/bots/faq).
      max: bot(vars, 'MAX', 2),
      telegram: bot(vars, 'TELEGRAM', 1),
      webhookHost: vars.BOT_WEBHOOK_HOST,
      webhookPort: vars.BOT_WEBHOOK_PORT,
      webhookPublicUrl: vars.BOT_WEBHOOK_PUBLIC_URL,
      schedulerAddress: vars.SCHEDULER_ADDR,
    },
  };
}

/**
 * "Production never pretends": which messengers use the sink. Outside production, those without a
 * working account (the demo). In production only those MESSENGER_SINK names, and a sender with neither
 * a working account nor a named sink refuses to start, naming the variables; a messenger without either
 * while the other has an account is announced unavailable (`account_missing`), never as a sink.
 */
function messengerSink(listed: string | undefined, accounts: Record<MessengerKey, MessengerAccount | undefined>, production: boolean): MessengerKey[] {
  if (listed === undefined) {
    const without = (Object.keys(accounts) as MessengerKey[]).filter((key) => !accounts[key]);
    if (!production) return without;
    if (without.length === Object.keys(accounts).length) {
      throw new ConfigError(
        'MAX_ID_INSTANCE',
        `no messenger account is configured and NODE_ENV=production: set MAX_ID_INSTANCE and MAX_API_TOKEN, or TELEGRAM_ID_INSTANCE and TELEGRAM_API_TOKEN (or MESSENGER_SINK=max,telegram for a staging whose messages are not delivered)`,
      );
    }
    return [];
  }
  const sink: MessengerKey[] = [];
  for (const name of listed.split(',')) {
    const key = (MESSENGER_NAMES as Record<string, MessengerKey | undefined>)[name];
    if (!key) throw new ConfigError('MESSENGER_SINK', `unknown messenger ${JSON.stringify(name)} (known: ${Object.keys(MESSENGER_NAMES).join(', ')})`);
    if (sink.includes(key)) throw new ConfigError('MESSENGER_SINK', `lists ${name} twice`);
    if (accounts[key]) throw new ConfigError('MESSENGER_SINK', `lists ${name}, which has a working account (${key}_ID_INSTANCE): a messenger uses one or the other`);
    sink.push(key);
  }
  return sink;
}
