import type { RequestListener } from 'node:http';
import { Router } from 'express';

/** Paths of the CRMs' webhooks, as the connectors service serves them on its own port. */
export const CRM_HOOKS_PREFIX = '/hooks/crm/';

/**
 * The connectors' CRM webhook endpoint on the all-in-one's one HTTP port: requests under `/hooks/crm/`
 * go to the connectors' own listener untouched (it reads the body and the full path itself).
 */
export function crmHooksRouter(listener: RequestListener): Router {
  const router = Router();
  router.use((req, res, next) => {
    if (!req.path.startsWith(CRM_HOOKS_PREFIX)) return next();
    // The metrics and request log name the route, never the path (it carries the connector's secret).
    res.locals.route = '/hooks/crm';
    listener(req, res);
  });
  return router;
}
