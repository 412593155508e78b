import type { Metadata } from '@grpc/grpc-js';
import { idempotencyFromMetadata } from '@rrs/idempotency';
import { unaryService, type Logger, type Pool } from '@rrs/runtime';
import { schedulerV1 } from '@rrs/proto';
import type { Cascades } from './cascades';
import type { Flows } from './flows';
import { getDataRetention, listLifecycleActions, setDataRetention } from './lifecycleSettings';
import type { People } from './people';
import type { PersonErasures } from './personErasures';
import type { Reviews } from './reviews';

export const SERVICE_NAME = 'rrs.scheduler.v1.CascadeSchedulerService';

/** An idempotent call's answer as sent: the saved answer, and whether this call replayed it. */
function answered<Answer>({ result, replayed }: { result: Answer; replayed: boolean }): Answer & { idempotentReplayed: boolean } {
  return { ...result, idempotentReplayed: replayed };
}

/**
 * gRPC transport of the scheduler: maps messages to use cases and back, nothing else. Domain errors
 * reach the caller as the gRPC status of their kind (the runtime's unaryService maps them).
 */
export function schedulerGrpcService(parts: { flows: Flows; cascades: Cascades; reviews: Reviews; people: People; erasures: PersonErasures; pool: Pool }, logger: Logger) {
  const { flows, cascades, reviews, people, erasures, pool } = parts;
  const idempotency = (metadata: Metadata, organizationId: string) => idempotencyFromMetadata(metadata, organizationId);
  return {
    name: SERVICE_NAME,
    definition: schedulerV1.CascadeSchedulerServiceService,
    implementation: unaryService<schedulerV1.CascadeSchedulerServiceServer>(SERVICE_NAME, schedulerV1.CascadeSchedulerServiceService, {
      createFlow: async (req) => ({ flow: await flows.create(req) }),
      listFlows: async (req) => ({ flows: await flows.list(req.organizationId) }),
      updateFlow: async (req) => ({ flow: await flows.update(req) }),
      setDefaultFlow: async (req) => ({ flow: await flows.setDefault(req.organizationId, req.id) }),
      startCascade: async (req, metadata) => {
        const { contact, contactIdempotencyKey: key, contactIdempotencyFingerprint: fingerprint, ...start } = req;
        if (!contact) return answered(await cascades.start(start, idempotency(metadata, req.organizationId)));
        return answered(await cascades.startForContact({ ...start, contact, contactIdempotency: key ? { key, fingerprint } : undefined }, idempotency(metadata, req.organizationId)));
      },
      getCascade: async (req) => ({ cascade: await cascades.get(req.organizationId, req.id) }),
      listCascades: (req) => cascades.list(req),
      cancelCascade: async (req, metadata) => answered(await cascades.cancel(req.organizationId, req.id, idempotency(metadata, req.organizationId))),
      cancelCascadesByExternalId: async (req, metadata) => answered(await cascades.cancelByExternalId(req.organizationId, req.externalId, idempotency(metadata, req.organizationId))),
      listRatingFeed: (req) => reviews.ratingFeed(req),
      createReviewRequest: async (req, metadata) => answered(await reviews.create(req, idempotency(metadata, req.organizationId))),
      cancelReviewRequest: async (req, metadata) => answered(await reviews.cancel(req.organizationId, req.id, idempotency(metadata, req.organizationId))),
      getReviewForm: async (req) => ({ form: await reviews.getForm(req.token, req.recordOpen, req.forUnsubscribe ? 'unsubscribe' : 'review', req.botChannels) }),
      submitRating: (req) => reviews.submitRating(req.token, req.rating),
      listRatings: (req) => reviews.listRatings(req),
      getOverview: (req) => reviews.overview(req),
      submitFeedback: (req) => reviews.submitFeedback(req.token, req.text),
      unsubscribe: (req) => reviews.unsubscribe(req),
      getOrganizationSettings: async (req) => ({ settings: await reviews.getSettings(req.organizationId) }),
      setOrganizationSettings: async (req) => ({ settings: await reviews.setSettings(req.organizationId, req.lowRatingThreshold, req.maxRecipientsPerRequest) }),
      listSuppressions: (req) => people.listSuppressions(req),
      addSuppression: (req) => people.addSuppression(req),
      removeSuppression: (req) => people.removeSuppression(req),
      exportPerson: (req) => people.exportPerson(req),
      getDataRetention: async (req) => ({ retention: await getDataRetention(pool, req.organizationId) }),
      setDataRetention: async (req) => ({ retention: await setDataRetention(pool, req) }),
      listLifecycleActions: (req) => listLifecycleActions(pool, req),
      requestPersonErasure: (req, metadata) => erasures.request(req, idempotency(metadata, req.organizationId)),
      completePersonErasure: (req) => erasures.complete(req),
      getPersonErasure: (req) => erasures.get(req),
      recordPublicLinkClick: (req) => reviews.recordPublicLinkClick(req),
      setRatingHandled: (req) => reviews.setRatingHandled(req),
      claimBotLink: (req) => reviews.claimBotLink(req),
      recordBotOptOut: (req) => reviews.recordBotOptOut(req),
      getRating: (req) => reviews.getRating(req),
      updateRating: (req) => reviews.updateRating(req),
      replyToRating: (req) => reviews.replyToRating(req),
      getAlertSettings: async (req) => ({ settings: await reviews.getAlertSettings(req.organizationId) }),
      setAlertSettings: async (req) => ({ settings: await reviews.setAlertSettings(schedulerV1.AlertSettings.fromPartial(req.settings ?? {})) }),
      setMemberAlerts: async (req) => ({ settings: await reviews.setMemberAlerts(req) }),
      createStaffLinkCode: (req) => reviews.createStaffLinkCode(req),
      listStaffChats: (req) => reviews.listStaffChats(req.organizationId),
      unlinkStaffChat: (req) => reviews.unlinkStaffChat(req),
    }, logger),
  };
}
