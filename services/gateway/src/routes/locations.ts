import { z } from 'zod';
import { defineRoute, type Route } from '../http/route';
import type { PublicRouteDeps } from './deps';
import { EXAMPLE_IDS } from './shapes';

const LocationItem = z.object({
  id: z.string(),
  name: z.string(),
  address: z.string(),
  city: z.string(),
});
const ListLocationsResponse = z.object({ locations: z.array(LocationItem) });

/** GET /api/v1/locations: the organization's locations, in creation order. */
export function locationRoutes({ clients }: PublicRouteDeps): Route[] {
  return [
    defineRoute({
      method: 'GET',
      path: '/locations',
      operationId: 'listLocations',
      summary: 'List locations',
      description: 'The points where reviews are collected. A location id is what `locationId` takes in the other methods. Deleted locations are not listed.',
      tags: ['locations'],
      auth: 'apiKey',
      scope: 'locations:read',
      rateLimited: true,
      responses: {
        200: {
          description: "The organization's locations.",
          body: ListLocationsResponse,
          example: { locations: [{ id: EXAMPLE_IDS.location, name: 'Tverskaya', address: 'Tverskaya st. 1', city: 'Moscow' }] },
        },
      },
      handler: async ({ principal, metadata }) => {
        const r = await clients.contacts.listLocations({ organizationId: principal.organization.id }, { metadata });
        return { body: { locations: r.locations.map((l) => ({ id: l.id, name: l.name, address: l.address, city: l.city })) } };
      },
    }),
  ];
}
