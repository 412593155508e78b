import { join, resolve } from 'node:path';
import { readEnv, envField, parseSecretKeys, type Env } from '@rrs/runtime';
import { PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH } from '@rrs/proto';
import { z } from 'zod';
import { DEFAULT_MINUTE_MS, dispatchBoundEnvShape, dispatchBoundOf, fastClock, recipientQuotaEnvShape, recipientQuotasOf } from '@rrs/cascade-scheduler';
import { isWellFormedApiKey } from '@rrs/contacts';
import { amoCrmOAuthEnvShape, amoCrmOAuthOf, type AmoCrmOAuthApp } from '@rrs/connectors';
import { senderProvidersOf, type SenderProviders } from './senders';
import { adminEnvShape, adminTokensOf, DEFAULT_METRICS_PORT, trustProxyField, dnsResolverField, type TrustProxy } from '@rrs/gateway';

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
  /**
   * The admin API's tokens (ADMIN_TOKEN, comma-separated); `generate` = outside production without
   * ADMIN_TOKEN, one is made, kept in `dataDir` and printed; unset = the admin API is off (ADMIN_API=off).
   */
  adminTokens?: string[] | 'generate';
  /**
   * NODE_ENV=production: no dev inbox (/dev/*), no loopback webhook URLs, no generated admin token, a
   * flow minute of 60 s. Nothing switches these back on in production.
   */
  production: boolean;
  /** The ops port (METRICS_PORT): `/metrics`, `/healthz`, `/readyz`; the public port never serves `/metrics`. */
  opsPort: number;
  opsHost: string;
  /** The demo organization's console person (`DEMO_EMAIL`, default demo@example.com). */
  demoEmail?: string;
  /** Their password (`DEMO_PASSWORD`); unset = generated once and kept in `dataDir/demo.json`. */
  demoPassword?: string;
  /** Recipients per minute and per day by plan (RECIPIENT_QUOTA_*; default PLAN_RECIPIENT_QUOTAS of @rrs/proto). */
  recipientQuotas?: Record<'trial' | 'standard' | 'pro', { perMinute: number; perDay: number }>;
  /** The dispatcher's in-flight bound per channel (`DISPATCH_IN_FLIGHT_PER_CHANNEL`, `DISPATCH_IN_FLIGHT_TARGET_MS`), as in the scheduler. */
  dispatchInFlightPerChannel?: number;
  dispatchInFlightTargetMs?: number;
  publicBaseUrl: string;
  /** Length of one flow minute (`DELAY_MINUTE_MS`); below 60000 only outside production. */
  minuteMs: number;
  /** The key of the keyed hashes kept of erased people's opt-outs (`PERSON_HASH_KEY`); unset = one generated and kept in `dataDir`. */
  personHashKey?: string;
  /** Keys sealing the CRM connectors' credentials (`CONNECTOR_SECRET_KEYS`); unset = one generated and kept in `dataDir`. */
  connectorSecretKeys?: Buffer[];
  /** Keys sealing the webhook signing secrets (`WEBHOOK_SECRET_KEYS`); unset = one generated and kept in `dataDir`. */
  webhookSecretKeys?: Buffer[];
  /**
   * Which proxies in front may set the client address and protocol (`TRUST_PROXY`, read exactly as the
   * gateway reads it): behind a TLS proxy the session cookie gets `Secure` and per-address limits see
   * the client, not the proxy.
   */
  trustProxy?: TrustProxy;
  /** DNS servers the sender-domain check asks (DNS_RESOLVER, as the gateway reads it); empty = the system's. */
  dnsServers?: string[];
  /** CRM addresses on loopback over plain http (local fakes): outside production only. */
  allowHttpCrm: boolean;
  /** The service's own amoCRM integration (`AMOCRM_CLIENT_ID` …): owners connect amoCRM from the console through its consent. */
  amoCrmOAuth?: AmoCrmOAuthApp;
  logLevel: string;
  /**
   * The senders' providers, read by their own config functions (senderProvidersOf): unset = the sinks
   * (tests that build the config by hand).
   */
  senders?: SenderProviders;
}

/** The repository root when run from a checkout (`packages/all-in-one/dist` or `src`). */
const REPO_ROOT = resolve(__dirname, '..', '..', '..');

