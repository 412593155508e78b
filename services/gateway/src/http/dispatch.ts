import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';
import type { z } from 'zod';
import { AppError } from '@rrs/runtime';
import { MD_IDEMPOTENCY_FINGERPRINT, MD_IDEMPOTENCY_KEY, requestFingerprint } from '@rrs/idempotency';
import { authenticateRequest, type Authenticator, type Principal } from '../auth';
import { currentRoutes, type HttpMethod, type IdempotencyInput, type Route, type RouteSource } from '../routes/registry';
import { parseIdempotencyKey } from './idempotencyKey';
import { applyRateLimit, type RateLimiter } from '../rateLimit';

export const BODY_LIMIT_BYTES = 1024 * 1024;
const MAX_REPORTED_ERRORS = 100;
const JSON_TYPE = /^application\/(?:[\w.-]+\+)?json\s*(?:;|$)/i;

export interface DispatchDeps {
  routes: readonly RouteSource[];
  authenticate: Authenticator;
  rateLimiter: RateLimiter;
}

interface Match {
  route: Route;
  params: Record<string, string>;
}

/** Splits a request path into decoded segments; undefined when it cannot be decoded (treated as unknown). */
function segmentsOf(path: string): string[] | undefined {
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  try {
    return trimmed.split('/').slice(1).map(decodeURIComponent);
  } catch {
    return undefined;
  }
}

function matchPath(route: Route, segments: readonly string[]): Record<string, string> | undefined {
  if (route.segments.length !== segments.length) return undefined;
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const pattern = route.segments[i];
    if (pattern.charCodeAt(0) === 123 /* { */) {
      if (segments[i] === '') return undefined;
      params[pattern.slice(1, -1)] = segments[i];
    } else if (pattern !== segments[i]) return undefined;
  }
  return params;
}

/** The route for method + path; 404 `not_found` or 405 `method_not_allowed` (with `Allow`) otherwise. */
export function resolveRoute(routes: readonly Route[], method: string, path: string): Match {
  const segments = segmentsOf(path);
  const lookup = method === 'HEAD' ? 'GET' : method;
  const allowed = new Set<string>();
  if (segments) {
    for (const route of routes) {
      const params = matchPath(route, segments);
      if (!params) continue;
      if (route.method === lookup) return { route, params };
      allowed.add(route.method);
    }
  }
  if (allowed.size > 0) {
    if (allowed.has('GET')) allowed.add('HEAD');
    const allow = [...allowed].sort().join(', ');
    throw new AppError(405, 'method_not_allowed', `${method} is not allowed here; allowed: ${allow}`, { details: { allow: [...allowed].sort() } });
  }
  throw new AppError(404, 'not_found', `no route for ${method} ${path}`);
}

/** One offending field of a 400: a JSON pointer into the body, or a query parameter, or a header. */
export interface FieldError {
  pointer?: string;
  parameter?: string;
  header?: string;
  detail: string;
}

