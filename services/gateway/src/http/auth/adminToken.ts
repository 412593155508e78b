import { createHash, timingSafeEqual } from 'node:crypto';
import { UnauthenticatedError } from '@rrs/runtime';
import { bearerCredential, type AuthDescription, type AuthGate } from './kinds';

/** The ADMIN_TOKEN grants the whole account admin API; there is no one more specific behind it. */
export interface AdminPrincipal {
  readonly admin: true;
}

const ADMIN: AdminPrincipal = { admin: true };

/** Compares hashes so the comparison takes the same time whatever the token's length. */
function sameToken(given: string, expected: string): boolean {
  return timingSafeEqual(createHash('sha256').update(given).digest(), createHash('sha256').update(expected).digest());
}

/** `Authorization: Bearer <ADMIN_TOKEN>`; 401 `missing_admin_token` / `invalid_admin_token` otherwise. */
export function adminTokenGate(token: string): AuthGate<AdminPrincipal> {
  return {
    async admit(_requirement, req) {
      const given = bearerCredential(req);
      if (given === null) throw new UnauthenticatedError('missing_admin_token', 'send the admin token as `Authorization: Bearer <token>`');
      if (given === '' || !sameToken(given, token)) throw new UnauthenticatedError('invalid_admin_token', 'the admin token is not valid');
      return ADMIN;
    },
  };
}

const ADMIN_TOKEN_CODES = {
  missing_admin_token: { status: 401, description: 'No `Authorization: Bearer <ADMIN_TOKEN>` header was sent.' },
  invalid_admin_token: { status: 401, description: 'The admin token is not the configured one.' },
};

export const adminTokenDescription: AuthDescription = {
  securityScheme: { type: 'http', scheme: 'bearer', description: 'The ADMIN_TOKEN the gateway was started with.' },
  // The document-wide security requirement covers every operation.
  operation: () => ({}),
  errors: () => [
    { status: 401, code: 'missing_admin_token', description: ADMIN_TOKEN_CODES.missing_admin_token.description },
    { status: 401, code: 'invalid_admin_token', description: ADMIN_TOKEN_CODES.invalid_admin_token.description },
    // Without ADMIN_TOKEN the whole admin API answers 404.
    { status: 404, code: 'not_found', description: 'The organization or object does not exist (or the admin API is disabled).' },
  ],
  codes: ADMIN_TOKEN_CODES,
};
