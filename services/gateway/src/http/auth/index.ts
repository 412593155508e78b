import type { AuthDescription, AuthGate, AuthKind } from './kinds';
import { apiKeyDescription, type Principal } from './apiKey';
import { adminTokenDescription, type AdminPrincipal } from './adminToken';

export type { AuthDescription, AuthGate, AuthKind, AuthRequirement } from './kinds';
export { apiKeyGate, authenticateRequest, type Authenticator, type Principal } from './apiKey';
export { adminTokenGate, type AdminPrincipal } from './adminToken';

/** The principal a handler gets, by the route's auth kind. */
export interface PrincipalOfKind {
  apiKey: Principal;
  adminToken: AdminPrincipal;
}

/** The gates an API brings, one per auth kind its routes use. */
export type AuthGates = { [K in AuthKind]?: AuthGate<PrincipalOfKind[K]> };

/** Every kind's description; a new kind fails to compile until it has one. */
export const AUTH_DESCRIPTIONS: Record<AuthKind, AuthDescription> = {
  apiKey: apiKeyDescription,
  adminToken: adminTokenDescription,
};
