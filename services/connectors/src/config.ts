import { busConfig, busEnvShape, ConfigError, envField, grpcServiceConfig, grpcTarget, grpcServiceEnvShape, parseSecretKeys, readEnv, type BusConfig, type Env, type GrpcServiceConfig } from '@rrs/runtime';
import { z } from 'zod';

/** How the workers pace themselves; tests shorten the delays. */
export interface ConnectorPolicy {
  /** Between two reconciliations of a connector. */
  syncIntervalMs: number;
  /** Reconciliation re-reads this much before its cursor (clock skew, deals saved late). */
  syncOverlapMs: number;
  /** Deals (inbox) and write-backs processed at once per replica. */
  concurrency: number;
  /** Attempts of an inbox event or a write-back before it is given up (failed, visible in the status). */
  maxAttempts: number;
  /** Backoff between attempts: min(maxMs, baseMs · 2^(attempt-1)). */
  retryBaseMs: number;
  retryMaxMs: number;
  /** A claimed event or write-back is retried after this when its worker vanished. */
  leaseMs: number;
  /** Per CRM request. */
  httpTimeoutMs: number;
  /** Waits for a rate-limit token, and in-call retries after 429/503, before the attempt is rescheduled. */
  maxRateWaitMs: number;
  /** amoCRM: requests per second per account (its documented limit is 7). */
  amocrmPerSecond: number;
  /** Bitrix24: requests per second per portal (the leaky bucket drains 2 per second on most plans). */
  bitrix24PerSecond: number;
  /** Processed inbox events are deleted after this. */
  eventRetentionMs: number;
}

/**
 * The service's own amoCRM integration, for owners who connect amoCRM from the console through its
 * OAuth consent (docs/connectors.md, "Connecting from the console").
 */
export interface AmoCrmOAuthApp {
  clientId: string;
  clientSecret: string;
  /** The integration's Redirect URI: the console (`<PUBLIC_BASE_URL>/app/`), which hands the code back. */
  redirectUri: string;
  /** amoCRM's authorization page. */
  authorizeUrl: string;
}

export const DEFAULT_AMOCRM_AUTHORIZE_URL = 'https://www.amocrm.ru/oauth';

export interface ConnectorsConfig extends GrpcServiceConfig, BusConfig {
  hooksHost: string;
  hooksPort: number;
  contactsAddress: string;
  schedulerAddress: string;
  redisUrl?: string;
  /** Base of the inbound URLs handed to CRMs; the ingress routes `/hooks/crm` of it to this service. */
  publicBaseUrl: string;
  /** Keys of the credential box (CONNECTOR_SECRET_KEYS), the first one encrypting. */
  secretKeys: Buffer[];
  /** Dev setting: CRM addresses may be plain http (local fakes). Never in production. */
  allowHttpCrm: boolean;
  policy: ConnectorPolicy;
  /** Unset: amoCRM is connected only with a token (admin API, CLI). */
  amoCrmOAuth?: AmoCrmOAuthApp;
}

const DAY_MS = 24 * 3_600_000;

export const DEFAULT_CONNECTOR_POLICY: ConnectorPolicy = {
  syncIntervalMs: 5 * 60_000,
  syncOverlapMs: 10 * 60_000,
  concurrency: 4,
  maxAttempts: 12,
  retryBaseMs: 30_000,
  retryMaxMs: 3_600_000,
  leaseMs: 120_000,
  httpTimeoutMs: 15_000,
  maxRateWaitMs: 5_000,
  amocrmPerSecond: 7,
  bitrix24PerSecond: 2,
  eventRetentionMs: 30 * DAY_MS,
};

/** The variables of the service's own amoCRM integration (also read by the all-in-one). */
export const amoCrmOAuthEnvShape = {
  AMOCRM_CLIENT_ID: z.string().min(1).max(200).optional(),
  AMOCRM_CLIENT_SECRET: z.string().min(1).max(4096).optional(),
  AMOCRM_REDIRECT_URI: envField.url(['http', 'https']).optional(),
  AMOCRM_OAUTH_URL: envField.url(['http', 'https']).default(DEFAULT_AMOCRM_AUTHORIZE_URL),
};

/** The amoCRM integration of those variables; the console (`<publicBaseUrl>/app/`) is the default Redirect URI. */
export function amoCrmOAuthOf(vars: { AMOCRM_CLIENT_ID?: string; AMOCRM_CLIENT_SECRET?: string; AMOCRM_REDIRECT_URI?: string; AMOCRM_OAUTH_URL: string }, publicBaseUrl: string): AmoCrmOAuthApp | undefined {
  if ((vars.AMOCRM_CLIENT_ID === undefined) !== (vars.AMOCRM_CLIENT_SECRET === undefined)) {
    throw new ConfigError(vars.AMOCRM_CLIENT_ID === undefined ? 'AMOCRM_CLIENT_ID' : 'AMOCRM_CLIENT_SECRET', 'the amoCRM integration needs both its ID and its secret key');
  }
  if (!vars.AMOCRM_CLIENT_ID) return undefined;
  return { clientId: vars.AMOCRM_CLIENT_ID, clientSecret: vars.AMOCRM_CLIENT_SECRET!, redirectUri: vars.AMOCRM_REDIRECT_URI ?? `${publicBaseUrl.replace(/\/+$/, '')}/app/`, authorizeUrl: vars.AMOCRM_OAUTH_URL };
}

