import type { GatewayClients } from '../clients';
import type { ChannelCatalogSource } from '../catalog/channelCatalog';

/** What public route factories may use. Transport only: domain logic lives in the services behind `clients`. */
export interface PublicRouteDeps {
  clients: GatewayClients;
  /** Absolute base of public links (`/r/<token>`), without a trailing slash. */
  publicBaseUrl: string;
  /** The live channel catalog (KV bucket `channels`); unset = an empty catalog. */
  channelCatalog?: ChannelCatalogSource;
}
