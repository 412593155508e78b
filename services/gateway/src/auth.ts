import { AppError } from '@rrs/runtime';

export interface Principal {
  organization: { id: string; name: string; plan: string; emailConfirmed: boolean; locale: string; defaultRegion: string; timeZone: string };
  keyId: string;
  scopes: string[];
}

/** Resolves an API key to its principal, or rejects with AppError 401 `invalid_api_key`. */
export type Authenticator = (apiKey: string) => Promise<Principal>;

const BEARER = /^Bearer +(\S+) *$/i;

/** The principal of an `Authorization` header value; 401 `missing_api_key` / `invalid_api_key` otherwise. */
export async function authenticateRequest(authenticate: Authenticator, header: string | undefined): Promise<Principal> {
  if (!header) throw new AppError(401, 'missing_api_key', 'send the API key as `Authorization: Bearer <key>`');
  const m = BEARER.exec(header);
  if (!m) throw new AppError(401, 'invalid_api_key', 'the Authorization header must be `Bearer <key>`');
  return authenticate(m[1]);
}