const hostPort = grpcTarget;

export function buildConfig(env: Env): ConnectorsConfig {
  const vars = readEnv(
    {
      ...grpcServiceEnvShape,
      GRPC_PORT: envField.port(50054),
      OPS_PORT: envField.port(9471),
      ...busEnvShape,
      HOOKS_HOST: envField.host(),
      HOOKS_PORT: envField.port(8090),
      NODE_ENV: envField.nodeEnv(),
      CONTACTS_ADDR: hostPort().default('127.0.0.1:50051'),
      SCHEDULER_ADDR: hostPort().default('127.0.0.1:50052'),
      REDIS_URL: envField.url(['redis', 'rediss']).optional(),
      PUBLIC_BASE_URL: envField.url(['http', 'https']).default('http://localhost:8080'),
      CONNECTOR_SECRET_KEYS: z.string().optional(),
      CONNECTOR_ALLOW_HTTP_CRM: envField.bool(false),
      CONNECTOR_SYNC_INTERVAL_MS: envField.int(DEFAULT_CONNECTOR_POLICY.syncIntervalMs, 1_000),
      CONNECTOR_SYNC_OVERLAP_MS: envField.int(DEFAULT_CONNECTOR_POLICY.syncOverlapMs, 0),
      CONNECTOR_CONCURRENCY: envField.int(DEFAULT_CONNECTOR_POLICY.concurrency, 1),
      CONNECTOR_MAX_ATTEMPTS: envField.int(DEFAULT_CONNECTOR_POLICY.maxAttempts, 1),
      CONNECTOR_RETRY_BASE_MS: envField.int(DEFAULT_CONNECTOR_POLICY.retryBaseMs, 100),
      CONNECTOR_RETRY_MAX_MS: envField.int(DEFAULT_CONNECTOR_POLICY.retryMaxMs, 100),
      CONNECTOR_HTTP_TIMEOUT_MS: envField.int(DEFAULT_CONNECTOR_POLICY.httpTimeoutMs, 100),
      CONNECTOR_AMOCRM_REQUESTS_PER_SECOND: envField.int(DEFAULT_CONNECTOR_POLICY.amocrmPerSecond, 1),
      CONNECTOR_BITRIX24_REQUESTS_PER_SECOND: envField.int(DEFAULT_CONNECTOR_POLICY.bitrix24PerSecond, 1),
      CONNECTOR_EVENT_RETENTION_DAYS: envField.int(30, 1),
      ...amoCrmOAuthEnvShape,
    },
    env,
  );
  if (vars.NODE_ENV === 'production' && vars.CONNECTOR_ALLOW_HTTP_CRM) {
    throw new ConfigError('CONNECTOR_ALLOW_HTTP_CRM', 'plain-http CRM addresses are a development setting and are refused when NODE_ENV=production');
  }
  const publicBaseUrl = vars.PUBLIC_BASE_URL.replace(/\/+$/, '');
  return {
    ...grpcServiceConfig(vars),
    amoCrmOAuth: amoCrmOAuthOf(vars, publicBaseUrl),
    ...busConfig(vars),
    hooksHost: vars.HOOKS_HOST,
    hooksPort: vars.HOOKS_PORT,
    contactsAddress: vars.CONTACTS_ADDR,
    schedulerAddress: vars.SCHEDULER_ADDR,
    redisUrl: vars.REDIS_URL,
    publicBaseUrl,
    secretKeys: parseSecretKeys(vars.CONNECTOR_SECRET_KEYS, 'CONNECTOR_SECRET_KEYS'),
    allowHttpCrm: vars.CONNECTOR_ALLOW_HTTP_CRM,
    policy: {
      ...DEFAULT_CONNECTOR_POLICY,
      syncIntervalMs: vars.CONNECTOR_SYNC_INTERVAL_MS,
      syncOverlapMs: vars.CONNECTOR_SYNC_OVERLAP_MS,
      concurrency: vars.CONNECTOR_CONCURRENCY,
      maxAttempts: vars.CONNECTOR_MAX_ATTEMPTS,
      retryBaseMs: vars.CONNECTOR_RETRY_BASE_MS,
      retryMaxMs: vars.CONNECTOR_RETRY_MAX_MS,
      httpTimeoutMs: vars.CONNECTOR_HTTP_TIMEOUT_MS,
      amocrmPerSecond: vars.CONNECTOR_AMOCRM_REQUESTS_PER_SECOND,
      bitrix24PerSecond: vars.CONNECTOR_BITRIX24_REQUESTS_PER_SECOND,
      eventRetentionMs: vars.CONNECTOR_EVENT_RETENTION_DAYS * DAY_MS,
    },
  };
}
