/**
 * The admin API's own small route table: one definition per operation, whose zod schemas both validate
 * the request and generate `/admin/v1/openapi.json` (see ./openapi.ts). It is separate from the public
 * registry because its authorization (one ADMIN_TOKEN, no scopes, plans or rate limits) is different.
 */
import express, { type NextFunction, type Request, type Response, type Router } from 'express';
import { z } from 'zod';
import { AppError } from '@rrs/runtime';
import { bodyError, validateRequest } from '../http/dispatch';

export type AdminMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface AdminContext<B, P, Q> {
  body: B;
  params: P;
  query: Q;
  /** gRPC metadata for every call: the request id. */
  metadata: Record<string, string>;
}

type Out<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface AdminRouteDefinition<B extends z.ZodType | undefined, P extends z.ZodType | undefined, Q extends z.ZodType | undefined> {
  method: AdminMethod;
  /** OpenAPI-style path below /admin/v1, e.g. `/organizations/{organizationId}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  request?: { body?: B; params?: P; query?: Q };
  /** The success status and its body schema (none for 204). */
  response: { status: number; description: string; body?: z.ZodType };
  /** Error statuses the operation adds to those every admin operation has (400, 401, 404, 503). */
  errors?: Array<{ status: number; code: string; description: string }>;
  example?: unknown;
  handler: (ctx: AdminContext<Out<B>, Out<P>, Out<Q>>) => Promise<unknown>;
}

export interface AdminRoute {
  readonly method: AdminMethod;
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tag: string;
  readonly request: { body?: z.ZodType; params?: z.ZodType; query?: z.ZodType };
  readonly response: { status: number; description: string; body?: z.ZodType };
  readonly errors: Array<{ status: number; code: string; description: string }>;
  readonly example?: unknown;
  readonly handler: (ctx: AdminContext<unknown, unknown, unknown>) => Promise<unknown>;
}

export function defineAdminRoute<B extends z.ZodType | undefined = undefined, P extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined>(
  def: AdminRouteDefinition<B, P, Q>,
): AdminRoute {
  return {
    ...def,
    request: { body: def.request?.body, params: def.request?.params, query: def.request?.query },
    errors: def.errors ?? [],
    handler: def.handler as AdminRoute['handler'],
  };
}

const JSON_TYPE = /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i;
const jsonParser = express.json({ limit: '1mb', strict: true, type: () => true });

function hasBody(req: Request): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = req.headers['content-length'];
  return length !== undefined && length !== '0';
}

async function readBody(req: Request, res: Response): Promise<unknown> {
  if (!hasBody(req)) return undefined;
  if (!JSON_TYPE.test(req.headers['content-type'] ?? '')) throw new AppError(415, 'unsupported_media_type', 'send the body as `Content-Type: application/json`');
  try {
    await new Promise<void>((resolve, reject) => jsonParser(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
  } catch (err) {
    throw bodyError(err) ?? err;
  }
  return req.body;
}

/**
 * Mounts the routes on `router`: body → validation → handler → JSON (or 204). A known path with
 * another method is 405 `method_not_allowed` with `Allow`, as in the public API.
 */
export function mountAdminRoutes(router: Router, routes: readonly AdminRoute[]): void {
  const methodsByPath = new Map<string, string[]>();
  for (const route of routes) methodsByPath.set(route.path, [...(methodsByPath.get(route.path) ?? []), route.method]);
  for (const route of routes) {
    const expressPath = route.path.replace(/\{(\w+)\}/g, ':$1');
    const method = route.method.toLowerCase() as 'get' | 'post' | 'put' | 'patch' | 'delete';
    router[method](expressPath, (req: Request, res: Response, next: NextFunction) => {
      res.locals.route = `/admin/v1${route.path}`;
      run(route, req, res).catch(next);
    });
  }
  for (const [path, methods] of methodsByPath) {
    const allow = [...methods, ...(methods.includes('GET') ? ['HEAD'] : [])].sort();
    router.all(path.replace(/\{(\w+)\}/g, ':$1'), (req: Request, res: Response, next: NextFunction) => {
      if (req.method === 'HEAD' && allow.includes('HEAD')) return next();
      res.locals.route = `/admin/v1${path}`;
      next(new AppError(405, 'method_not_allowed', `${req.method} is not allowed here; allowed: ${allow.join(', ')}`, { details: { allow } }));
    });
  }
}

async function run(route: AdminRoute, req: Request, res: Response): Promise<void> {
  const raw = route.request.body ? await readBody(req, res) : undefined;
  // A path segment that cannot be an id or key names nothing.
  const { params, query, body } = validateRequest(route.request, { params: req.params, query: req.query, body: raw }, () =>
    new AppError(404, 'not_found', `no such ${route.path.split('/').filter((s) => !s.startsWith('{')).pop()} here`),
  );
  const result = await route.handler({ body, params, query, metadata: { 'x-request-id': String(res.locals.requestId ?? '') } });
  if (route.response.status === 204 || result === undefined) {
    res.status(route.response.status).end();
    return;
  }
  res.status(route.response.status).type('application/json').send(JSON.stringify(result));
}
