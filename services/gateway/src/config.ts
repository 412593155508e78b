import type { Plan } from '@rrs/proto';
import { ConfigError, readEnv, envField, type Env } from '@rrs/runtime';
import { z } from 'zod';
import type { RateLimitConfig } from './rateLimit';
import type { FailureKind, FailureRule } from './addressLimits';

export interface GatewayConfig {
  host: string;
  port: number;
  contactsAddress: string;
  schedulerAddress: string;
  /** The webhooks service (endpoint management). */
  webhooksAddress: string;
  /** The connectors service (CRM connectors, managed through the admin API). */
  connectorsAddress: string;
  /** Absolute base of public links (`/r/<token>`), e.g. `https://reviews.example.com`. */
  publicBaseUrl: string;
  /** Bearer tokens of the account admin API (ADMIN_TOKEN, comma-separated; any one admits); unset = admin API disabled. */
  adminTokens?: string[];
  /** The ops port (METRICS_PORT): `/metrics`, `/healthz`, `/readyz`. The public port never serves `/metrics`. */
  opsPort: number;
  opsHost: string;
  /** Unset = in-memory rate limits and auth cache (single replica only). */
  redisUrl?: string;
  /** Prefix of every Redis key the gateway writes (rate-limit buckets, auth cache). */
  redisKeyPrefix: string;
  /** How long a key → organization lookup is cached; at most 5000 (a revoked key stops within 5 s). */
  authCacheTtlMs: number;
  rateLimits: RateLimitConfig;
  /** Per-address failure limits; unset = ADDRESS_FAILURE_RULES (the documented numbers). Tests that send many bad keys on purpose raise them. */
  addressFailureRules?: Partial<Record<FailureKind, FailureRule>>;
  /** The bus holding the channel catalog (KV bucket `channels`) that running senders announce. */
  natsUrl: string;
  busPrefix: string;
  /** TTL of the channel catalog bucket; must match the senders' CHANNEL_TTL_MS. */
  channelTtlMs: number;
  logLevel: string;
  /** The HTTP server's limits against slow or many clients (docs/security.md, "Connections"). */
  http: HttpLimits;
  /**
   * Which proxies in front of the gateway are trusted for the client address and protocol
   * (express `trust proxy`): false (none, the default), a hop count, or addresses/CIDRs.
   */
  trustProxy: TrustProxy;
  /** DNS servers the sender-domain check asks (DNS_RESOLVER); empty = the system's resolver. */
  dnsServers: string[];
}

export type TrustProxy = false | number | string[];

