import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { MD_IDEMPOTENCY_FINGERPRINT, MD_IDEMPOTENCY_KEY, requestFingerprint } from '@rrs/idempotency';
import type { AuthGate, AuthGates } from './auth';
import { readJsonBody } from './body';
import { parseIdempotencyKey } from './idempotencyKey';
import { currentRoutes, type IdempotencyInput, type Route, type RouteResult, type RouteSource } from './route';
import { resolveRoute } from './router';
import { setRecipientHeaders, showRecipientRefusal } from './recipientBudgetFields';
import { validateRequest } from './validation';

export interface PipelineOptions {
  /** Where the API is mounted, e.g. `/api/v1`; route paths are below it. */
  basePath: string;
  routes: readonly RouteSource[];
  /** One gate per auth kind the routes use. */
  gates: AuthGates;
  /** POSTs take an Idempotency-Key, handed to the owning service with the request's fingerprint. */
  idempotencyKeys: boolean;
}

/**
 * Runs an API: route match (404/405) → the route's auth gate (401, 429, 403) → body (415/413/400) →
 * Idempotency-Key (400) → validation (400; 404 for a path parameter) → handler.
 * Every refusal before the handler happens before any effect, so nothing is created, sent or saved under
 * an Idempotency-Key. Whether a cascade may start is not the gateway's to say (issue 28, "one door"):
 * the sending rule (402 `plan_required`, 409 `email_not_confirmed`) and the recipient budget (429
 * `recipient_quota_exceeded`) are answered by the scheduler's admission, through StartCascade or its dry
 * run, before anything is created; the budget's windows become the RateLimit fields either way.
 */
export function pipeline(options: PipelineOptions): RequestHandler {
  // Without run-time providers the route list never changes: flatten it once, not per request.
  const fixed = options.routes.every((s) => !('routes' in s && typeof s.routes === 'function')) ? currentRoutes(options.routes) : undefined;
  const routesNow = () => fixed ?? currentRoutes(options.routes);
  // Each route's metrics label (`<basePath><path>`), written once rather than joined on every request.
  const labels = new WeakMap<Route, string>();
  const labelOf = (route: Route): string => {
    let label = labels.get(route);
    if (label === undefined) labels.set(route, (label = `${options.basePath}${route.path}`));
    return label;
  };
  return (req: Request, res: Response, next: NextFunction) => {
    try {
      handle(options, routesNow(), labelOf, req, res, next);
    } catch (err) {
      next(err);
    }
  };
}

/**
 * Up to the gate's answer. A request its gate admits at once and without a body (nearly every GET) runs
 * on to its handler in the same turn; otherwise the rest waits for the gate and the body. A refusal is
 * thrown (the caller hands it to `next`) or, once waiting, passed to `next`.
 */
function handle(options: PipelineOptions, routes: readonly Route[], labelOf: (route: Route) => string, req: Request, res: Response, next: NextFunction): void {
  const { route, params } = resolveRoute(routes, req.method, req.path, options.basePath);
  res.locals.route = labelOf(route);
  const gate = options.gates[route.auth] as AuthGate<unknown> | undefined;
  if (!gate) throw new Error(`route ${route.operationId}: this API has no ${route.auth} gate`);
  const admitted = gate.admit(route, req, res);
  // Waited for only when the gate had to wait or a body is to be read: each wait costs a turn of the microtask queue.
  if (route.request.body) {
    afterWaiting(options, route, params, admitted, req, res, next).catch(next);
    return;
  }
  if (admitted instanceof Promise) {
    // One reaction, not an async function around it: under load this is the path of every request that
    // finds its replica's quota chunk empty while the next reservation is on its way.
    admitted.then((principal) => {
      try {
        run(options, route, params, principal, undefined, req, res, next);
      } catch (err) {
        next(err);
      }
    }, next);
    return;
  }
  run(options, route, params, admitted, undefined, req, res, next);
}

async function afterWaiting(options: PipelineOptions, route: Route, params: Record<string, string>, admitted: unknown, req: Request, res: Response, next: NextFunction): Promise<void> {
  const principal = admitted instanceof Promise ? await admitted : admitted;
  const rawBody = route.request.body ? await readJsonBody(req, res) : undefined;
  run(options, route, params, principal, rawBody, req, res, next);
}

/** Idempotency-Key → validation → the handler → its answer; a refusal before the handler is thrown, the handler's goes to `next`. */
function run(options: PipelineOptions, route: Route, rawParams: Record<string, string>, principal: unknown, rawBody: unknown, req: Request, res: Response, next: NextFunction): void {
  let idempotency: IdempotencyInput | undefined;
  if (options.idempotencyKeys && route.method === 'POST') {
    const key = parseIdempotencyKey(req.headers['idempotency-key']);
    const path = req.path.replace(/(.)\/$/, '$1');
    const fingerprintPath = route.dryRunOf ? path.slice(0, path.length - route.path.length) + route.dryRunOf : path;
    if (key !== undefined) idempotency = { key, fingerprint: requestFingerprint(route.method, fingerprintPath, rawBody ?? null) };
  }

  // The query is parsed (express's parser, on every read of `req.query`) only for a route that has a
  // query schema; a route without one is typed without a query and gets none.
  const input = validateRequest(route.request, route.path, { params: rawParams, query: route.request.query ? req.query : undefined, body: rawBody });

  const requestId = String(res.locals.requestId ?? '');
  const metadata: Record<string, string> = { 'x-request-id': requestId };
  if (idempotency) {
    metadata[MD_IDEMPOTENCY_KEY] = idempotency.key;
    metadata[MD_IDEMPOTENCY_FINGERPRINT] = idempotency.fingerprint;
  }
  const refused = (err: unknown) => {
    showRecipientRefusal(res, err);
    next(err);
  };
  let pending: Promise<RouteResult>;
  try {
    // Field by field, not `{ ...input, principal, … }`: on Node 20 that spread costs microseconds per request.
    pending = route.handler({ params: input.params, query: input.query, body: input.body, principal, idempotency, metadata, requestId });
  } catch (err) {
    refused(err);
    return;
  }
  pending.then((result) => {
    try {
      if (result.recipientBudget) setRecipientHeaders(res, result.recipientBudget);
      writeResult(req, res, route, result);
    } catch (err) {
      next(err);
    }
  }, refused);
}

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The route's answer. A body is written with `res.end`, not express's `res.send` (which re-derives the
 * content type and its charset on every response: ~10 µs a request on the bench machine); what `send`
 * does that matters here is kept: Content-Length, and 304 for a fresh conditional GET (no ETag or
 * Last-Modified is ever set, so only `If-None-Match: *` is). Node itself drops the body of a HEAD.
 */
function writeResult(req: Request, res: Response, route: Route, result: RouteResult): void {
  res.statusCode = result.status ?? route.successStatus;
  if (result.headers) for (const [k, v] of Object.entries(result.headers)) res.setHeader(k, v);
  if (result.replayed) res.setHeader('Idempotent-Replayed', 'true');
  if (result.body === undefined) {
    res.end();
    return;
  }
  // `req.fresh` (express) builds its answer from the response's validators: asked only when the request is conditional.
  if ((req.headers['if-none-match'] !== undefined || req.headers['if-modified-since'] !== undefined) && req.fresh) {
    res.statusCode = 304;
    res.end();
    return;
  }
  const json = JSON.stringify(result.body);
  res.setHeader('Content-Type', JSON_TYPE);
  res.setHeader('Content-Length', Buffer.byteLength(json));
  res.end(json);
}
