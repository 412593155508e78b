import type { Metadata } from '@grpc/grpc-js';
import { idempotencyFromMetadata } from '@rrs/idempotency';
import { unaryService, type Logger } from '@rrs/runtime';
import { schedulerV1 } from '@rrs/proto';
import type { Cascades } from './cascades';
import type { Flows } from './flows';
import type { Reviews } from './reviews';

export const SERVICE_NAME = 'rrs.scheduler.v1.CascadeSchedulerService';

/** gRPC transport of the scheduler: maps messages to domain calls and back, nothing else. */
export function schedulerGrpcService(parts: { flows: Flows; cascades: Cascades; reviews: Reviews }, logger: Logger) {
  const { flows, cascades, reviews } = parts;
  const idem = (md: Metadata, organizationId: string) => idempotencyFromMetadata(md, organizationId);
  return {
    name: SERVICE_NAME,
    definition: schedulerV1.CascadeSchedulerServiceService,
    implementation: unaryService<schedulerV1.CascadeSchedulerServiceServer>(SERVICE_NAME, schedulerV1.CascadeSchedulerServiceService, {
      async createFlow(req) {
        return { flow: await flows.create(req) };
      },
      async listFlows(req) {
        return { flows: await flows.list(req.organizationId) };
      },
      async updateFlow(req) {
        return { flow: await flows.update(req) };
      },
      async setDefaultFlow(req) {
        return { flow: await flows.setDefault(req.organizationId, req.id) };
      },
      async startCascade(req, md) {
        const { result, replayed } = await cascades.start(req, idem(md, req.organizationId));
        return { ...result, idempotentReplayed: replayed };
      },
      async getCascade(req) {
        return { cascade: await cascades.get(req.organizationId, req.id) };
      },
      async cancelCascade(req) {
        return { canceled: await cascades.cancel(req.organizationId, req.id) };
      },
      async createReviewRequest(req, md) {
        const { result, replayed } = await reviews.create(req, idem(md, req.organizationId));
        return { ...result, idempotentReplayed: replayed };
      },
      async getReviewForm(req) {
        return { form: await reviews.getForm(req.token, req.recordOpen) };
      },
      async submitRating(req) {
        return reviews.submitRating(req.token, req.rating);
      },
      async submitFeedback(req) {
        return reviews.submitFeedback(req.token, req.text);
      },
      async unsubscribe(req) {
        return reviews.unsubscribe(req.token);
      },
      async getOrganizationSettings(req) {
        return { settings: await reviews.getSettings(req.organizationId) };
      },
      async setOrganizationSettings(req) {
        return { settings: await reviews.setSettings(req.organizationId, req.lowRatingThreshold, req.maxRecipientsPerRequest) };
      },
    }, logger),
  };
}
