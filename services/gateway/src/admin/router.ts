import { timingSafeEqual, createHash } from 'node:crypto';
import { Router, type NextFunction, type Request, type Response } from 'express';
import { AppError } from '@rrs/runtime';
import type { GatewayClients } from '../clients';
import { mountAdminRoutes } from './define';
import { buildAdminOpenApi } from './openapi';
import { adminRoutes } from './routes';

/** Compares hashes so the comparison takes the same time whatever the token's length. */
function sameToken(given: string, expected: string): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/**
 * The account admin API (`/admin/v1`): what the account's web UI calls. Authorized by ADMIN_TOKEN as a
 * bearer token; refused entirely (404) when no token is configured. Its OpenAPI document
 * (`/admin/v1/openapi.json`) needs no token, like the public API's.
 */
export function adminRouter(clients: GatewayClients, adminToken: string | undefined): Router {
  const routes = adminRoutes(clients);
  const document = JSON.stringify(buildAdminOpenApi(routes));
  const router = Router();
  router.use((req: Request, res: Response, next: NextFunction) => {
    if (!adminToken) return next(new AppError(404, 'not_found', 'the admin API is disabled: ADMIN_TOKEN is not set'));
    if (req.method === 'GET' && req.path === '/openapi.json') {
      res.locals.route = '/admin/v1/openapi.json';
      res.type('application/json').send(document);
      return;
    }
    const header = req.get('authorization');
    if (!header) return next(new AppError(401, 'missing_admin_token', 'send the admin token as `Authorization: Bearer <token>`'));
    const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!m) return next(new AppError(401, 'invalid_admin_token', 'the Authorization header must be `Bearer <token>`'));
    if (!sameToken(m[1], adminToken)) return next(new AppError(401, 'invalid_admin_token', 'the admin token is not valid'));
    next();
  });
  mountAdminRoutes(router, routes);
  return router;
}
