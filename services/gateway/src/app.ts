import express, { type NextFunction, type Request, type Response } from 'express';
import { performance } from 'node:perf_hooks';
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
import { newRequestId } from './http/requestId';
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
/** Where the public API is mounted. */
const API_BASE = '/api/v1';
/** Paths express's router hands to the docs route rather than the API (`/api/v1/docs`, case-insensitive, with or without a trailing slash). */
const API_DOCS = /^\/api\/v1\/docs/i;

type DurationChild = ReturnType<typeof httpDuration.labels>;

/**
 * The request-duration histogram's child for a route, status and method, bound once per combination, so
 * a request observes without a labels object or prom-client's observer closure of its own. Bounded: the
 * routes are templates (or `unmatched`), and Node's parser accepts only its known methods and 3-digit statuses.
 */
function durationsOf(): (route: string, status: number, method: string) => DurationChild {
  const byRoute = new Map<string, Map<number, Map<string, DurationChild>>>();
  return (route, status, method) => {
    let byStatus = byRoute.get(route);
    if (!byStatus) byRoute.set(route, (byStatus = new Map()));
    let byMethod = byStatus.get(status);
    if (!byMethod) byStatus.set(status, (byMethod = new Map()));
    let child = byMethod.get(method);
    if (!child) byMethod.set(method, (child = httpDuration.labels(method, route, String(status))));
    return child;
  };
}

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // Problem `type`s link to this server's docs page (see http/problem.ts).
  app.locals.publicBaseUrl = deps.publicBaseUrl;
  app.set('etag', false);

  const failureLimiters = deps.failureLimiters ?? createFailureLimiters({ keyPrefix: '' });
  const publicApiServed = serveApi(publicApi({ ...deps, failures: failureLimiters.apiKeyAuth }));
  const serveApiRequest = publicApiServed.handler;

  // The request's metrics and log line, when its response is finished. One listener function for every
  // request (its state is the response's `locals`), not a closure per request.
  const durations = durationsOf();
  const recordRequest = (res: Response, logged: boolean): void => {
    const req = res.req;
    const route = (res.locals.route as string | undefined) ?? (req.route ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched');
    const seconds = (performance.now() - (res.locals.startedAt as number)) / 1000;
    durations(route, res.statusCode, req.method).observe(seconds);
    // One line per request, joined to its trace by the logger's mixin; the fields are built only when the line is written.
    if (logged && deps.logger.isLevelEnabled('info')) {
      deps.logger.info({ requestId: res.locals.requestId, method: req.method, route, status: res.statusCode, durationMs: Math.round(seconds * 1e4) / 10 }, 'request');
    }
  };
  // Probes and scrapes are not logged.
  function requestFinished(this: Response): void {
    recordRequest(this, true);
  }
  function probeFinished(this: Response): void {
    recordRequest(this, false);
  }

  // After the host guard: a request for the public API goes straight to it, as express's mount at
  // `/api/v1` would take it (below). Express's router would first try the docs route, then match the
  // mount, parse the URL again and run its parameter steps for each layer (in the bench's CPU profile,
  // the router's own time a request fell by more than half without them). Only the exact lower-case
  // prefix `/api/v1/` goes this way; the docs page, `/api/v1` itself, other spellings and absolute-form
  // URLs take the router, which answers them as before (test/dispatch.test.ts checks both ways alike).
  const refuseHost = hostGuard(deps.publicBaseUrl);
  const pastHostGuard = (req: Request, res: Response, next: NextFunction): void => {
    const refusal = refuseHost(req);
    if (refusal) return next(refusal);
    if (!req.url.startsWith(`${API_BASE}/`) || API_DOCS.test(req.url)) return next();
    // What the router's mount does (router's trimPrefix): the base moved from the URL to `baseUrl` while
    // inside, both restored on the way out, then on to the next layers (the error handler on an error).
    req.baseUrl = API_BASE;
    req.url = req.url.slice(API_BASE.length);
    const leave = (err?: unknown) => {
      req.url = `${API_BASE}${req.url}`;
      req.baseUrl = '';
      next(err);
    };
    try {
      serveApiRequest(req, res, leave);
    } catch (err) {
      leave(err);
    }
  };

  // The front door, one middleware for every request (each express layer costs a match and a hop):
  // the request id and the request's metrics and log line, then the probes, then the host guard.
  app.use((req: Request, res: Response, next: NextFunction) => {
    // A caller's request id is kept when it is sane, so one id follows a request across systems.
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : newRequestId();
    res.locals.requestId = id;
    res.setHeader('x-request-id', id);
    res.locals.startedAt = performance.now();
    // A probe's path is in its URL: the others are not parsed here (express parses the URL the API sees).
    const probe = (req.url.includes('healthz') || req.url.includes('readyz')) && PROBE_PATHS.has(req.path);
    res.on('finish', probe ? probeFinished : requestFinished);
    // The probes are answered before the host guard: the kubelet calls them by pod address.
    if (!probe) return pastHostGuard(req, res, next);
    serveOps(deps.health, req, res).then((handled) => (handled ? undefined : pastHostGuard(req, res, next)), next);
  });

  app.get(['/docs', '/api/v1/docs'], (_req, res) => {
    res.locals.route = '/docs';
    res.setHeader('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'");
    res.type('text/html').send(renderDocsPage(publicApiServed.document()));
  });
  app.use(API_BASE, serveApiRequest);
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
