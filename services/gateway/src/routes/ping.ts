import { Router } from 'express';
import { principalOf } from '../auth';

/** GET /api/v1/ping: checks the key. */
export function pingRoutes(): Router {
  const router = Router();
  router.get('/ping', (_req, res) => {
    const p = principalOf(res);
    res.json({ ok: true, organization: { id: p.organization.id, name: p.organization.name }, scopes: p.scopes });
  });
  return router;
}
