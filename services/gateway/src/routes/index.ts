import type { GatewayClients } from '../clients';
import type { RouteSource } from './registry';
import { pingRoutes } from './ping';
import { locationRoutes } from './locations';
import { contactRoutes } from './contacts';
import { webhookRoutes } from './webhooks';
import { flowRoutes } from './flows';
import { cascadeRoutes } from './cascades';
import { reviewRequestRoutes } from './reviewRequests';
import { channelRoutes } from './channels';
import type { ChannelCatalogSource } from '../catalog/channelCatalog';

/** What route factories may use. Transport only: domain logic lives in the services behind `clients`. */
export interface PublicRouteDeps {
  clients: GatewayClients;
  /** Absolute base of public links (`/r/<token>`), without a trailing slash. */
  publicBaseUrl: string;
  /** The live channel catalog (KV bucket `channels`); unset = an empty catalog. */
  channelCatalog?: ChannelCatalogSource;
}

/**
 * Every public `/api/v1` route, in one list: the dispatcher serves them and the OpenAPI document is
 * generated from them. Each resource has its own file in this folder; add a line here to mount yours
 * (see docs/gateway-routes.md).
 */
export function publicRoutes(deps: PublicRouteDeps): RouteSource[] {
  void deps;
  return [...pingRoutes(), ...locationRoutes(deps), ...contactRoutes(deps), ...webhookRoutes(deps), ...flowRoutes(deps), ...cascadeRoutes(deps), ...reviewRequestRoutes(deps), ...channelRoutes(deps)];
}
