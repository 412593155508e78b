import express, { type NextFunction, type Request, type Response } from 'express';
import { randomUUID } from 'node:crypto';
import { DomainError, counter, histogram, LATENCY_BUCKETS, serveOps, type Health, type Logger } from '@rrs/runtime';
import { accountApi } from './account/api';
import { busSystemEmails, type SystemEmails } from './account/systemEmails';
import { consoleRouter } from './account/consoleFiles';
import { createSignInThrottle, type SignInThrottle } from './account/signInThrottle';
import type { ChannelCatalogSource } from './catalog/channelCatalog';
import { adminApi, adminApiDisabled } from './admin/api';
import { createFailureLimiters, type FailureLimiters } from './addressLimits';
import type { GatewayClients } from './clients';
import { renderDocsPage } from './docsPage';
import { reviewFormRouter, type BotLinkSource, type RatingOutbox } from './form';
import { serveApi } from './http/api';
import type { Authenticator } from './http/auth';
import { bodyError } from './http/body';
import { hostGuard } from './http/hostGuard';
import { notFound, statusOf } from './http/errors';
import { sendProblem } from './http/problem';
import type { RouteSource } from './http/route';
import type { RateLimiter } from './rateLimit';
import { publicApi } from './routes/api';
import { txtLookup } from './useCases/deliverability';

export interface AppDeps {
  authenticate: Authenticator;
  rateLimiter: RateLimiter;
  /** The public `/api/v1` routes (normally `publicRoutes(...)` from ./routes). */
  routes: readonly RouteSource[];
  clients: GatewayClients;
  /** Absolute base URL the gateway is reached at, e.g. `https://reviews.example.com`. */
  publicBaseUrl: string;
  /** Bearer tokens of the account admin API (any one admits); unset or empty = the admin API answers 404. */
  adminTokens?: readonly string[];
  /** Failures counted per client address (wrong admin tokens, …), shared across replicas with Redis; unset = in memory. */
  failureLimiters?: FailureLimiters;
  /** Routers of the all-in-one mode only (the dev inbox at /dev/*); a distributed gateway has none. */
  extraRouters?: express.Router[];
  /** Failed sign-ins of the account API (account/signInThrottle.ts); unset = counted in memory. */
  signInThrottle?: SignInThrottle;
  /** The live channel catalog, for the console's channels page; unset = none running. */
  channelCatalog?: ChannelCatalogSource;
  /** Where the review form leaves ratings the scheduler cannot take now (see form/ratingOutbox.ts). */
  ratings?: RatingOutbox;
  /** The official bots the review form's thank-you page offers (from the channel catalog); unset = none. */
  botLinks?: BotLinkSource;
  /** Invitations and password reset links by email (account/systemEmails.ts); unset = none are emailed (logged). */
  systemEmails?: SystemEmails;
  /** DNS servers the sender-domain check asks (DNS_RESOLVER, `ip[:port]`); unset or empty = the system's. */
  dnsServers?: readonly string[];
  health: Health;
  logger: Logger;
}

const httpDuration = histogram({
  name: 'http_server_request_duration_seconds',
  help: 'HTTP requests handled by the gateway, by method, route and status.',
  labelNames: ['method', 'route', 'status'],
  buckets: LATENCY_BUCKETS,
});
const httpErrors = counter({ name: 'http_server_errors_total', help: 'Error responses by code.', labelNames: ['status', 'code'] });