export function buildConfig(env: Env): AllInOneConfig {
  const vars = readEnv(
    {
      HOST: envField.host('127.0.0.1'),
      PORT: envField.port(8080),
      DATA_DIR: z.string().min(1).default(join(REPO_ROOT, '.data')),
      DATABASE_URL: envField.url(['postgres', 'postgresql']).optional(),
      EMBEDDED_PG_PORT: envField.port(54329),
      NATS_URL: envField.natsUrls().optional(),
      REDIS_URL: envField.url(['redis', 'rediss']).optional(),
      DEMO_API_KEY: z.string().refine(isWellFormedApiKey, 'must be an API key: rrs_ followed by 36 letters and digits, the last 6 a checksum').optional(),
      ...adminEnvShape(),
      ...recipientQuotaEnvShape(),
      ...dispatchBoundEnvShape(),
      METRICS_HOST: z.string().min(1).optional(),
      METRICS_PORT: envField.port(DEFAULT_METRICS_PORT),
      DEMO_EMAIL: z.email('must be an email address').default('demo@example.com'),
      DEMO_PASSWORD: z.string().min(PASSWORD_MIN_LENGTH, `must be at least ${PASSWORD_MIN_LENGTH} characters`).max(PASSWORD_MAX_LENGTH).optional(),
      PUBLIC_BASE_URL: envField.baseUrl().optional(),
      DELAY_MINUTE_MS: z.coerce.number().int().min(1).max(DEFAULT_MINUTE_MS).optional(),
      PERSON_HASH_KEY: z.string().min(16, 'must be at least 16 characters').optional(),
      CONNECTOR_SECRET_KEYS: z.string().optional(),
      WEBHOOK_SECRET_KEYS: z.string().optional(),
      ...amoCrmOAuthEnvShape,
      NODE_ENV: envField.nodeEnv(),
      LOG_LEVEL: envField.logLevel(),
      TRUST_PROXY: trustProxyField(),
      DNS_RESOLVER: dnsResolverField(),
    },
    env,
  );
  return {
    host: vars.HOST,
    port: vars.PORT,
    dataDir: resolve(vars.DATA_DIR),
    databaseUrl: vars.DATABASE_URL,
    embeddedPostgresPort: vars.EMBEDDED_PG_PORT,
    natsUrl: vars.NATS_URL,
    redisUrl: vars.REDIS_URL,
    demoApiKey: vars.DEMO_API_KEY,
    adminTokens: adminTokensOf(vars, { production: vars.NODE_ENV === 'production', onByDefault: true }),
    production: vars.NODE_ENV === 'production',
    // By default beside the public port, so a container publishing only PORT keeps metrics inside.
    opsHost: vars.METRICS_HOST ?? vars.HOST,
    opsPort: vars.METRICS_PORT,
    demoEmail: vars.DEMO_EMAIL,
    demoPassword: vars.DEMO_PASSWORD,
    recipientQuotas: recipientQuotasOf(vars),
    ...dispatchBoundOf(vars),
    publicBaseUrl: vars.PUBLIC_BASE_URL ?? `http://localhost:${vars.PORT}`,
    minuteMs: fastClock(vars.DELAY_MINUTE_MS, vars.NODE_ENV),
    personHashKey: vars.PERSON_HASH_KEY,
    connectorSecretKeys: vars.CONNECTOR_SECRET_KEYS === undefined ? undefined : parseSecretKeys(vars.CONNECTOR_SECRET_KEYS, 'CONNECTOR_SECRET_KEYS'),
    webhookSecretKeys: vars.WEBHOOK_SECRET_KEYS === undefined ? undefined : parseSecretKeys(vars.WEBHOOK_SECRET_KEYS, 'WEBHOOK_SECRET_KEYS'),
    trustProxy: vars.TRUST_PROXY,
    dnsServers: vars.DNS_RESOLVER,
    allowHttpCrm: vars.NODE_ENV !== 'production',
    amoCrmOAuth: amoCrmOAuthOf(vars, vars.PUBLIC_BASE_URL ?? `http://localhost:${vars.PORT}`),
    logLevel: vars.LOG_LEVEL,
    senders: senderProvidersOf(env),
  };
}