export interface HttpLimits {
  /** A request (headers and body) must arrive within this; a slow client is answered 408 and closed. */
  requestTimeoutMs: number;
  /** The headers must arrive within this. */
  headersTimeoutMs: number;
  /** Connections open at once; more are closed at once (a replica protects its sockets and memory). */
  maxConnections: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = { requestTimeoutMs: 30_000, headersTimeoutMs: 10_000, maxConnections: 4_096 };

/** `false`, a hop count (`1` behind one ingress), or comma-separated addresses/CIDRs/`loopback`; `true` (trust anyone) is refused. */
export const trustProxyField = () =>
  z
    .string()
    .default('false')
    .transform((value, ctx): TrustProxy => {
      const text = value.trim();
      if (text === '' || text === 'false' || text === '0') return false;
      if (/^\d{1,2}$/.test(text)) return Number(text);
      if (text === 'true') {
        ctx.addIssue({ code: 'custom', message: 'true would trust any client to set its own address; give the hop count (e.g. 1) or the proxy addresses' });
        return z.NEVER;
      }
      const list = text.split(',').map((item) => item.trim()).filter(Boolean);
      if (list.some((item) => !/^[\w.:/-]+$/.test(item))) {
        ctx.addIssue({ code: 'custom', message: 'must be false, a hop count, or comma-separated addresses/CIDRs (loopback, 10.0.0.0/8, …)' });
        return z.NEVER;
      }
      return list;
    });

/**
 * DNS_RESOLVER: the DNS server(s) the sender-domain check asks, `ip` or `ip:port` (IPv6 as `[addr]:port`),
 * comma-separated, tried in order; unset = the system's resolver (/etc/resolv.conf).
 */
export const dnsResolverField = () =>
  z
    .string()
    .default('')
    .transform((value, ctx) => {
      const servers = value.split(',').map((server) => server.trim()).filter(Boolean);
      for (const server of servers) {
        if (!/^(?:\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?|\[[0-9a-fA-F:]+\](?::\d{1,5})?|[0-9a-fA-F:]+)$/.test(server)) {
          ctx.addIssue({ code: 'custom', message: `${JSON.stringify(server)} is not a DNS server address: give ip or ip:port ([ipv6]:port), comma-separated` });
          return z.NEVER;
        }
      }
      return servers;
    });

/** Where the webhooks service listens unless WEBHOOKS_ADDR says otherwise. */
export const DEFAULT_WEBHOOKS_ADDR = '127.0.0.1:50053';
/** Where the connectors service listens unless CONNECTORS_ADDR says otherwise. */
export const DEFAULT_CONNECTORS_ADDR = '127.0.0.1:50054';

/** Where the gateway serves `/metrics` unless METRICS_PORT says otherwise (9464-9471 are the other services' ops ports). */
export const DEFAULT_METRICS_PORT = 9472;

/**
 * ADMIN_TOKEN: one token, or several separated by commas so a new one can be added before the old one
 * is removed (rotation without a gap). Each at least 16 characters, no spaces.
 */
export const adminTokensField = () =>
  z
    .string()
    .transform((value, ctx) => {
      const tokens = value.split(',').map((token) => token.trim()).filter(Boolean);
      if (tokens.length === 0 || tokens.some((token) => token.length < 16 || /\s/.test(token))) {
        ctx.addIssue({ code: 'custom', message: 'must be one or more comma-separated tokens of at least 16 characters without spaces' });
        return z.NEVER;
      }
      return [...new Set(tokens)];
    })
    .optional();

/** The admin API's two variables, read the same way by the gateway and the all-in-one. */
export const adminEnvShape = () => ({
  ADMIN_TOKEN: adminTokensField(),
  /** `on` / `off`; unset = on when ADMIN_TOKEN is given (the all-in-one: on). */
  ADMIN_API: z.enum(['on', 'off']).optional(),
});

/**
 * The admin tokens a process runs with: the given ones, `generate` (development all-in-one only: one is
 * made and printed), or undefined (the admin API does not exist). In production a token is never
 * generated: the admin API on without ADMIN_TOKEN stops the start, naming the variable.
 */
export function adminTokensOf(
  vars: { ADMIN_TOKEN?: string[]; ADMIN_API?: 'on' | 'off' },
  mode: { production: boolean; onByDefault: boolean },
): string[] | 'generate' | undefined {
  if (vars.ADMIN_API === 'off') return undefined;
  if (vars.ADMIN_TOKEN) return vars.ADMIN_TOKEN;
  if (vars.ADMIN_API === undefined && !mode.onByDefault) return undefined;
  if (mode.production) throw new ConfigError('ADMIN_TOKEN', 'is required in production while the admin API is on (a token is never generated there); give one, or set ADMIN_API=off');
  if (mode.onByDefault) return 'generate';
  throw new ConfigError('ADMIN_TOKEN', 'is required when ADMIN_API=on');
}

const address = () => z.string().regex(/^[^:\s]+:\d{1,5}$/, 'must be host:port');

export function buildConfig(env: Env): GatewayConfig {
  const e = readEnv(
    {
      HOST: envField.host(),
      PORT: envField.port(8080),
      CONTACTS_ADDR: address().default('127.0.0.1:50051'),
      SCHEDULER_ADDR: address().default('127.0.0.1:50052'),
      WEBHOOKS_ADDR: address().default(DEFAULT_WEBHOOKS_ADDR),
      CONNECTORS_ADDR: address().default(DEFAULT_CONNECTORS_ADDR),
      PUBLIC_BASE_URL: envField.url(['http', 'https']).optional(),
      ...adminEnvShape(),
      NODE_ENV: envField.nodeEnv(),
      METRICS_HOST: envField.host(),
      METRICS_PORT: envField.port(DEFAULT_METRICS_PORT),
      REDIS_URL: envField.url(['redis', 'rediss']).optional(),
      REDIS_KEY_PREFIX: z.string().regex(/^[\w:.-]{0,64}$/, 'must be up to 64 letters, digits, _ : . -').default('rrs:gw:'),
      AUTH_CACHE_TTL_MS: z.coerce.number().int().min(0).max(5000, 'must be at most 5000 so a revoked key stops within 5 s').default(4000),
      RATE_LIMIT_WINDOW_SECONDS: envField.int(60, 1),
      RATE_LIMIT_TRIAL: envField.int(60, 1),
      RATE_LIMIT_STANDARD: envField.int(600, 1),
      RATE_LIMIT_PRO: envField.int(3000, 1),
      NATS_URL: envField.url(['nats', 'tls']).default('nats://127.0.0.1:4222'),
      BUS_PREFIX: envField.busPrefix(),
      CHANNEL_TTL_MS: envField.int(30_000, 1_000),
      LOG_LEVEL: envField.logLevel(),
      TRUST_PROXY: trustProxyField(),
      DNS_RESOLVER: dnsResolverField(),
      HTTP_REQUEST_TIMEOUT_MS: envField.int(DEFAULT_HTTP_LIMITS.requestTimeoutMs, 1_000),
      HTTP_HEADERS_TIMEOUT_MS: envField.int(DEFAULT_HTTP_LIMITS.headersTimeoutMs, 1_000),
      HTTP_MAX_CONNECTIONS: envField.int(DEFAULT_HTTP_LIMITS.maxConnections, 1),
    },
    env,
  );
  return {
    host: e.HOST,
    port: e.PORT,
    contactsAddress: e.CONTACTS_ADDR,
    schedulerAddress: e.SCHEDULER_ADDR,
    webhooksAddress: e.WEBHOOKS_ADDR,
    connectorsAddress: e.CONNECTORS_ADDR,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/$/, ''),
    adminTokens: adminTokensOf(e, { production: e.NODE_ENV === 'production', onByDefault: false }) as string[] | undefined,
    opsPort: e.METRICS_PORT,
    opsHost: e.METRICS_HOST,
    redisUrl: e.REDIS_URL,
    redisKeyPrefix: e.REDIS_KEY_PREFIX,
    authCacheTtlMs: e.AUTH_CACHE_TTL_MS,
    rateLimits: {
      windowSeconds: e.RATE_LIMIT_WINDOW_SECONDS,
      perPlan: { trial: e.RATE_LIMIT_TRIAL, standard: e.RATE_LIMIT_STANDARD, pro: e.RATE_LIMIT_PRO },
    },
    http: { requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS, headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS, maxConnections: e.HTTP_MAX_CONNECTIONS },
    trustProxy: e.TRUST_PROXY,
    dnsServers: e.DNS_RESOLVER,
    natsUrl: e.NATS_URL,
    busPrefix: e.BUS_PREFIX,
    channelTtlMs: e.CHANNEL_TTL_MS,
    logLevel: e.LOG_LEVEL,
  };
}