const REQUEST_ID = /^[\w.:-]{1,128}$/;
/** The probes the public port answers too (the kubelet's); `/metrics` is served only on the ops port (METRICS_PORT). */
const PROBE_PATHS = new Set(['/healthz', '/readyz']);

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // Problem `type`s link to this server's docs page (see http/problem.ts).
  app.locals.publicBaseUrl = deps.publicBaseUrl;
  app.set('etag', false);

  // The front door, one middleware for every request (each express layer costs a match and a hop):
  // the request id and the request's metrics and log line, then the probes, then the host guard.
  const guardHost = hostGuard(deps.publicBaseUrl);
  app.use((req: Request, res: Response, next: NextFunction) => {
    // A caller's request id is kept when it is sane, so one id follows a request across systems.
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    res.locals.requestId = id;
    res.setHeader('x-request-id', id);
    const started = process.hrtime.bigint();
    const path = req.path;
    res.on('finish', () => {
      const route = (res.locals.route as string | undefined) ?? (req.route ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched');
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      httpDuration.observe({ method: req.method, route, status: String(res.statusCode) }, seconds);
      // One line per request, joined to its trace by the logger's mixin; probes and scrapes are not logged.
      if (!PROBE_PATHS.has(path)) {
        deps.logger.info({ requestId: id, method: req.method, route, status: res.statusCode, durationMs: Math.round(seconds * 1e4) / 10 }, 'request');
      }
    });
    // The probes are answered before the host guard: the kubelet calls them by pod address.
    if (!PROBE_PATHS.has(path)) return guardHost(req, res, next);
    serveOps(deps.health, req, res).then((handled) => (handled ? undefined : guardHost(req, res, next)), next);
  });

  const failureLimiters = deps.failureLimiters ?? createFailureLimiters({ keyPrefix: '' });
  const publicApiServed = serveApi(publicApi({ ...deps, failures: failureLimiters.apiKeyAuth }));
  app.get(['/docs', '/api/v1/docs'], (_req, res) => {
    res.locals.route = '/docs';
    res.setHeader('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'");
    res.type('text/html').send(renderDocsPage(publicApiServed.document()));
  });
  app.use('/api/v1', publicApiServed.handler);
  const adminTokens = deps.adminTokens ?? [];
  const deliverability = { channelCatalog: deps.channelCatalog, lookup: txtLookup(deps.dnsServers) };
  const systemEmails = deps.systemEmails ?? busSystemEmails(undefined, deps.publicBaseUrl, deps.logger);
  app.use(
    '/admin/v1',
    adminTokens.length > 0 ? serveApi(adminApi(deps.clients, { tokens: adminTokens, failures: failureLimiters.adminAuth, logger: deps.logger, publicBaseUrl: deps.publicBaseUrl, systemEmails, deliverability })).handler : adminApiDisabled,
  );
  const signInThrottle = deps.signInThrottle ?? createSignInThrottle({ keyPrefix: 'rrs:gw:', logger: deps.logger });
  // Account answers carry secrets shown once (API keys, invitation links) and the CSRF token: never cached.
  app.use('/account/v1', (_req, res, next) => {
    res.setHeader('Cache-Control', 'no-store');
    next();
  });
  app.use('/account/v1', serveApi(accountApi({ clients: deps.clients, publicBaseUrl: deps.publicBaseUrl, rateLimiter: deps.rateLimiter, signInThrottle, channelCatalog: deps.channelCatalog, systemEmails, logger: deps.logger, tokenFailures: failureLimiters.accountToken, deliverability })).handler);
  app.use(consoleRouter());
  app.use(reviewFormRouter({ scheduler: deps.clients.scheduler, logger: deps.logger, ratings: deps.ratings, failures: failureLimiters.linkToken, botLinks: deps.botLinks }));
  for (const router of deps.extraRouters ?? []) app.use(router);

  app.use((req: Request, _res: Response, next: NextFunction) => {
    next(notFound(`no route for ${req.method} ${req.path}`));
  });

  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const problem = asDomainError(err, deps.logger, String(res.locals.requestId));
    httpErrors.inc({ status: String(statusOf(problem)), code: problem.code });
    if (res.headersSent) return;
    sendProblem(req, res, problem);
  });
  return app;
}

/** Any error as the domain error it is answered with; a fault of ours (5xx, or not a domain error) is logged. */
function asDomainError(err: unknown, logger: Logger, requestId: string): DomainError {
  if (err instanceof DomainError) {
    if (statusOf(err) >= 500) logger.error({ err, requestId }, 'request failed');
    return err;
  }
  const fromBody = bodyError(err);
  if (fromBody) return fromBody;
  logger.error({ err, requestId }, 'unexpected error');
  return new DomainError('internal', 'internal', 'an unexpected error occurred; the request id identifies it in the logs');
}
