import http from 'node:http';
import type { Router } from 'express';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { createGrpcClient, reachAtStart, type Bus, type ServiceContext } from '@rrs/runtime';
import { connectorsV1, contactsV1, schedulerV1, webhooksV1 } from '@rrs/proto';
import { createApp } from './app';
import { clientErrorHandler } from './http/clientError';
import type { Authenticator } from './http/auth';
import { cachedAuthenticator } from './authCache';
import { DEFAULT_CONNECTORS_ADDR, DEFAULT_HTTP_LIMITS, DEFAULT_WEBHOOKS_ADDR, type GatewayConfig } from './config';
import { botLinksOf, busRatingOutbox } from './form';
import { busSystemEmails } from './account/systemEmails';
import { createSignInThrottle } from './account/signInThrottle';
import { createRateLimiter, DEFAULT_RATE_LIMITS } from './rateLimit';
import { createFailureLimiters } from './addressLimits';
import { publicRoutes } from './routes';
import type { GatewayClients } from './clients';
import type { ChannelCatalogSource } from './catalog/channelCatalog';

export interface RunningGateway {
  port: number;
  url: string;
  clients: GatewayClients;
}

export type GatewayStartConfig = Pick<GatewayConfig, 'host' | 'port' | 'contactsAddress' | 'schedulerAddress' | 'publicBaseUrl'> &
  Partial<Pick<GatewayConfig, 'webhooksAddress' | 'connectorsAddress' | 'adminTokens' | 'redisUrl' | 'redisKeyPrefix' | 'authCacheTtlMs' | 'rateLimits' | 'http' | 'trustProxy' | 'addressFailureRules' | 'dnsServers'>>;

export interface GatewayDeps {
  /** gRPC clients to use instead of connecting to the configured addresses (tests wrap them). */
  clients?: GatewayClients;
  /** The live channel catalog (see catalog/channelCatalog.ts); unset = an empty catalog. */
  channelCatalog?: ChannelCatalogSource;
  /** All-in-one mode only: extra routers, e.g. the dev inbox of the sink providers. */
  extraRouters?: Router[];
  /**
   * The bus: where the review form leaves a rating while the scheduler cannot take it (stream RATINGS).
   * Unset, such a rating gets the form's keep-trying page until the scheduler is back.
   */
  bus?: Bus;
}

