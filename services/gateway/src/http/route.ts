/**
 * Route definitions: one per operation, for every API the gateway serves. A route is its method and
 * path, its zod schemas, its auth kind and its handler, with what the docs say about it. The same
 * schemas validate the request (./pipeline.ts) and generate the OpenAPI 3.1 document (./openapi.ts),
 * so the two never drift apart. Handlers get plain, validated values and never see express objects.
 *
 * How to add a route: docs/gateway-routes.md.
 */
import type { z } from 'zod';
import type { Scope } from '@rrs/proto';
import type { AuthKind, AuthRequirement, PrincipalOfKind } from './auth';
import { ERROR_CODES, type RouteError } from './errorCodes';
import type { RecipientWindow } from './recipientBudgetFields';

export interface RouteExample {
  body?: unknown;
  params?: Record<string, string>;
  query?: Record<string, string>;
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface RouteResponse {
  description: string;
  /** Schema of the JSON body; omitted = no body. */
  body?: z.ZodType;
  /** A body this response can have, valid against `body` (shown in the document; every response with a body has one). */
  example?: unknown;
}

/** What a handler returns. `status` defaults to the route's only 2xx response; no `body` = an empty response. */
export interface RouteResult {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /**
   * True when the owning service answered from a saved Idempotency-Key response
   * (its gRPC response's `idempotent_replayed`); the gateway then sets `Idempotent-Replayed: true`.
   */
  replayed?: boolean;
  /** The organization's recipient budget as the scheduler answered it with the start: the RateLimit fields in recipients. */
  recipientBudget?: readonly RecipientWindow[];
}

/** The Idempotency-Key of a POST, with the fingerprint of the request it was sent with. */
export interface IdempotencyInput {
  key: string;
  /** requestFingerprint(method, path, body) from @rrs/idempotency. */
  fingerprint: string;
}

export interface HandlerContext<B, P, Q, A = PrincipalOfKind['apiKey']> {
  body: B;
  params: P;
  query: Q;
  /** Who is calling, as the route's auth kind knows it (an API key's organization, the admin, …). */
  principal: A;
  idempotency?: IdempotencyInput;
  /**
   * gRPC metadata to pass on EVERY call to the owning service (`client.method(req, { metadata })`):
   * the request id and, when the request has one, `idempotency-key` + `idempotency-fingerprint`.
   */
  metadata: Record<string, string>;
  requestId: string;
}

type Out<S> = S extends z.ZodType ? z.output<S> : undefined;
type Schema = z.ZodType | undefined;

interface CommonDefinition<B extends Schema, P extends Schema, Q extends Schema, K extends AuthKind> {
  method: HttpMethod;
  /** OpenAPI-style path below the API's base path, e.g. `/cascades/{id}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tags: string[];
  /** How the caller proves who it is (./auth/kinds.ts). */
  auth: K;
  request?: { body?: B; params?: P; query?: Q };
  responses: Record<number, RouteResponse>;
  /**
   * Errors the operation itself can answer, beyond those the gateway adds from the other fields: the
   * auth kind's (401; with an API key 403 `insufficient_scope` with a scope, 429 when rateLimited);
   * 400/413/415 with a body; 404 with path parameters; 400 `invalid_idempotency_key` and 409
   * `idempotency_key_*` on POST where the API takes keys; 402/409 `email_not_confirmed` when it sends; 503.
   */
  errors?: RouteError[];
  /** A valid request, shown in the docs and used by the auth/plan matrix test. */
  example?: RouteExample;
  handler: (ctx: HandlerContext<Out<B>, Out<P>, Out<Q>, PrincipalOfKind[K]>) => Promise<RouteResult>;
}

/** What only API-key routes have: the key's scope and quota, and whether the route sends (documented refusals). */
interface ApiKeyFields<B extends Schema, P extends Schema, Q extends Schema> {
  scope: Scope | null;
  rateLimited: boolean;
  /**
   * The operation sends messages: it documents 402 `plan_required` (trial plan) and 409
   * `email_not_confirmed` (unconfirmed account email). The gateway does not check them: the handler's
   * StartCascade (or its dry run, before anything is saved) answers them from the scheduler's admission,
   * the one place the sending rule is checked. A function says which requests send (e.g. POST /contacts
   * with `startCascade`); the matrix test sends such a request with a refused plan.
   */
  sends?: boolean | ((input: { body: Out<B>; params: Out<P>; query: Out<Q> }) => boolean);
  /** With a `sends` function: a valid request that sends, when `example` does not (the matrix test needs one). */
  sendingExample?: RouteExample;
  /**
   * How many recipients the request creates (0 = none): the route documents 429 `recipient_quota_exceeded`.
   * The scheduler takes them from the organization's budget with the start (one budget for every entry
   * point); the handler hands back the windows it answered (`RouteResult.recipientBudget`).
   */
  recipients?: (input: { body: Out<B>; params: Out<P>; query: Out<Q> }) => number;
}

export type RouteDefinition<B extends Schema, P extends Schema, Q extends Schema, K extends AuthKind> = CommonDefinition<B, P, Q, K> &
  (K extends 'apiKey' ? ApiKeyFields<B, P, Q> : { scope?: never; rateLimited?: never; sends?: never; sendingExample?: never; recipients?: never });

/** A route with its types erased, as the pipeline and the OpenAPI generator see it. */
export interface Route extends AuthRequirement {
  readonly method: HttpMethod;
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tags: string[];
  readonly request: { body?: z.ZodType; params?: z.ZodType; query?: z.ZodType };
  readonly responses: Record<number, RouteResponse>;
  readonly errors: RouteError[];
  readonly sends?: boolean | ((input: { body: unknown; params: unknown; query: unknown }) => boolean);
  readonly recipients?: (input: { body: unknown; params: unknown; query: unknown }) => number;
  readonly example?: RouteExample;
  readonly sendingExample?: RouteExample;
  readonly successStatus: number;
  /** Path split into segments; `{name}` segments are parameters. */
  readonly segments: readonly string[];
  readonly handler: (ctx: HandlerContext<unknown, unknown, unknown, unknown>) => Promise<RouteResult>;
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

export function defineRoute<B extends Schema = undefined, P extends Schema = undefined, Q extends Schema = undefined, K extends AuthKind = AuthKind>(def: RouteDefinition<B, P, Q, K>): Route {
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
  const apiKey = def as Partial<ApiKeyFields<B, P, Q>>;
  return {
    method: def.method,
    path: def.path,
    operationId: def.operationId,
    summary: def.summary,
    description: def.description,
    tags: def.tags,
    auth: def.auth,
    scope: apiKey.scope ?? null,
    rateLimited: apiKey.rateLimited ?? false,
    request: { body: def.request?.body, params: def.request?.params, query: def.request?.query },
    responses: def.responses,
    errors: def.errors ?? [],
    sends: apiKey.sends as Route['sends'],
    recipients: apiKey.recipients as Route['recipients'],
    example: def.example,
    sendingExample: apiKey.sendingExample,
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
