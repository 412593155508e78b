import { createHash, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import { DomainError, ForbiddenError, UnauthenticatedError } from '@rrs/runtime';
import { WRITING_ROLES, type contactsV1 } from '@rrs/proto';
import type { AuthDescription, AuthGate } from './kinds';
import type { Principal } from './apiKey';

/**
 * The account console's session (docs/console.md): an HttpOnly, SameSite=Lax cookie holding the session
 * token the contacts service issued at sign-in (Secure when the request came over TLS, as express sees it
 * through TRUST_PROXY). Reads need only the cookie. A state-changing call (any method but GET/HEAD) also
 * needs the session's CSRF token in `X-CSRF-Token` — a cross-site form can send the cookie but cannot read
 * the token — and a role that may change things: a viewer changes nothing.
 */
export const SESSION_COOKIE = 'rrs_session';
export const CSRF_HEADER = 'x-csrf-token';

/** Who a session speaks for: the member and their organization (as an API key's principal has it, for quotas). */
export interface SessionPrincipal {
  member: { id: string; email: string; name: string; role: string };
  organization: Principal['organization'];
  sessionId: string;
  csrfToken: string;
  /** The session token itself, to end the session (sign-out). */
  sessionToken: string;
  /** The request came over TLS (directly or, with TRUST_PROXY, through a proxy that says so): cookies get `Secure`. */
  secure: boolean;
}

/** Who calls a sign-in route: nobody yet, from an address. */
export interface VisitorPrincipal {
  ip: string;
  secure: boolean;
  /** The session cookie, when the browser still has one (sign-out ends it); '' otherwise. */
  sessionToken: string;
}

export type ResolveSession = (sessionToken: string) => Promise<contactsV1.ResolveSessionResponse>;

const SAFE_METHODS = new Set(['GET', 'HEAD']);

function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(createHash('sha256').update(given).digest(), createHash('sha256').update(expected).digest());
}

/** The value of one cookie of the request; '' when absent. */
export function cookieOf(req: Request, name: string): string {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) {
      try {
        return decodeURIComponent(part.slice(eq + 1).trim());
      } catch {
        return '';
      }
    }
  }
  return '';
}

/** `Set-Cookie` of the session: HttpOnly, SameSite=Lax, path-bound to what uses it, Secure over TLS. Empty token + maxAge 0 clears it. */
export function sessionCookie(token: string, options: { secure: boolean; maxAgeSeconds: number }): string {
  return `${SESSION_COOKIE}=${encodeURIComponent(token)}; Path=/; HttpOnly; SameSite=Lax; Max-Age=${options.maxAgeSeconds}${options.secure ? '; Secure' : ''}`;
}

/**
 * A browser's cross-site request carries an `Origin`. A state-changing request whose Origin is neither
 * PUBLIC_BASE_URL's nor the request's own host is refused whatever else it carries: this is what
 * protects the sign-in routes, which have no session (and so no CSRF token) yet. PUBLIC_BASE_URL is
 * accepted because a proxy in front may rewrite `Host`; a request without Origin is not a browser's
 * cross-site request (browsers send it on every cross-origin POST, PUT, PATCH and DELETE).
 */
function checkOrigin(req: Request, publicOrigin: string): void {
  if (SAFE_METHODS.has(req.method)) return;
  const origin = req.get('origin');
  if (origin === undefined || origin === publicOrigin) return;
  let host: string;
  try {
    host = new URL(origin).host;
  } catch {
    throw crossOrigin();
  }
  if (origin === 'null' || host !== req.get('host')) throw crossOrigin();
}

const crossOrigin = () => new ForbiddenError('cross_origin_request', 'a state-changing account call must come from the console itself');

