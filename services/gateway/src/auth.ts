import type { NextFunction, Request, Response } from 'express';
import { AppError } from '@rrs/runtime';

export interface Principal {
  organization: { id: string; name: string; plan: string; emailConfirmed: boolean; locale: string; defaultRegion: string; timeZone: string };
  keyId: string;
  scopes: string[];
}

/** Resolves an API key to its principal, or rejects with AppError 401 `invalid_api_key`. */
export type Authenticator = (apiKey: string) => Promise<Principal>;

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** Requires a valid API key; puts the principal on `res.locals.principal`. */
export function requireApiKey(authenticate: Authenticator) {
  return (req: Request, res: Response, next: NextFunction) => {
    const header = req.get('authorization');
    if (!header) return next(new AppError(401, 'missing_api_key', 'send the API key as `Authorization: Bearer <key>`'));
    const m = BEARER.exec(header);
    if (!m) return next(new AppError(401, 'invalid_api_key', 'the Authorization header must be `Bearer <key>`'));
    authenticate(m[1]).then((principal) => {
      res.locals.principal = principal;
      next();
    }, next);
  };
}

export function principalOf(res: Response): Principal {
  const p = res.locals.principal as Principal | undefined;
  if (!p) throw new Error('route mounted without requireApiKey');
  return p;
}
