import express, { type NextFunction, type Request, type Response } from 'express';
import { randomUUID } from 'node:crypto';
import { AppError, counter, histogram, LATENCY_BUCKETS, serveOps, type Health, type Logger } from '@rrs/runtime';
import { requireApiKey, type Authenticator } from './auth';
import { sendProblem } from './problem';
import { publicRouters } from './routes';
import { adminRouter } from './admin/router';
import type { GatewayClients } from './clients';

export interface AppDeps {
  authenticate: Authenticator;
  clients: GatewayClients;
  adminToken?: string;
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

export function createApp(deps: AppDeps): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);

  // A caller's request id is kept when it is sane, so one id follows a request across systems.
  app.use((req: Request, res: Response, next: NextFunction) => {
    const given = req.get('x-request-id');
    const id = given && REQUEST_ID.test(given) ? given : randomUUID();
    res.locals.requestId = id;
    res.setHeader('x-request-id', id);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const route = req.route ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
      httpDuration.observe({ method: req.method, route, status: String(res.statusCode) }, Number(process.hrtime.bigint() - started) / 1e9);
    });
    next();
  });

  app.use((req, res, next) => {
    serveOps(deps.health, req, res).then((handled) => (handled ? undefined : next()), next);
  });

  const api = express.Router();
  api.use(express.json({ limit: '1mb', strict: true, type: () => true }));
  api.use(requireApiKey(deps.authenticate));
  for (const router of publicRouters(deps.clients)) api.use(router);
  app.use('/api/v1', api);
  app.use('/admin/v1', adminRouter(deps.clients, deps.adminToken));

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
  const e = err as { type?: string; status?: number };
  if (e.type === 'entity.too.large') return new AppError(413, 'payload_too_large', 'the request body is larger than 1 MB');
  if (e.type === 'entity.parse.failed') return new AppError(400, 'malformed_json', 'the request body is not valid JSON');
  if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported') return new AppError(415, 'unsupported_media_type', 'send the body as UTF-8 JSON');
  logger.error({ err, requestId }, 'unexpected error');
  return new AppError(500, 'internal', 'an unexpected error occurred; the request id identifies it in the logs');
}
