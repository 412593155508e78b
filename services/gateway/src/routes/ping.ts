import { z } from 'zod';
import { defineRoute, type Route } from '../http/route';
import { Scope } from './enums';
import { EXAMPLE_IDS } from './shapes';

const PingResponse = z.object({
  ok: z.literal(true),
  organization: z.object({ id: z.string(), name: z.string() }),
  scopes: z.array(Scope).meta({ description: 'The scopes granted to the key.' }),
});

/** GET /api/v1/ping: checks the key. */
export function pingRoutes(): Route[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/ping',
      operationId: 'ping',
      summary: 'Check the API key',
      description: 'Answers the organization the key belongs to and the scopes it grants. Needs only a valid key.',
      tags: ['account'],
      auth: 'apiKey',
      scope: null,
      rateLimited: true,
      responses: {
        200: {
          description: 'The key is valid.',
          body: PingResponse,
          example: { ok: true, organization: { id: EXAMPLE_IDS.organization, name: 'Acme Dental' }, scopes: ['locations:read', 'contacts:write', 'cascades:write', 'cascades:read', 'review-requests:write'] },
        },
      },
      handler: async ({ principal }) => ({
        body: { ok: true, organization: { id: principal.organization.id, name: principal.organization.name }, scopes: principal.scopes },
      }),
    }),
  ];
}