/** The session of the cookie (401), then for state-changing calls the origin, the CSRF token and the role (403). */
export function sessionGate(resolve: ResolveSession, publicBaseUrl: string): AuthGate<SessionPrincipal> {
  const publicOrigin = new URL(publicBaseUrl).origin;
  return {
    async admit(_requirement, req) {
      const token = cookieOf(req, SESSION_COOKIE);
      if (!token) throw new UnauthenticatedError('missing_session', 'sign in first: no session cookie was sent');
      let resolved: contactsV1.ResolveSessionResponse;
      try {
        resolved = await resolve(token);
      } catch (err) {
        if (err instanceof DomainError && err.kind === 'unauthenticated') throw new UnauthenticatedError('invalid_session', 'sign in again: the session is unknown, expired or ended', { cause: err });
        throw err;
      }
      const { member, session, organization: o } = resolved;
      if (!member || !session || !o) throw new Error('contacts answered ResolveSession without its member, session or organization');
      if (!SAFE_METHODS.has(req.method)) {
        checkOrigin(req, publicOrigin);
        const given = req.get(CSRF_HEADER) ?? '';
        if (!given || !sameSecret(given, session.csrfToken)) throw new ForbiddenError('invalid_csrf_token', `send the session's CSRF token (GET /account/v1/session) as ${CSRF_HEADER}`);
        if (!WRITING_ROLES.has(member.role)) throw new ForbiddenError('read_only_role', `the ${member.role} role can look but not change anything`);
      }
      return {
        member: { id: member.id, email: member.email, name: member.name, role: member.role },
        organization: { id: o.id, name: o.name, plan: o.plan, emailConfirmed: o.emailConfirmed, locale: o.locale, defaultRegion: o.defaultRegion, timeZone: o.timeZone },
        sessionId: session.id,
        csrfToken: session.csrfToken,
        sessionToken: token,
        secure: req.secure,
      };
    },
  };
}

/** Sign-in routes (no session yet): only the origin is checked; the handlers throttle attempts. */
export function visitorGate(publicBaseUrl: string): AuthGate<VisitorPrincipal> {
  const publicOrigin = new URL(publicBaseUrl).origin;
  return {
    async admit(_requirement, req) {
      checkOrigin(req, publicOrigin);
      return { ip: req.ip ?? req.socket.remoteAddress ?? '', secure: req.secure, sessionToken: cookieOf(req, SESSION_COOKIE) };
    },
  };
}

const SESSION_CODES = {
  missing_session: { status: 401, description: 'No session cookie was sent: sign in first.' },
  invalid_session: { status: 401, description: 'The session is unknown, expired or ended: sign in again.' },
  invalid_csrf_token: { status: 403, description: "A state-changing call without the session's CSRF token in `X-CSRF-Token`." },
  cross_origin_request: { status: 403, description: "A state-changing call whose `Origin` is not the console's own." },
  read_only_role: { status: 403, description: 'The member is a viewer: they can look but not change anything.' },
};

export const sessionDescription: AuthDescription = {
  securityScheme: { type: 'apiKey', in: 'cookie', name: SESSION_COOKIE, description: 'The session cookie set by `POST /session` (sign-in) or `POST /invitations/accept`. State-changing calls also send the CSRF token of `GET /session` as `X-CSRF-Token`.' },
  operation: () => ({ security: [{ session: [] }] }),
  errors: () => [
    { status: 401, code: 'missing_session', description: SESSION_CODES.missing_session.description },
    { status: 401, code: 'invalid_session', description: SESSION_CODES.invalid_session.description },
    { status: 403, code: 'invalid_csrf_token', description: SESSION_CODES.invalid_csrf_token.description },
    { status: 403, code: 'cross_origin_request', description: SESSION_CODES.cross_origin_request.description },
    { status: 403, code: 'read_only_role', description: SESSION_CODES.read_only_role.description },
  ],
  codes: SESSION_CODES,
};

export const visitorDescription: AuthDescription = {
  securityScheme: { type: 'apiKey', in: 'cookie', name: SESSION_COOKIE, description: 'None needed: the sign-in routes open a session.' },
  operation: () => ({ security: [] }),
  errors: () => [{ status: 403, code: 'cross_origin_request', description: SESSION_CODES.cross_origin_request.description }],
  codes: { cross_origin_request: SESSION_CODES.cross_origin_request },
};
