import { unaryService, type Logger } from '@rrs/runtime';
import { schedulerV1 } from '@rrs/proto';
import type { Flows } from './flows';

export const SERVICE_NAME = 'rrs.scheduler.v1.CascadeSchedulerService';

/** gRPC transport of the scheduler: maps messages to domain calls and back, nothing else. */
export function schedulerGrpcService(flows: Flows, logger: Logger) {
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
    }, logger),
  };
}
