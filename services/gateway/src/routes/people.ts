import { z } from 'zod';
import { defineRoute, type Route } from '../http/route';
import { erasePerson, getPersonErasure } from '../useCases/personErasure';
import type { PublicRouteDeps } from './deps';
import { PersonErasureStatus } from './enums';
import { EXAMPLE_IDS } from './shapes';

/*
 * Erasure per person (issue 35; docs/customer-respect.md, "Erasure"): POST /people/erase and
 * GET /people/erasures/{id}. Transport only: the scheduler reads the identifiers and records the request,
 * the services erase (useCases/personErasure.ts). Both need `contacts:write`: there is no read scope
 * for contacts, and that an erasure of someone happened is itself the person's data.
 */

/** The identifiers a person is erased by; the schema of the admin and console routes too. */
export const PersonErasureBody = z.strictObject({
  email: z.string().max(254).optional().meta({ description: 'The person\'s email (any case).' }),
  phone: z.string().max(64).optional().meta({ description: "The person's phone, any format; numbers without a country code are read in the organization's default region." }),
  contactExternalId: z.string().max(200).optional().meta({ description: 'The CRM id of the contact (`externalId` of POST /contacts, `contactExternalId` of a recipient).' }),
}).meta({ id: 'PersonErasureRequest', description: 'One or more of `email`, `phone`, `contactExternalId`: every record of the organization matching any of them, and every record sharing an address with those, is erased.' });

export const PersonErasureJson = z.object({
  id: z.string(),
  status: PersonErasureStatus,
  requestedAt: z.string(),
  doneAt: z.string().nullable().meta({ description: 'When every service the erasure covers had erased the person; null while pending.' }),
}).meta({ id: 'PersonErasure' });

export const EXAMPLE_ERASURE: z.infer<typeof PersonErasureJson> = { id: EXAMPLE_IDS.erasure, status: 'done', requestedAt: '2026-05-02T09:00:00.000Z', doneAt: '2026-05-02T09:00:00.350Z' };
export const EXAMPLE_ERASURE_BODY: z.infer<typeof PersonErasureBody> = { email: 'anna@example.com', phone: '+7 916 123-45-67' };
export const ERASURE_DESCRIPTION =
  'Erases one person from the organization: their contacts (with the consent they carried), cascade recipients, step addresses, review requests and private feedback are deleted or irreversibly anonymized; ratings stay as anonymous numbers, so counts and statistics do not change; an opt-out stays as a keyed hash and still holds. ' +
  'Not yet covered: the senders\' send logs, webhook deliveries, the CRM inbox, bot chats, stop replies and the development inbox (docs/customer-respect.md, "Erasure"). ' +
  'The erasure runs while the request waits: the answer is normally `done`; a `pending` one is finished by a retry.';

export function peopleRoutes({ clients }: PublicRouteDeps): Route[] {
  return [
    defineRoute({
      method: 'POST', path: '/people/erase', operationId: 'erasePerson', summary: 'Erase a person', tags: ['people'],
      description: ERASURE_DESCRIPTION,
      auth: 'apiKey', scope: 'contacts:write', rateLimited: true,
      request: { body: PersonErasureBody },
      responses: { 202: { description: 'The erasure, recorded (and normally done).', body: z.object({ id: z.string(), status: PersonErasureStatus }), example: { id: EXAMPLE_IDS.erasure, status: 'done' } } },
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
