import type { Logger } from '@rrs/runtime';
import { unaryService } from '@rrs/runtime';
import { idempotencyFromMetadata } from '@rrs/idempotency';
import { webhooksV1 } from '@rrs/proto';
import type { Delivery, Endpoint, WebhookEndpoints } from './endpoints';

const opt = (d: Date | null): Date | undefined => d ?? undefined;

function toEndpoint(e: Endpoint): webhooksV1.Endpoint {
  return {
    id: e.id,
    organizationId: e.organizationId,
    url: e.url,
    events: e.events,
    description: e.description,
    disabled: e.disabled,
    disabledReason: e.disabledReason ?? '',
    disabledAt: opt(e.disabledAt),
    failingSince: opt(e.failingSince),
    createdAt: e.createdAt,
    updatedAt: e.updatedAt,
    previousSecretExpiresAt: opt(e.previousSecretExpiresAt),
  };
}

function toDelivery(d: Delivery): webhooksV1.Delivery {
  return {
    id: d.id,
    endpointId: d.endpointId,
    eventId: d.eventId,
    eventType: d.eventType,
    status: d.status,
    attemptCount: d.attemptCount,
    nextAttemptAt: opt(d.nextAttemptAt),
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    attempts: d.attempts.map((a) => ({ ...a, statusCode: a.statusCode ?? 0 })),
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
        const r = await endpoints.create(req, idempotencyFromMetadata(md, req.organizationId));
        return { endpoint: toEndpoint(r.endpoint), secret: r.secret, idempotentReplayed: r.replayed };
      },
      async listEndpoints(req) {
        return { endpoints: (await endpoints.list(req.organizationId)).map(toEndpoint) };
      },
      async getEndpoint(req) {
        return { endpoint: toEndpoint(await endpoints.get(req.organizationId, req.id)) };
      },
      async updateEndpoint(req) {
        const e = await endpoints.update(req.organizationId, req.id, { url: req.url, events: req.events?.types, description: req.description, disabled: req.disabled });
        return { endpoint: toEndpoint(e) };
      },
      async deleteEndpoint(req) {
        await endpoints.delete(req.organizationId, req.id);
        return {};
      },
      async rotateSecret(req, md) {
        const r = await endpoints.rotateSecret(req.organizationId, req.id, idempotencyFromMetadata(md, req.organizationId));
        return { endpoint: toEndpoint(r.endpoint), secret: r.secret, idempotentReplayed: r.replayed };
      },
      async sendTestEvent(req, md) {
        const r = await endpoints.sendTestEvent(req.organizationId, req.id, idempotencyFromMetadata(md, req.organizationId));
        return { delivery: toDelivery(r.delivery), idempotentReplayed: r.replayed };
      },
      async listDeliveries(req) {
        const r = await endpoints.listDeliveries(req.organizationId, req.endpointId, { limit: req.limit, cursor: req.cursor });
        return { deliveries: r.deliveries.map(toDelivery), nextCursor: r.nextCursor ?? '' };
      },
      async replayDelivery(req, md) {
        const r = await endpoints.replay(req.organizationId, req.endpointId, req.deliveryId, idempotencyFromMetadata(md, req.organizationId));
        return { delivery: toDelivery(r.delivery), idempotentReplayed: r.replayed };
      },
    }, logger),
  };
}
