/**
 * Auth kinds: how the caller of a route proves who it is. A route names its kind (`auth`); the API it
 * belongs to brings a gate for that kind, which the pipeline runs after route matching and before the
 * body is read; the kind's description gives the OpenAPI security scheme and the refusals it documents.
 *
 * - `apiKey`: an integrator's API key (`Authorization: Bearer rrs_…`), with a scope, the plan's request
 *   quota, and the documented refusals of sending routes (the public API, ./apiKey.ts).
 * - `adminToken`: the ADMIN_TOKEN (the account admin API, ./adminToken.ts).
 * - `session`: a member of the organization signed in to the account console: a cookie session, with
 *   the CSRF token and a writing role on state-changing calls (the account API, ./session.ts).
 * - `visitor`: nobody yet, on the account API's sign-in routes; only a cross-site Origin is refused.
 */
import type { Socket } from 'node:net';
import type { Request, Response } from 'express';
import type { Scope } from '@rrs/proto';
import type { ErrorCodeInfo, RouteError } from '../errorCodes';

export type AuthKind = 'apiKey' | 'adminToken' | 'session' | 'visitor';

/** What a route asks of its caller. `scope` and `rateLimited` belong to API keys (null/false for the other kinds). */
export interface AuthRequirement {
  readonly auth: AuthKind;
  /** The scope the key needs (403 `insufficient_scope` without it); null = any valid key. */
  readonly scope: Scope | null;
  /** Counted against the key's per-plan request quota, with RateLimit headers on every response. */
  readonly rateLimited: boolean;
}

/**
 * Admits a request to a route of its kind, or throws the refusal (401, 403, 429, …); the principal handlers
 * get, or a promise of it when the gate has to wait for something (a gate may answer at once from memory).
 */
export interface AuthGate<P> {
  admit(requirement: AuthRequirement, req: Request, res: Response): P | Promise<P>;
}

/** What the OpenAPI document says about a kind. */
export interface AuthDescription {
  /** The security scheme, registered under the kind's name. */
  securityScheme: Record<string, unknown>;
  /** Fields of an operation of this kind (its security requirement, vendor extensions), placed after `tags`. */
  operation(requirement: AuthRequirement): Record<string, unknown>;
  /** The refusals of the kind's gate for a route, in the order they happen. */
  errors(requirement: AuthRequirement): RouteError[];
  /** The kind's own codes that are not in the public catalog, by code. */
  codes: Record<string, ErrorCodeInfo>;
}

/**
 * The bearer credential of a request: null when no `Authorization` header was sent, '' when it is not
 * exactly one `Bearer <credential>` header. Node keeps only the first of repeated Authorization
 * headers, so they are counted in the raw headers: a request carrying two is refused whatever the
 * first one holds (a proxy and the gateway must never disagree on who is calling).
 */
export function bearerCredential(req: Request): string | null {
  let headers = 0;
  // An empty header is no credential at all (some clients send one rather than none).
  // The length first: only a 13-character name can be `authorization`, and lower-casing the others is a string each.
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i];
    if (name.length === 13 && name.toLowerCase() === 'authorization' && req.rawHeaders[i + 1].trim() !== '') headers++;
  }
  if (headers === 0) return null;
  if (headers > 1) return '';
  return /^Bearer +(\S+) *$/i.exec(req.get('authorization') ?? '')?.[1] ?? '';
}

/**
 * The client address the per-address limits count: express's `req.ip`. Without an `X-Forwarded-For`
 * header that is the socket's address whatever TRUST_PROXY says (proxy-addr has no other address to
 * trust), so its header parsing and arrays are skipped on the requests that have none.
 */
export function clientAddress(req: Request): string {
  const socket = req.socket as Socket | undefined;
  if (socket && !req.headers['x-forwarded-for']) return socket.remoteAddress ?? 'unknown';
  return req.ip ?? 'unknown';
}
