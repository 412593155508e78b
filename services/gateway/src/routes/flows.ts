import { z } from 'zod';
import { defineRoute, type Route } from '../http/route';
import type { PublicRouteDeps } from './deps';
import { EXAMPLE_FLOW_STEPS, EXAMPLE_IDS, FlowStepJson, flowStepJson } from './shapes';

const FlowJson = z.object({
  id: z.string(),
  name: z.string(),
  isDefault: z.boolean(),
  steps: z.array(FlowStepJson),
  responseWindowMinutes: z.number().int().nullable().meta({ description: "Minutes a recipient waits for a rating after this flow's last step went out before it finishes `exhausted`; null = the organization's (default 4 320, 3 days)." }),
});
const ListFlowsResponse = z.object({ flows: z.array(FlowJson) });

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
      auth: 'apiKey',
      scope: 'cascades:read',
      rateLimited: true,
      responses: {
        200: {
          description: "The organization's flows.",
          body: ListFlowsResponse,
          example: {
            flows: [
              { id: EXAMPLE_IDS.flow, name: 'Email, then SMS a day later', isDefault: true, steps: EXAMPLE_FLOW_STEPS, responseWindowMinutes: null },
              { id: '0190e0e0-3333-7000-8000-000000000004', name: 'SMS only', isDefault: false, steps: [{ order: 1, channel: 'SMS', delayMinutes: 0 }], responseWindowMinutes: 1440 },
            ],
          },
        },
      },
      handler: async ({ principal, metadata }) => {
        const r = await clients.scheduler.listFlows({ organizationId: principal.organization.id }, { metadata });
        return { body: { flows: r.flows.map((f) => ({ id: f.id, name: f.name, isDefault: f.isDefault, steps: f.steps.map(flowStepJson), responseWindowMinutes: f.responseWindowMinutes ?? null })) } };
      },
    }),
  ];
}
