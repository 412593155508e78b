import type { Logger } from '@rrs/runtime';
import { unaryService } from '@rrs/runtime';
import { idempotencyFromMetadata } from '@rrs/idempotency';
import { webhooksV1 } from '@rrs/proto';
import type { Delivery, Endpoint, WebhookEndpoints } from './endpoints';

/** A timestamp the domain leaves null is left out of the message. */
const optionalTime = (time: Date | null): Date | undefined => time ?? undefined;

function toEndpoint(endpoint: Endpoint): webhooksV1.Endpoint {
  return {
    ...endpoint,
    disabledReason: endpoint.disabledReason ?? '',
    disabledAt: optionalTime(endpoint.disabledAt),
    failingSince: optionalTime(endpoint.failingSince),
    previousSecretExpiresAt: optionalTime(endpoint.previousSecretExpiresAt),
  };
}

function toDelivery(delivery: Delivery): webhooksV1.Delivery {
  return {
    ...delivery,
    nextAttemptAt: optionalTime(delivery.nextAttemptAt),
    attempts: delivery.attempts.map((attempt) => ({ ...attempt, statusCode: attempt.statusCode ?? 0 })),
  };
}

export const WEBHOOKS_SERVICE_NAME = 'rrs.webhooks.v1.WebhooksService';

/** gRPC transport of endpoint management: maps messages to domain calls and back, nothing else. */
export function webhooksGrpcService(endpoints: WebhookEndpoints, logger: Logger) {
  return {
    name: WEBHOOKS_SERVICE_NAME,
    definition: webhooksV1.WebhooksServiceService,
    implementation: unaryService<webhooksV1.WebhooksServiceServer>(WEBHOOKS_SERVICE_NAME, webhooksV1.WebhooksServiceService, {
      async createEndpoint(req, md) {
        const created = await endpoints.create(req, idempotencyFromMetadata(md, req.organizationId));
        return { endpoint: toEndpoint(created.endpoint), secret: created.secret, idempotentReplayed: created.replayed };
      },
      async listEndpoints(req) {
        return { endpoints: (await endpoints.list(req.organizationId)).map(toEndpoint) };
      },
      async getEndpoint(req) {
        return { endpoint: toEndpoint(await endpoints.get(req.organizationId, req.id)) };
      },
      async updateEndpoint(req) {
        const updated = await endpoints.update(req.organizationId, req.id, { url: req.url, events: req.events?.types, description: req.description, disabled: req.disabled });
        return { endpoint: toEndpoint(updated) };
      },
      async deleteEndpoint(req) {
        await endpoints.delete(req.organizationId, req.id);
        return {};
      },
      async rotateSecret(req, md) {
        const rotated = await endpoints.rotateSecret(req.organizationId, req.id, idempotencyFromMetadata(md, req.organizationId));
        return { endpoint: toEndpoint(rotated.endpoint), secret: rotated.secret, idempotentReplayed: rotated.replayed };
      },
      async sendTestEvent(req, md) {
        const sent = await endpoints.sendTestEvent(req.organizationId, req.id, idempotencyFromMetadata(md, req.organizationId));
        return { delivery: toDelivery(sent.delivery), idempotentReplayed: sent.replayed };
      },
      async listDeliveries(req) {
        const page = await endpoints.listDeliveries(req.organizationId, req.endpointId, { limit: req.limit, cursor: req.cursor });
        return { deliveries: page.deliveries.map(toDelivery), nextCursor: page.nextCursor ?? '' };
      },
      async replayDelivery(req, md) {
        const replayed = await endpoints.replay(req.organizationId, req.endpointId, req.deliveryId, idempotencyFromMetadata(md, req.organizationId));
        return { delivery: toDelivery(replayed.delivery), idempotentReplayed: replayed.replayed };
      },
    }, logger),
  };
}
