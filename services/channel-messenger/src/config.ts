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
}

export interface MessengerConfig extends SenderBaseConfig {
  /** Unset = sink provider for that messenger (all-in-one mode). */
  max?: MessengerAccount;
  telegram?: MessengerAccount;
  /** Unset = in-memory rate limits (one replica only). */
  redisUrl?: string;
}

function account(vars: Record<string, unknown>, prefix: 'MAX' | 'TELEGRAM', defaults: { perAccount: number }): MessengerAccount | undefined {
  const id = vars[`${prefix}_ID_INSTANCE`] as string | undefined;
  const token = vars[`${prefix}_API_TOKEN`] as string | undefined;
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
  };
}

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
      TELEGRAM_API_URL: envField.url(['http', 'https']).default('https://api.green-api.com/v3'),
      TELEGRAM_ID_INSTANCE: z.string().regex(/^\d+$/, 'must be the numeric instance id').optional(),
      TELEGRAM_API_TOKEN: z.string().min(8).optional(),
      TELEGRAM_RATE_PER_SECOND: envField.int(30, 1),
      MESSENGER_TIMEOUT_MS: envField.int(10_000, 100),
      /** GREEN-API recommends asking the instance state once a minute; never more than every 5 s. */
      MESSENGER_HEALTH_INTERVAL_MS: envField.int(60_000, 5_000),
      MESSENGER_ACCOUNT_CACHE_MS: envField.int(86_400_000, 0),
      REDIS_URL: envField.url(['redis', 'rediss']).optional(),
    },
    env,
  );
  return {
    ...senderBaseConfig(vars),
    max: account(vars, 'MAX', { perAccount: vars.MAX_RATE_PER_SECOND }),
    telegram: account(vars, 'TELEGRAM', { perAccount: vars.TELEGRAM_RATE_PER_SECOND }),
    redisUrl: vars.REDIS_URL,
  };
}
