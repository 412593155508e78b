import type { AuthDescription, AuthGate, AuthKind } from './kinds';
import { apiKeyDescription, type Principal } from './apiKey';
import { adminTokenDescription, type AdminPrincipal } from './adminToken';
import { sessionDescription, visitorDescription, type SessionPrincipal, type VisitorPrincipal } from './session';

export type { AuthDescription, AuthGate, AuthKind, AuthRequirement } from './kinds';
export { apiKeyGate, authenticateRequest, type Authenticator, type Principal } from './apiKey';
export { adminTokenGate, type AdminPrincipal } from './adminToken';
export { sessionGate, visitorGate, sessionCookie, SESSION_COOKIE, CSRF_HEADER, type SessionPrincipal, type VisitorPrincipal, type ResolveSession } from './session';

/** The principal a handler gets, by the route's auth kind. */
export interface PrincipalOfKind {
  apiKey: Principal;
  adminToken: AdminPrincipal;
  session: SessionPrincipal;
  visitor: VisitorPrincipal;
}

/** The gates an API brings, one per auth kind its routes use. */
export type AuthGates = { [K in AuthKind]?: AuthGate<PrincipalOfKind[K]> };

/** Every kind's description; a new kind fails to compile until it has one. */
export const AUTH_DESCRIPTIONS: Record<AuthKind, AuthDescription> = {
  apiKey: apiKeyDescription,
  adminToken: adminTokenDescription,
  session: sessionDescription,
  visitor: visitorDescription,
};
