import express, { type NextFunction, type Request, type Response } from 'express';
import { randomUUID } from 'node:crypto';
import { AppError, DomainError, httpStatusOf, counter, histogram, LATENCY_BUCKETS, serveOps, type Health, type Logger } from '@rrs/runtime';
import type { Authenticator } from './auth';
import { sendProblem } from './problem';
import { adminRouter } from './admin/router';
import type { GatewayClients } from './clients';
import { bodyError, dispatcher } from './http/dispatch';
import { currentRoutes, type RouteSource } from './routes/registry';
import type { RateLimiter } from './rateLimit';
import { openApiCache } from './openapi';
import { renderDocsPage } from './docsPage';
import { reviewFormRouter } from './form';

export interface AppDeps {
  authenticate: Authenticator;
  rateLimiter: RateLimiter;
  /** The public `/api/v1` routes (normally `publicRoutes(...)` from ./routes). */
  routes: readonly RouteSource[];
  clients: GatewayClients;
  /** Absolute base URL the gateway is reached at, e.g. `https://reviews.example.com`. */
  publicBaseUrl: string;
  adminToken?: string;
  /** Routers of the all-in-one mode only (the dev inbox at /dev/*); a distributed gateway has none. */
  extraRouters?: express.Router[];
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
const OPS_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

export const API_DESCRIPTION = `Hand customers over from a CRM and have review requests sent to them through a cascade of channels (email, SMS, MAX, Telegram), or through one channel.

Authenticate with \`Authorization: Bearer <API key>\`. Every error is RFC 9457 \`application/problem+json\` with a stable \`code\` and a \`requestId\`; each operation lists the codes it can answer. Every POST accepts an \`Idempotency-Key\`. Rate-limited operations carry \`RateLimit\` and \`RateLimit-Policy\` headers.`;

export const TAG_DESCRIPTIONS: Record<string, string> = {
  account: 'The API key and its organization.',
  locations: 'Points where reviews are collected.',
  contacts: 'Customers handed over from the CRM.',
  flows: 'Cascade scenarios: steps of channel + delay.',
  cascades: 'Recipients put into a flow.',
  channels: 'The channel catalog and one send method per channel.',
  'review-requests': 'Personal review links delivered by the caller.',
  webhooks: 'Endpoints that receive signed events.',
};

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  // Problem `type`s link to this server's docs page (see problem.ts).
  app.locals.publicBaseUrl = deps.publicBaseUrl;
  app.set('etag', false);

  // A caller's request id is kept when it is sane, so one id follows a request across systems.
  app.use((req: Request, res: Response, next: NextFunction) => {
    const given = req.get('x-request-id');
    const id = given && REQUEST_ID.test(given) ? given : randomUUID();
    res.locals.requestId = id;
    res.setHeader('x-request-id', id);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const route = (res.locals.route as string | undefined) ?? (req.route ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched');
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      httpDuration.observe({ method: req.method, route, status: String(res.statusCode) }, seconds);
      // One line per request, joined to its trace by the logger's mixin; probes and scrapes are not logged.
      if (!OPS_PATHS.has(req.path)) {
        deps.logger.info({ requestId: id, method: req.method, route, status: res.statusCode, durationMs: Math.round(seconds * 1e4) / 10 }, 'request');
      }
    });
    next();
  });

  app.use((req, res, next) => {
    if (!OPS_PATHS.has(req.path)) return next();
    serveOps(deps.health, req, res).then((handled) => (handled ? undefined : next()), next);
  });

  const openApi = openApiCache({
    title: 'Review-Request API',
    version: '1.0.0',
    description: API_DESCRIPTION,
    serverUrl: `${deps.publicBaseUrl}/api/v1`,
    tags: TAG_DESCRIPTIONS,
  });
  const documentNow = () => openApi(currentRoutes(deps.routes));
  // The description is public (no key): integrators generate clients from it before they have a key.
  app.get('/api/v1/openapi.json', (_req, res) => {
    res.locals.route = '/api/v1/openapi.json';
    res.type('application/json').send(JSON.stringify(documentNow()));
  });
  app.get(['/docs', '/api/v1/docs'], (_req, res) => {
    res.locals.route = '/docs';
    res.setHeader('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'");
    res.type('text/html').send(renderDocsPage(documentNow()));
  });

  app.use('/api/v1', dispatcher({ routes: deps.routes, authenticate: deps.authenticate, rateLimiter: deps.rateLimiter }));
  app.use('/admin/v1', adminRouter(deps.clients, deps.adminToken));
  app.use(reviewFormRouter({ scheduler: deps.clients.scheduler, logger: deps.logger }));
  for (const router of deps.extraRouters ?? []) app.use(router);

  app.use((req: Request, _res: Response, next: NextFunction) => {
    next(new AppError(404, 'not_found', `no route for ${req.method} ${req.path}`));
  });

  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const appErr = toAppError(err, deps.logger, res.locals.requestId as string);
    httpErrors.inc({ status: String(appErr.status), code: appErr.code });
    if (res.headersSent) return;
    sendProblem(req, res, appErr);
  });
  return app;
}

function toAppError(err: unknown, logger: Logger, requestId: string): AppError {
  if (err instanceof AppError) {
    if (err.status >= 500) logger.error({ err, requestId }, 'request failed');
    return err;
  }
  if (err instanceof DomainError) {
    const status = httpStatusOf(err);
    if (status >= 500) logger.error({ err, requestId }, 'request failed');
    return new AppError(status, err.code, err.message, { cause: err, details: err.details });
  }
  const fromBody = bodyError(err);
  if (fromBody) return fromBody;
  logger.error({ err, requestId }, 'unexpected error');
  return new AppError(500, 'internal', 'an unexpected error occurred; the request id identifies it in the logs');
}
