import type { Request, Response } from 'express';
import { DomainError, ForbiddenError, RateLimitedError, UnauthenticatedError } from '@rrs/runtime';
import type { FailureLimiter } from '../../addressLimits';
import { answerRateLimit, type RateLimiter } from '../../rateLimit';
import { bearerCredential, clientAddress, type AuthDescription, type AuthGate, type AuthRequirement } from './kinds';

/** Who an API key speaks for: its organization (its plan sets the request quota; the sending rule is the scheduler's), the key and its scopes. */
export interface Principal {
  organization: { id: string; name: string; plan: string; emailConfirmed: boolean; locale: string; defaultRegion: string; timeZone: string };
  keyId: string;
  scopes: string[];
}

/**
 * Resolves an API key to its principal, or rejects with 401 `invalid_api_key` (an UnauthenticatedError).
 * `cached`, when the authenticator has a memory: the principal of a valid key it holds, at once, counted as
 * the same lookup would be; undefined for anything else (then the call itself answers).
 */
export type Authenticator = ((apiKey: string) => Promise<Principal>) & { cached?: (apiKey: string) => Principal | undefined };

/**
 * One answer for every key that does not admit: a malformed, unknown or revoked key (or a request with
 * two Authorization headers) cannot be told apart from outside, so probing keys learns nothing.
 */
const INVALID_API_KEY = 'the API key is not valid: send one active key as `Authorization: Bearer <key>`';

/** The principal of the request's API key; 401 `missing_api_key` / `invalid_api_key` otherwise. */
export async function authenticateRequest(authenticate: Authenticator, req: Request): Promise<Principal> {
  const key = bearerCredential(req);
  if (key === null) throw new UnauthenticatedError('missing_api_key', 'send the API key as `Authorization: Bearer <key>`');
  if (key === '') throw new UnauthenticatedError('invalid_api_key', INVALID_API_KEY);
  try {
    return await authenticate(key);
  } catch (err) {
    if (err instanceof DomainError && err.kind === 'unauthenticated') throw new UnauthenticatedError('invalid_api_key', INVALID_API_KEY, { cause: err });
    throw err;
  }
}

/**
 * A client address that sent too many keys that do not admit (malformed, unknown, revoked) is refused
 * with 429 `too_many_auth_failures` until its block ends, before any lookup (a valid key too); the
 * count is per address, in Redis when the gateway has it (ADDRESS_FAILURE_RULES.apiKeyAuth).
 */
async function admitKey(authenticate: Authenticator, req: Request, failures?: FailureLimiter): Promise<Principal> {
  if (!failures) return authenticateRequest(authenticate, req);
  const address = clientAddress(req);
  const refuse = (seconds: number): never => {
    throw new RateLimitedError('too_many_auth_failures', `too many invalid API keys from this address; retry in ${seconds} s`, seconds);
  };
  const blockedFor = await failures.blockedFor(address);
  if (blockedFor > 0) refuse(blockedFor);
  try {
    return await authenticateRequest(authenticate, req);
  } catch (err) {
    if (err instanceof DomainError && err.code === 'invalid_api_key') {
      const nowBlocked = await failures.fail(address);
      if (nowBlocked > 0) refuse(nowBlocked);
    }
    throw err;
  }
}

type ApiKeyGateDeps = { authenticate: Authenticator; rateLimiter: RateLimiter; failures?: FailureLimiter };

/**
 * The key (401, 429 after too many invalid keys from the address) → the plan's quota when the route is
 * rate-limited (429, RateLimit headers) → the scope (403). When everything it needs is in this replica's
 * memory (the address seen clean, the key's principal cached, a point of the held quota chunk) a request
 * is admitted synchronously, with the same answers and counts as the asynchronous path.
 */
export function apiKeyGate(deps: ApiKeyGateDeps): AuthGate<Principal> {
  return {
    admit(requirement: AuthRequirement, req, res: Response) {
      const known = principalInMemory(deps, req);
      if (known === undefined) return admitKey(deps.authenticate, req, deps.failures).then((principal) => afterKey(deps, requirement, principal, res));
      return afterKey(deps, requirement, known, res);
    },
  };
}

/** The principal of a request whose address and key this replica already knows to admit; undefined otherwise. */
function principalInMemory(deps: ApiKeyGateDeps, req: Request): Principal | undefined {
  if (!deps.authenticate.cached) return undefined;
  if (deps.failures && !deps.failures.isClean(clientAddress(req))) return undefined;
  const key = bearerCredential(req);
  return key ? deps.authenticate.cached(key) : undefined;
}

function afterKey(deps: ApiKeyGateDeps, requirement: AuthRequirement, principal: Principal, res: Response): Principal | Promise<Principal> {
  if (requirement.rateLimited) {
    const held = deps.rateLimiter.consumeHeld?.(principal);
    // What applyRateLimit does, in one reaction rather than an async function and a reaction after it.
    if (held === undefined) {
      return deps.rateLimiter.consume(principal).then((decision) => {
        answerRateLimit(decision, res);
        return withScope(requirement, principal);
      });
    }
    answerRateLimit(held, res);
  }
  return withScope(requirement, principal);
}

function withScope(requirement: AuthRequirement, principal: Principal): Principal {
  if (requirement.scope && !principal.scopes.includes(requirement.scope)) {
    throw new ForbiddenError('insufficient_scope', `this key lacks the scope ${requirement.scope}`, { details: { requiredScope: requirement.scope } });
  }
  return principal;
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
  errors: (requirement) => [401, 'too_many_auth_failures', ...(requirement.scope ? (['insufficient_scope'] as const) : []), ...(requirement.rateLimited ? (['rate_limited'] as const) : [])],
  // Its codes are the public catalog's (errorCodes.ts).
  codes: {},
};
