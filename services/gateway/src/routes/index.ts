import type { RouteSource } from '../http/route';
import type { PublicRouteDeps } from './deps';
import { pingRoutes } from './ping';
import { locationRoutes } from './locations';
import { contactRoutes } from './contacts';
import { webhookRoutes } from './webhooks';
import { flowRoutes } from './flows';
import { cascadeLookupRoutes, cascadeRoutes } from './cascades';
import { reviewRequestCancelRoutes, reviewRequestRoutes } from './reviewRequests';
import { ratingRoutes } from './ratings';
import { channelRoutes } from './channels';
import { peopleRoutes } from './people';

export type { PublicRouteDeps } from './deps';

/**
 * Every public `/api/v1` route, in one list: the pipeline serves them and the OpenAPI document is
 * generated from them. Each resource has its own file in this folder; add a line here to mount yours
 * (see docs/gateway-routes.md).
 */
export function publicRoutes(deps: PublicRouteDeps): RouteSource[] {
  return [...pingRoutes(), ...locationRoutes(deps), ...contactRoutes(deps), ...webhookRoutes(deps), ...flowRoutes(deps), ...cascadeRoutes(deps), ...cascadeLookupRoutes(deps), ...reviewRequestRoutes(deps), ...reviewRequestCancelRoutes(deps), ...ratingRoutes(deps), ...channelRoutes(deps), ...peopleRoutes(deps)];
}
