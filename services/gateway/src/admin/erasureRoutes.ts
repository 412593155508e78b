import { z } from 'zod';
import type { GatewayClients } from '../clients';
import { defineRoute, type Route } from '../http/route';
import { ERASURE_DESCRIPTION, EXAMPLE_ERASURE, EXAMPLE_ERASURE_BODY, EXAMPLE_IDS, PersonErasureAccepted, PersonErasureBody, PersonErasureJson } from '../routes/shapes';
import { erasePerson, getPersonErasure } from '../useCases/personErasure';

/*
 * Erasure per person from the admin API (any organization, ADMIN_TOKEN) and from the console (the
 * session's organization; erasing is for owners and admins: the session gate refuses a viewer's POST
 * with 403 `read_only_role`, and checks the CSRF token). The same use case as POST /api/v1/people/erase.
 */

const ErasureId = z.string().min(1).max(64).meta({ examples: [EXAMPLE_IDS.erasure] });
const OrgParams = z.object({ organizationId: z.string().min(1).max(64).meta({ examples: [EXAMPLE_IDS.organization] }) });

export function adminErasureRoutes(clients: Pick<GatewayClients, 'scheduler' | 'contacts'>): Route[] {
  return [
    defineRoute({
      method: 'POST', path: '/organizations/{organizationId}/people/erase', operationId: 'erasePerson', summary: 'Erase a person', tags: ['people'], auth: 'adminToken',
      description: `${ERASURE_DESCRIPTION} Recorded as asked by \`admin\`. An unknown organization is 404.`,
      request: { params: OrgParams, body: PersonErasureBody },
      responses: { 202: { description: 'The erasure, recorded (and normally done).', body: PersonErasureAccepted, example: { id: EXAMPLE_IDS.erasure, status: 'done' } } },
      example: { body: EXAMPLE_ERASURE_BODY },
      handler: async ({ params, body, metadata }) => {
        const r = await erasePerson(clients, { organizationId: params.organizationId, ...body, actor: 'admin' }, metadata);
        return { status: 202, body: { id: r.erasure.id, status: r.erasure.status } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/people/erasures/{erasureId}', operationId: 'getPersonErasure', summary: "An erasure's status", tags: ['people'], auth: 'adminToken',
      description: "Whether the erasure is done, and when. Another organization's or an unknown id is 404.",
      request: { params: OrgParams.extend({ erasureId: ErasureId }) },
      responses: { 200: { description: 'The erasure.', body: PersonErasureJson, example: EXAMPLE_ERASURE } },
      handler: async ({ params, metadata }) => ({ body: await getPersonErasure(clients, params.organizationId, params.erasureId, metadata) }),
    }),
  ];
}

export function accountErasureRoutes(clients: Pick<GatewayClients, 'scheduler' | 'contacts'>): Route[] {
  return [
    defineRoute({
      method: 'POST', path: '/people/erase', operationId: 'erasePerson', summary: 'Erase a person', tags: ['settings'], auth: 'session',
      description: `${ERASURE_DESCRIPTION} Owners and admins only (a viewer is 403 \`read_only_role\`); recorded as asked by the member.`,
      request: { body: PersonErasureBody },
      responses: { 202: { description: 'The erasure, recorded (and normally done).', body: PersonErasureAccepted, example: { id: EXAMPLE_IDS.erasure, status: 'done' } } },
      example: { body: EXAMPLE_ERASURE_BODY },
      handler: async ({ principal, body, metadata }) => {
        const r = await erasePerson(clients, { organizationId: principal.organization.id, ...body, actor: `member:${principal.member.id}` }, metadata);
        return { status: 202, body: { id: r.erasure.id, status: r.erasure.status }, replayed: r.replayed };
      },
    }),
    defineRoute({
      method: 'GET', path: '/people/erasures/{id}', operationId: 'getPersonErasure', summary: "An erasure's status", tags: ['settings'], auth: 'session',
      description: "Whether the erasure is done, and when (no identifier of the person). Every member may read it. Another organization's or an unknown id is 404.",
      request: { params: z.object({ id: ErasureId }) },
      responses: { 200: { description: 'The erasure.', body: PersonErasureJson, example: EXAMPLE_ERASURE } },
      handler: async ({ principal, params, metadata }) => ({ body: await getPersonErasure(clients, principal.organization.id, params.id, metadata) }),
    }),
  ];
}
