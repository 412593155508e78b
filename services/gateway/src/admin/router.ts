import { timingSafeEqual, createHash } from 'node:crypto';
import express, { Router, type NextFunction, type Request, type Response } from 'express';
import { AppError } from '@rrs/runtime';
import type { GatewayClients } from '../clients';

/** Compares hashes so the comparison takes the same time whatever the token's length. */
function sameToken(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/**
 * The account admin API (`/admin/v1`): what the account's web UI calls. Authorized by ADMIN_TOKEN as a
 * bearer token; refused entirely (404) when no token is configured.
 */
export function adminRouter(clients: GatewayClients, adminToken: string | undefined): Router {
  const router = Router();
  router.use(express.json({ limit: '1mb', type: () => true }));
  router.use((req: Request, _res: Response, next: NextFunction) => {
    if (!adminToken) return next(new AppError(404, 'not_found', 'the admin API is disabled: ADMIN_TOKEN is not set'));
    const m = /^Bearer\s+(\S+)\s*$/i.exec(req.get('authorization') ?? '');
    if (!m) return next(new AppError(401, 'missing_admin_token', 'send the admin token as `Authorization: Bearer <token>`'));
    if (!sameToken(m[1], adminToken)) return next(new AppError(401, 'invalid_admin_token', 'the admin token is not valid'));
    next();
  });
  router.get('/organizations/:id', async (req, res, next) => {
    try {
      const r = await clients.contacts.getOrganization({ id: req.params.id });
      res.json({ organization: r.organization });
    } catch (err) {
      next(err);
    }
  });
  return router;
}
