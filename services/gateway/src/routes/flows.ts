import type { schedulerV1 } from '@rrs/proto';
import { defineRoute, z, type Route } from './registry';
import type { PublicRouteDeps } from '.';

export const FlowStepJson = z.object({
  order: z.number().int().meta({ description: '1-based position in the flow.' }),
  channel: z.string().meta({ description: 'Channel key: `EMAIL`, `SMS`, `MAX`, `TELEGRAM`.' }),
  delayMinutes: z.number().int().meta({ description: 'Minutes after the last step actually sent to the recipient (step 1 goes at once).' }),
});
export const FlowJson = z.object({
  id: z.string(),
  name: z.string(),
  isDefault: z.boolean(),
  steps: z.array(FlowStepJson),
});
const ListFlowsResponse = z.object({ flows: z.array(FlowJson) });

export function flowJson(f: schedulerV1.Flow) {
  return { id: f.id, name: f.name, isDefault: f.isDefault, steps: f.steps.map((s) => ({ order: s.order, channel: s.channel, delayMinutes: s.delayMinutes })) };
}

/** GET /api/v1/flows: the organization's cascade flows, the default first. */
export function flowRoutes({ clients }: PublicRouteDeps): Route[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/flows',
      operationId: 'listFlows',
      summary: 'List cascade flows',
      description: 'A flow id is what `flowId` takes in POST /cascades and POST /contacts. The default flow (`isDefault`) is used when neither `flowId` nor `channel` is given.',
      tags: ['flows'],
      scope: 'cascades:read',
      rateLimited: true,
      responses: { 200: { description: "The organization's flows.", body: ListFlowsResponse } },
      handler: async ({ principal, metadata }) => {
        const r = await clients.scheduler.listFlows({ organizationId: principal.organization.id }, { metadata });
        return { body: { flows: r.flows.map(flowJson) } };
      },
    }),
  ];
}
