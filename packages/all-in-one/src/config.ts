import { join, resolve } from 'node:path';
import { readEnv, envField, type Env } from '@rrs/runtime';
import { z } from 'zod';
import { DEFAULT_MINUTE_MS, fastClock } from '@rrs/cascade-scheduler';

export interface AllInOneConfig {
  host: string;
  port: number;
  dataDir: string;
  /** Unset = embedded PostgreSQL in `dataDir/postgres`. */
  databaseUrl?: string;
  embeddedPostgresPort: number;
  /** Unset = the in-process bus. */
  natsUrl?: string;
  /** Unset = in-memory rate limiting and auth cache. */
  redisUrl?: string;
  demoApiKey?: string;
  adminToken?: string;
  publicBaseUrl: string;
  /** Length of one flow minute (`DELAY_MINUTE_MS`); below 60000 only outside production. */
  minuteMs: number;
  logLevel: string;
}

/** The repository root when run from a checkout (`packages/all-in-one/dist` or `src`). */
const REPO_ROOT = resolve(__dirname, '..', '..', '..');

export function buildConfig(env: Env): AllInOneConfig {
  const e = readEnv(
    {
      HOST: envField.host('127.0.0.1'),
      PORT: envField.port(8080),
      DATA_DIR: z.string().min(1).default(join(REPO_ROOT, '.data')),
      DATABASE_URL: envField.url(['postgres', 'postgresql']).optional(),
      EMBEDDED_PG_PORT: envField.port(54329),
      NATS_URL: envField.url(['nats', 'tls']).optional(),
      REDIS_URL: envField.url(['redis', 'rediss']).optional(),
      DEMO_API_KEY: z.string().regex(/^rrs_[0-9A-Za-z]{36}$/, 'must be an API key: rrs_ followed by 36 letters and digits').optional(),
      ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
      PUBLIC_BASE_URL: envField.url(['http', 'https']).optional(),
      DELAY_MINUTE_MS: z.coerce.number().int().min(1).max(DEFAULT_MINUTE_MS).optional(),
      NODE_ENV: envField.nodeEnv(),
      LOG_LEVEL: envField.logLevel(),
    },
    env,
  );
  return {
    host: e.HOST,
    port: e.PORT,
    dataDir: resolve(e.DATA_DIR),
    databaseUrl: e.DATABASE_URL,
    embeddedPostgresPort: e.EMBEDDED_PG_PORT,
    natsUrl: e.NATS_URL,
    redisUrl: e.REDIS_URL,
    demoApiKey: e.DEMO_API_KEY,
    adminToken: e.ADMIN_TOKEN,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/$/, ''),
    minuteMs: fastClock(e.DELAY_MINUTE_MS, e.NODE_ENV),
    logLevel: e.LOG_LEVEL,
  };
}
