import type { Response } from 'express';
import { ForbiddenError, UnauthenticatedError } from '@rrs/runtime';
import { applyRateLimit, type RateLimiter } from '../../rateLimit';
import type { AuthDescription, AuthGate, AuthRequirement } from './kinds';

/** Who an API key speaks for: its organization (with what the sending rule looks at), the key and its scopes. */
export interface Principal {
  organization: { id: string; name: string; plan: string; emailConfirmed: boolean; locale: string; defaultRegion: string; timeZone: string };
  keyId: string;
  scopes: string[];
}

/** Resolves an API key to its principal, or rejects with 401 `invalid_api_key` (an UnauthenticatedError). */
export type Authenticator = (apiKey: string) => Promise<Principal>;

const BEARER = /^Bearer +(\S+) *$/i;

/** The principal of an `Authorization` header value; 401 `missing_api_key` / `invalid_api_key` otherwise. */
export async function authenticateRequest(authenticate: Authenticator, header: string | undefined): Promise<Principal> {
  if (!header) throw new UnauthenticatedError('missing_api_key', 'send the API key as `Authorization: Bearer <key>`');
  const m = BEARER.exec(header);
  if (!m) throw new UnauthenticatedError('invalid_api_key', 'the Authorization header must be `Bearer <key>`');
  return authenticate(m[1]);
}

/** The key (401) → the plan's quota when the route is rate-limited (429, RateLimit headers) → the scope (403). */
export function apiKeyGate(deps: { authenticate: Authenticator; rateLimiter: RateLimiter }): AuthGate<Principal> {
  return {
    async admit(requirement: AuthRequirement, req, res: Response) {
      const principal = await authenticateRequest(deps.authenticate, req.get('authorization'));
      if (requirement.rateLimited) await applyRateLimit(deps.rateLimiter, principal, res);
      if (requirement.scope && !principal.scopes.includes(requirement.scope)) {
        throw new ForbiddenError('insufficient_scope', `this key lacks the scope ${requirement.scope}`, { details: { requiredScope: requirement.scope } });
      }
      return principal;
    },
  };
}

export const apiKeyDescription: AuthDescription = {
  securityScheme: {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key issued in the account: `Authorization: Bearer <key>`. The scopes listed on an operation are the key permissions it needs.',
  },
  operation: (requirement) => ({
    security: [{ apiKey: requirement.scope ? [requirement.scope] : [] }],
    'x-required-scope': requirement.scope,
    'x-rate-limited': requirement.rateLimited,
  }),
  errors: (requirement) => [401, ...(requirement.scope ? (['insufficient_scope'] as const) : []), ...(requirement.rateLimited ? (['rate_limited'] as const) : [])],
  // Its codes are the public catalog's (errorCodes.ts).
  codes: {},
};
