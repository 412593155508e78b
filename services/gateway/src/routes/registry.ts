/**
 * The route registry: one definition per public operation. The same zod schemas validate the request
 * (see ../http/dispatch.ts) and generate the OpenAPI 3.1 document (see ../openapi.ts), so the two can
 * never drift apart. Handlers get plain, validated values and never see express objects.
 *
 * How to add a route: docs/gateway-routes.md.
 */
import { z } from 'zod';
import type { Scope } from '@rrs/proto';
import { AppError } from '@rrs/runtime';
import type { Principal } from '../auth';
import { ERROR_CODES, type ErrorCode } from '../errors';

export { z, AppError };
export type { Principal, Scope, ErrorCode };

export interface RouteExample {
  body?: unknown;
  params?: Record<string, string>;
  query?: Record<string, string>;
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** An error the operation may answer: a bare status (its default codes), a catalog code, or a code of its own. */
export type RouteError = number | ErrorCode | { status: number; code: string; description: string };

export interface RouteResponse {
  description: string;
  /** Schema of the JSON body; omitted = no body. */
  body?: z.ZodType;
}

/** What a handler returns. `status` defaults to the route's only 2xx response. */
export interface RouteResult {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /**
   * True when the owning service answered from a saved Idempotency-Key response
   * (its gRPC response's `idempotent_replayed`); the gateway then sets `Idempotent-Replayed: true`.
   */
  replayed?: boolean;
}

/** The Idempotency-Key of a POST, with the fingerprint of the request it was sent with. */
export interface IdempotencyInput {
  key: string;
  /** requestFingerprint(method, path, body) from @rrs/idempotency. */
  fingerprint: string;
}

export interface HandlerContext<B, P, Q> {
  body: B;
  params: P;
  query: Q;
  principal: Principal;
  idempotency?: IdempotencyInput;
  /**
   * gRPC metadata to pass on EVERY call to the owning service (`client.method(req, { metadata })`):
   * the request id and, when the request has one, `idempotency-key` + `idempotency-fingerprint`.
   */
  metadata: Record<string, string>;
  requestId: string;
}

type Out<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface RouteDefinition<B extends z.ZodType | undefined = undefined, P extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined> {
  method: HttpMethod;
  /** OpenAPI-style path below /api/v1, e.g. `/cascades/{id}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** The scope the key needs (403 `insufficient_scope` without it); null = any valid key. */
  scope: Scope | null;
  request?: { body?: B; params?: P; query?: Q };
  responses: Record<number, RouteResponse>;
  /**
   * Errors the operation itself can answer, beyond those the gateway adds from the other fields:
   * 401 always; 403 `insufficient_scope` with a scope; 429 when rateLimited; 400/413/415 with a body;
   * 400 `invalid_idempotency_key` and 409 `idempotency_key_*` on POST; 402/409 `email_not_confirmed`
   * when it sends; 404 with path parameters.
   */
  errors?: RouteError[];
  /** Counted against the key's per-plan request quota, with RateLimit headers on every response. */
  rateLimited: boolean;
  /**
   * The operation sends messages: a trial plan gets 402 `plan_required` and an unconfirmed account email
   * 409 `email_not_confirmed` before the handler runs. A function decides from the validated request
   * (e.g. POST /contacts sends only with `startCascade`). The owning service enforces the same rules.
   */
  sends?: boolean | ((input: { body: Out<B>; params: Out<P>; query: Out<Q> }) => boolean);
  /** A valid request, shown in the docs and used by the auth/plan matrix test. */
  example?: RouteExample;
  /** With a `sends` function: a valid request that sends, when `example` does not (the matrix test needs one). */
  sendingExample?: RouteExample;
  handler: (ctx: HandlerContext<Out<B>, Out<P>, Out<Q>>) => Promise<RouteResult>;
}

/** A route with its types erased, as the dispatcher and the OpenAPI generator see it. */
export interface Route {
  readonly method: HttpMethod;
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tags: string[];
  readonly scope: Scope | null;
  readonly request: { body?: z.ZodType; params?: z.ZodType; query?: z.ZodType };
  readonly responses: Record<number, RouteResponse>;
  readonly errors: RouteError[];
  readonly rateLimited: boolean;
  readonly sends?: boolean | ((input: { body: unknown; params: unknown; query: unknown }) => boolean);
  readonly example?: RouteExample;
  readonly sendingExample?: RouteExample;
  readonly successStatus: number;
  /** Path split into segments; `{name}` segments are parameters. */
  readonly segments: readonly string[];
  readonly handler: (ctx: HandlerContext<unknown, unknown, unknown>) => Promise<RouteResult>;
}

/**
 * A set of routes that changes at run time (e.g. one send route per channel in the channel catalog).
 * `routes()` is called for each request, so it must be cheap (return a cached array).
 */
export interface RouteProvider {
  routes(): readonly Route[];
}

export type RouteSource = Route | RouteProvider;

const PATH = /^(\/([a-z0-9][a-z0-9-]*|\{[a-zA-Z][a-zA-Z0-9]*\}))+$/;
const OPERATION_ID = /^[a-z][a-zA-Z0-9]*$/;

export class RouteDefinitionError extends Error {
  constructor(operationId: string, message: string) {
    super(`route ${operationId}: ${message}`);
    this.name = 'RouteDefinitionError';
  }
}

export function defineRoute<B extends z.ZodType | undefined = undefined, P extends z.ZodType | undefined = undefined, Q extends z.ZodType | undefined = undefined>(
  def: RouteDefinition<B, P, Q>,
): Route {
  const fail = (message: string) => new RouteDefinitionError(def.operationId, message);
  if (!OPERATION_ID.test(def.operationId)) throw fail('operationId must be camelCase');
  if (!PATH.test(def.path)) throw fail(`path "${def.path}" must be lower-case segments or {param}s, starting with /`);
  const successes = Object.keys(def.responses).map(Number).filter((s) => s >= 200 && s < 300);
  if (successes.length !== 1) throw fail('responses must have exactly one 2xx status');
  const params = [...def.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
  if (params.length > 0 && def.request?.params) {
    const shape = (def.request.params as unknown as { shape?: Record<string, unknown> }).shape;
    if (!shape || params.some((p) => !(p in shape)) || Object.keys(shape).some((k) => !params.includes(k))) {
      throw fail('request.params must be a z.object with exactly the path parameters');
    }
  }
  if (def.request?.body && def.method === 'GET') throw fail('a GET route has no body');
  for (const e of def.errors ?? []) {
    if (typeof e === 'string' && !(e in ERROR_CODES)) throw fail(`unknown error code ${e}`);
  }
  return {
    method: def.method,
    path: def.path,
    operationId: def.operationId,
    summary: def.summary,
    description: def.description,
    tags: def.tags,
    scope: def.scope,
    request: { body: def.request?.body, params: def.request?.params, query: def.request?.query },
    responses: def.responses,
    errors: def.errors ?? [],
    rateLimited: def.rateLimited,
    sends: def.sends as Route['sends'],
    example: def.example,
    sendingExample: def.sendingExample,
    successStatus: successes[0],
    segments: def.path.split('/').slice(1),
    handler: def.handler as Route['handler'],
  };
}

/** Every route of the sources, as of now. */
export function currentRoutes(sources: readonly RouteSource[]): Route[] {
  const out: Route[] = [];
  for (const s of sources) {
    if ('routes' in s && typeof s.routes === 'function') out.push(...s.routes());
    else out.push(s as Route);
  }
  return out;
}