export async function startGateway(config: GatewayStartConfig, ctx: ServiceContext, deps: GatewayDeps = {}): Promise<RunningGateway> {
  let clients = deps.clients;
  if (!clients) {
    const contacts = createGrpcClient(contactsV1.ContactsServiceClient, config.contactsAddress);
    ctx.lifecycle.onStop('contacts client', () => contacts.close());
    const scheduler = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, config.schedulerAddress);
    ctx.lifecycle.onStop('scheduler client', () => scheduler.close());
    const webhooks = createGrpcClient(webhooksV1.WebhooksServiceClient, config.webhooksAddress ?? DEFAULT_WEBHOOKS_ADDR);
    ctx.lifecycle.onStop('webhooks client', () => webhooks.close());
    const connectors = createGrpcClient(connectorsV1.ConnectorsServiceClient, config.connectorsAddress ?? DEFAULT_CONNECTORS_ADDR);
    ctx.lifecycle.onStop('connectors client', () => connectors.close());
    clients = { contacts: contacts.client, scheduler: scheduler.client, webhooks: webhooks.client, connectors: connectors.client };
  }
  const directory = clients.contacts;

  let redis: Redis | undefined;
  if (config.redisUrl) {
    // No offline queue: while Redis is away, calls fail at once and the fallbacks answer (directory
    // lookups, the in-memory insurance limiter) instead of requests piling up.
    // Auto-pipelining sends the commands of concurrent requests in one write: far fewer syscalls under load.
    redis = new Redis(config.redisUrl, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, enableAutoPipelining: true, connectionName: 'rrs-gateway' });
    redis.on('error', (err) => ctx.logger.warn({ err }, 'redis connection error'));
    const r = redis;
    ctx.lifecycle.onStop('gateway redis', async () => {
      await r.quit().catch(() => r.disconnect());
    });
    await reachAtStart({ variable: 'REDIS_URL', url: config.redisUrl, what: 'Redis' }, () => r.connect());
    // Without Redis the gateway keeps serving (in-memory rate limits, no shared auth cache): degraded, still ready.
    ctx.health.addCheck(
      'gateway-redis',
      async () => {
        await r.ping();
      },
      { required: false },
    );
  }
  const keyPrefix = config.redisKeyPrefix ?? 'rrs:gw:';

  const lookup: Authenticator = async (apiKey) => {
    const r = await directory.authenticate({ apiKey });
    const o = r.organization;
    if (!o) throw new Error('contacts answered Authenticate without an organization');
    // Only plain fields: the principal is cached as JSON, so it must survive the round trip unchanged.
    return {
      organization: { id: o.id, name: o.name, plan: o.plan, emailConfirmed: o.emailConfirmed, locale: o.locale, defaultRegion: o.defaultRegion, timeZone: o.timeZone },
      keyId: r.keyId,
      scopes: r.scopes,
    };
  };
  const authenticate = cachedAuthenticator(lookup, { ttlMs: config.authCacheTtlMs ?? 4000, redis, keyPrefix, logger: ctx.logger });
  const rateLimiter = createRateLimiter({ config: config.rateLimits ?? DEFAULT_RATE_LIMITS, redis, keyPrefix, logger: ctx.logger });
  const failureLimiters = createFailureLimiters({ redis, keyPrefix, logger: ctx.logger, rules: config.addressFailureRules });

  const app = createApp({
    authenticate,
    rateLimiter,
    signInThrottle: createSignInThrottle({ redis, keyPrefix, logger: ctx.logger }),
    routes: publicRoutes({ clients, publicBaseUrl: config.publicBaseUrl, channelCatalog: deps.channelCatalog }),
    clients,
    publicBaseUrl: config.publicBaseUrl,
    adminTokens: config.adminTokens,
    failureLimiters,
    extraRouters: deps.extraRouters,
    channelCatalog: deps.channelCatalog,
    ratings: deps.bus ? busRatingOutbox(deps.bus) : undefined,
    botLinks: deps.channelCatalog ? botLinksOf(deps.channelCatalog) : undefined,
    systemEmails: busSystemEmails(deps.bus, config.publicBaseUrl, ctx.logger),
    dnsServers: config.dnsServers,
    health: ctx.health,
    logger: ctx.logger,
  });
  app.set('trust proxy', config.trustProxy ?? false);
  const limits = config.http ?? DEFAULT_HTTP_LIMITS;
  const server = http.createServer(
    {
      requestTimeout: limits.requestTimeoutMs,
      headersTimeout: limits.headersTimeoutMs,
      // Node checks the two timeouts on this tick (30 s by default, longer than the timeouts themselves).
      connectionsCheckingInterval: Math.max(250, Math.min(30_000, Math.floor(limits.headersTimeoutMs / 4))),
    },
    app,
  );
  server.maxConnections = limits.maxConnections;
  server.on('clientError', clientErrorHandler(config.publicBaseUrl));
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  ctx.lifecycle.onStop('gateway HTTP server', () => stopHttpServer(server, SHUTDOWN_GRACE_MS));
  const port = (server.address() as AddressInfo).port;
  ctx.logger.info({ port }, 'gateway listening');
  return { port, url: `http://127.0.0.1:${port}`, clients };
}

const SHUTDOWN_GRACE_MS = 5_000;

/**
 * Stops taking requests and lets those in flight finish. Keep-alive connections would otherwise hold
 * the server open for their whole idle timeout: idle ones are closed at once and again as busy ones
 * go idle, a request arriving on one is answered with `Connection: close`, and whatever is still open
 * after the grace period is cut.
 */
export function stopHttpServer(server: http.Server, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    server.on('request', (_req, res: http.ServerResponse) => res.setHeader('connection', 'close'));
    const idle = setInterval(() => server.closeIdleConnections(), 250);
    const force = setTimeout(() => server.closeAllConnections(), graceMs);
    force.unref();
    server.close(() => {
      clearInterval(idle);
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}
