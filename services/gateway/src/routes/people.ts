import { z } from 'zod';
import { defineRoute, type Route } from '../http/route';
import { erasePerson, getPersonErasure } from '../useCases/personErasure';
import type { PublicRouteDeps } from './deps';
import { ERASURE_DESCRIPTION, EXAMPLE_ERASURE, EXAMPLE_ERASURE_BODY, EXAMPLE_IDS, PersonErasureAccepted, PersonErasureBody, PersonErasureJson } from './shapes';

/*
 * Erasure per person (issue 35; docs/customer-respect.md, "Erasure"): POST /people/erase and
 * GET /people/erasures/{id}. Transport only: the scheduler reads the identifiers and records the request,
 * the services erase (useCases/personErasure.ts). Both need `contacts:write`: there is no read scope
 * for contacts, and that an erasure of someone happened is itself the person's data.
 */

export function peopleRoutes({ clients }: PublicRouteDeps): Route[] {
  return [
    defineRoute({
      method: 'POST', path: '/people/erase', operationId: 'erasePerson', summary: 'Erase a person', tags: ['people'],
      description: ERASURE_DESCRIPTION,
      auth: 'apiKey', scope: 'contacts:write', rateLimited: true,
      request: { body: PersonErasureBody },
      responses: { 202: { description: 'The erasure, recorded (and normally done).', body: PersonErasureAccepted, example: { id: EXAMPLE_IDS.erasure, status: 'done' } } },
      example: { body: EXAMPLE_ERASURE_BODY },
      handler: async ({ body, principal, metadata }) => {
        const r = await erasePerson(clients, { organizationId: principal.organization.id, ...body, actor: `api:${principal.keyId}` }, metadata);
        return { status: 202, body: { id: r.erasure.id, status: r.erasure.status }, replayed: r.replayed };
      },
    }),
    defineRoute({
      method: 'GET', path: '/people/erasures/{id}', operationId: 'getPersonErasure', summary: 'An erasure\'s status', tags: ['people'],
      description: 'Whether the erasure is done, and when. Another organization\'s or an unknown id is 404.',
      auth: 'apiKey', scope: 'contacts:write', rateLimited: true,
      request: { params: z.object({ id: z.string().min(1).max(64).meta({ examples: [EXAMPLE_IDS.erasure] }) }) },
      responses: { 200: { description: 'The erasure.', body: PersonErasureJson, example: EXAMPLE_ERASURE } },
      handler: async ({ params, principal, metadata }) => ({ body: await getPersonErasure(clients, principal.organization.id, params.id, metadata) }),
    }),
  ];
}
