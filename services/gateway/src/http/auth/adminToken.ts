import { createHash, timingSafeEqual } from 'node:crypto';
import { RateLimitedError, UnauthenticatedError, type Logger } from '@rrs/runtime';
import type { FailureLimiter } from '../../addressLimits';
import { bearerCredential, type AuthDescription, type AuthGate } from './kinds';

/** An admin token grants the whole account admin API; there is no one more specific behind it. */
export interface AdminPrincipal {
  readonly admin: true;
}

const ADMIN: AdminPrincipal = { admin: true };

/** Compares hashes so the comparison takes the same time whatever the token's length. */
function sameToken(given: string, expected: string): boolean {
  return timingSafeEqual(createHash('sha256').update(given).digest(), createHash('sha256').update(expected).digest());
}

/**
 * `Authorization: Bearer <token>` with any one of the configured tokens (several, so one can be rotated
 * without a gap); 401 `missing_admin_token` / `invalid_admin_token` otherwise. A client address that
 * sent too many wrong tokens is refused with 429 `too_many_auth_failures` until its block ends, even with
 * the right token; every wrong token and every refusal is logged with the client address.
 */
export function adminTokenGate(tokens: readonly string[], failures: FailureLimiter, logger: Logger): AuthGate<AdminPrincipal> {
  if (tokens.length === 0) throw new Error('the admin API needs at least one token');
  const refuse = (address: string, retryAfter: number): never => {
    logger.warn({ clientAddress: address, retryAfterSeconds: retryAfter }, 'admin API: client address refused after too many wrong admin tokens');
    throw new RateLimitedError('too_many_auth_failures', `too many failed authentications from this address; retry in ${retryAfter} s`, retryAfter);
  };
  return {
    async admit(_requirement, req) {
      const address = req.ip ?? 'unknown';
      const blockedFor = await failures.blockedFor(address);
      if (blockedFor > 0) refuse(address, blockedFor);
      const given = bearerCredential(req);
      if (given === null) throw new UnauthenticatedError('missing_admin_token', 'send the admin token as `Authorization: Bearer <token>`');
      // Every token is compared, so the time taken does not tell which one (or how many) there are.
      let match = false;
      for (const token of tokens) if (given !== '' && sameToken(given, token)) match = true;
      if (!match) {
        logger.warn({ clientAddress: address, method: req.method, path: req.path }, 'admin API: wrong admin token');
        const nowBlocked = await failures.fail(address);
        if (nowBlocked > 0) refuse(address, nowBlocked);
        throw new UnauthenticatedError('invalid_admin_token', 'the admin token is not valid');
      }
      return ADMIN;
    },
  };
}

const ADMIN_TOKEN_CODES = {
  missing_admin_token: { status: 401, description: 'No `Authorization: Bearer <ADMIN_TOKEN>` header was sent.' },
  invalid_admin_token: { status: 401, description: 'The admin token is not one of the configured ones.' },
  too_many_auth_failures: { status: 429, description: 'Too many wrong admin tokens came from this client address; every admin request from it is refused until `Retry-After` seconds have passed.' },
};

export const adminTokenDescription: AuthDescription = {
  securityScheme: { type: 'http', scheme: 'bearer', description: 'One of the admin tokens the gateway was started with (ADMIN_TOKEN, comma-separated).' },
  // The document-wide security requirement covers every operation.
  operation: () => ({}),
  errors: () => [
    { status: 401, code: 'missing_admin_token', description: ADMIN_TOKEN_CODES.missing_admin_token.description },
    { status: 401, code: 'invalid_admin_token', description: ADMIN_TOKEN_CODES.invalid_admin_token.description },
    { status: 429, code: 'too_many_auth_failures', description: ADMIN_TOKEN_CODES.too_many_auth_failures.description },
    // Without ADMIN_TOKEN the whole admin API answers 404.
    { status: 404, code: 'not_found', description: 'The organization or object does not exist (or the admin API is disabled).' },
  ],
  codes: ADMIN_TOKEN_CODES,
};
