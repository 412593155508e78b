import type { PromiseClient } from '@rrs/runtime';
import type { connectorsV1, contactsV1, schedulerV1, webhooksV1 } from '@rrs/proto';

/** The gRPC clients routes call; transport only, no domain logic lives in the gateway. */
export interface GatewayClients {
  contacts: PromiseClient<contactsV1.ContactsServiceClient>;
  scheduler: PromiseClient<schedulerV1.CascadeSchedulerServiceClient>;
  webhooks: PromiseClient<webhooksV1.WebhooksServiceClient>;
  connectors: PromiseClient<connectorsV1.ConnectorsServiceClient>;
}