function pointerOf(path: readonly PropertyKey[]): string {
  return path.map((p) => `/${String(p).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

export function issuesToFieldErrors(issues: readonly z.core.$ZodIssue[], where: 'body' | 'query'): FieldError[] {
  const out: FieldError[] = [];
  for (const issue of issues) {
    const keys = issue.code === 'unrecognized_keys' ? issue.keys.map((k) => [...issue.path, k]) : [issue.path];
    for (const path of keys) {
      const detail = issue.code === 'unrecognized_keys' ? 'unknown field' : issue.message;
      if (where === 'body') out.push({ pointer: pointerOf(path), detail });
      else out.push({ parameter: path.map(String).join('.'), detail });
    }
  }
  return out;
}

const jsonParser = express.json({ limit: BODY_LIMIT_BYTES, strict: true, type: () => true });

function hasBody(req: Request): boolean {
  if (req.headers['transfer-encoding'] !== undefined) return true;
  const length = req.headers['content-length'];
  return length !== undefined && length !== '0';
}

async function readJsonBody(req: Request, res: Response): Promise<unknown> {
  if (!hasBody(req)) return undefined;
  const type = req.headers['content-type'];
  if (!type || !JSON_TYPE.test(type)) {
    throw new AppError(415, 'unsupported_media_type', 'send the body as `Content-Type: application/json`');
  }
  await new Promise<void>((resolve, reject) => jsonParser(req, res, (err?: unknown) => (err ? reject(err) : resolve())));
  return req.body;
}

/** Turns body-parser failures into the API's problem codes. */
export function bodyError(err: unknown): AppError | undefined {
  const type = (err as { type?: string } | null)?.type;
  switch (type) {
    case 'entity.too.large':
      return new AppError(413, 'payload_too_large', 'the request body is larger than 1 MB', { cause: err });
    case 'entity.parse.failed':
      return new AppError(400, 'malformed_json', 'the request body is not valid JSON (an object or array is expected)', { cause: err });
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new AppError(415, 'unsupported_media_type', 'send the body as UTF-8 JSON', { cause: err });
    case 'request.aborted':
    case 'request.size.invalid':
      return new AppError(400, 'malformed_json', 'the request body was incomplete', { cause: err });
    default:
      return undefined;
  }
}

export interface RequestSchemas {
  params?: z.ZodType;
  query?: z.ZodType;
  body?: z.ZodType;
}

/**
 * Validates a request against its route's schemas: a path parameter that fails names nothing (the
 * `notFound` error); query and body are checked together, so one 400 lists every offending field.
 * `body: undefined` with a body schema means no body was sent.
 */
export function validateRequest(
  schemas: RequestSchemas,
  raw: { params: unknown; query: unknown; body: unknown },
  notFound: () => AppError,
): { params: unknown; query: unknown; body: unknown } {
  let params = raw.params;
  if (schemas.params) {
    const r = schemas.params.safeParse(raw.params);
    if (!r.success) throw notFound();
    params = r.data;
  }
  const errors: FieldError[] = [];
  let query = raw.query;
  if (schemas.query) {
    const r = schemas.query.safeParse(raw.query);
    if (r.success) query = r.data;
    else errors.push(...issuesToFieldErrors(r.error.issues, 'query'));
  }
  let body: unknown;
  if (schemas.body) {
    if (raw.body === undefined) errors.push({ pointer: '', detail: 'a JSON body is required' });
    else {
      const r = schemas.body.safeParse(raw.body);
      if (r.success) body = r.data;
      else errors.push(...issuesToFieldErrors(r.error.issues, 'body'));
    }
  }
  if (errors.length > 0) throw invalid(errors);
  return { params, query, body };
}

function invalid(errors: FieldError[]): AppError {
  const shown = errors.slice(0, MAX_REPORTED_ERRORS);
  const more = errors.length - shown.length;
  const detail = errors.length === 1 ? `${where(errors[0])}: ${errors[0].detail}` : `${errors.length} fields are invalid${more > 0 ? ` (the first ${shown.length} are listed)` : ''}`;
  return new AppError(400, 'invalid_request', detail, { details: { errors: shown } });
}

function where(e: FieldError): string {
  if (e.pointer !== undefined) return e.pointer === '' ? 'body' : e.pointer;
  if (e.parameter !== undefined) return `query parameter ${e.parameter}`;
  return `header ${e.header}`;
}

/** Checks the sending rules a principal can be refused on before any service is called. */
export function checkSendingAllowed(principal: Principal): void {
  if (principal.organization.plan === 'trial') {
    throw new AppError(402, 'plan_required', 'a trial plan cannot send messages; upgrade the plan in the account');
  }
  if (!principal.organization.emailConfirmed) {
    throw new AppError(409, 'email_not_confirmed', "confirm the account's email address before sending messages");
  }
}

/**
 * Runs the public API: route match → key → rate limit → scope → body → Idempotency-Key → validation →
 * sending rules → handler. Every refusal before the handler happens before any effect, so nothing is
 * created, sent or saved under an Idempotency-Key.
 */
export function dispatcher(deps: DispatchDeps): RequestHandler {
  // Without run-time providers the route list never changes: flatten it once, not per request.
  const fixed = deps.routes.every((s) => !('routes' in s && typeof s.routes === 'function')) ? currentRoutes(deps.routes) : undefined;
  const routesNow = () => fixed ?? currentRoutes(deps.routes);
  return (req: Request, res: Response, next: NextFunction) => {
    handle(deps, routesNow(), req, res).catch(next);
  };
}

async function handle(deps: DispatchDeps, routes: readonly Route[], req: Request, res: Response): Promise<void> {
  const { route, params: rawParams } = resolveRoute(routes, req.method, req.path);
  res.locals.route = `/api/v1${route.path}`;
  const principal = await authenticateRequest(deps.authenticate, req.get('authorization'));
  res.locals.principal = principal;
  if (route.rateLimited) await applyRateLimit(deps.rateLimiter, principal, res);
  if (route.scope && !principal.scopes.includes(route.scope)) {
    throw new AppError(403, 'insufficient_scope', `this key lacks the scope ${route.scope}`, { details: { requiredScope: route.scope } });
  }

  let rawBody: unknown;
  if (route.request.body) {
    try {
      rawBody = await readJsonBody(req, res);
    } catch (err) {
      throw bodyError(err) ?? err;
    }
  }

  let idempotency: IdempotencyInput | undefined;
  const method = route.method as HttpMethod;
  if (method === 'POST') {
    const key = parseIdempotencyKey(req.headers['idempotency-key']);
    if (key !== undefined) idempotency = { key, fingerprint: requestFingerprint(method, req.path.replace(/(.)\/$/, '$1'), rawBody ?? null) };
  }

  const { params, query, body } = validateRequest(route.request, { params: rawParams, query: req.query, body: rawBody }, () =>
    new AppError(404, 'not_found', `no ${route.path.split('/')[1]} with this id`),
  );

  const sends = typeof route.sends === 'function' ? route.sends({ body, params, query }) : route.sends === true;
  if (sends) checkSendingAllowed(principal);

  const requestId = String(res.locals.requestId);
  const metadata: Record<string, string> = { 'x-request-id': requestId };
  if (idempotency) {
    metadata[MD_IDEMPOTENCY_KEY] = idempotency.key;
    metadata[MD_IDEMPOTENCY_FINGERPRINT] = idempotency.fingerprint;
  }
  const result = await route.handler({ body, params, query, principal, idempotency, metadata, requestId });
  const status = result.status ?? route.successStatus;
  if (result.headers) for (const [k, v] of Object.entries(result.headers)) res.setHeader(k, v);
  if (result.replayed) res.setHeader('Idempotent-Replayed', 'true');
  if (result.body === undefined) {
    res.status(status).end();
    return;
  }
  res.status(status).type('application/json').send(JSON.stringify(result.body));
}
