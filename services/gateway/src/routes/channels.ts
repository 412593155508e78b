import { z } from 'zod';
import { MAX_RECIPIENTS_PER_REQUEST } from '@rrs/proto';
import type { ChannelCatalogEntry } from '@rrs/sender-kit';
import type { ChannelCatalogSource } from '../catalog/channelCatalog';
import { notFound } from '../http/errors';
import { defineRoute, type Route, type RouteProvider, type RouteSource } from '../http/route';
import { startCascade } from '../useCases/cascades';
import type { PublicRouteDeps } from './deps';

const CatalogEntryJson = z.object({
  key: z.string().meta({ description: '`EMAIL`, `SMS`, `MAX`, `TELEGRAM`, or a channel added later.' }),
  slug: z.string().meta({ description: 'Path segment of the send method.' }),
  label: z.string(),
  contactField: z.string().meta({ description: 'Recipient field the channel needs: `email` or `phone`.' }),
  configured: z.boolean().meta({ description: 'The channel is ready to send for your organization.' }),
  sendEndpoint: z.string().meta({ description: 'Path of the send method, e.g. `/api/v1/channels/email/send`.' }),
});

const ChannelsResponse = z.object({ channels: z.array(CatalogEntryJson) });

const Recipient = z.strictObject({
  name: z.string().max(200).optional().meta({ description: 'Substituted for `{{name}}`.' }),
  email: z.email().max(254).optional().meta({ description: 'Needed by channels whose contactField is `email`.' }),
  phone: z.string().max(64).optional().meta({ description: 'Needed by phone channels; any format, normalized to E.164.' }),
});

const SendBody = z.strictObject({
  locationId: z.string().min(1).max(64).meta({ description: 'An id from GET /locations; an unknown one is 404.' }),
  name: z.string().max(200).optional().meta({ description: 'Name of the mailing, for history.' }),
  externalId: z.string().max(200).optional().meta({ description: 'Your id (order number, deal id); returned in responses.' }),
  recipients: z.array(Recipient).min(1, `1 to ${MAX_RECIPIENTS_PER_REQUEST} recipients`).max(MAX_RECIPIENTS_PER_REQUEST, `at most ${MAX_RECIPIENTS_PER_REQUEST} recipients per request`),
});

const SendResponse = z.object({
  id: z.string().meta({ description: 'The id of the one-step cascade: GET /cascades/{id} shows it.' }),
  status: z.string().meta({ description: '`running`, or `finished` when every recipient was skipped.' }),
  channel: z.string(),
  queued: z.number().int().meta({ description: 'Recipients put in the queue.' }),
  skipped: z.number().int().meta({ description: "Recipients without the channel's contact field." }),
});

/** The spec lists 429 for the email and sms send methods only; a channel added later is rate limited too. */
const NOT_RATE_LIMITED = new Set(['max', 'telegram']);

export const sendEndpointOf = (slug: string) => `/api/v1/channels/${slug}/send`;

const operationIdOf = (slug: string) => `send${slug.split('-').map((p) => p[0].toUpperCase() + p.slice(1)).join('')}`;

function sendRoute(entry: ChannelCatalogEntry, deps: PublicRouteDeps, catalog: ChannelCatalogSource): Route {
  return defineRoute({
    method: 'POST',
    path: `/channels/${entry.slug}/send`,
    operationId: operationIdOf(entry.slug),
    summary: `Send a review request by ${entry.label}`,
    description: `A one-step cascade in the ${entry.key} channel: visible through GET /cascades/{id}, stopped by a rating, ended with the finish event. Recipients without \`${entry.contactField}\` are skipped and counted. This method exists while a ${entry.key} sender is running.`,
    tags: ['channels'],
    auth: 'apiKey',
    scope: 'cascades:write',
    rateLimited: !NOT_RATE_LIMITED.has(entry.slug),
    sends: true,
    request: { body: SendBody },
    responses: { 202: { description: 'Accepted: the messages are queued.', body: SendResponse } },
    errors: [404, 'channel_not_configured'],
    example: { body: { locationId: 'loc_1', recipients: [entry.contactField === 'email' ? { name: 'Anna', email: 'anna@example.com' } : { name: 'Anna', phone: '+7 916 123-45-67' }] } },
    handler: async ({ body, principal, metadata }) => {
      // The route list is cached per catalog version; a channel that left between two reads is gone.
      if (!catalog.list().some((e) => e.key === entry.key)) throw notFound(`no channel ${entry.slug}`);
      const r = await startCascade(deps.clients, { organizationId: principal.organization.id, ...body, channel: entry.key }, metadata);
      return { body: { id: r.id, status: r.status, channel: entry.key, queued: r.queued, skipped: r.skipped }, replayed: r.idempotentReplayed };
    },
  });
}

/**
 * GET /channels and one POST /channels/{slug}/send per channel in the catalog, both built from the
 * channels the running senders announce: a channel deployed later appears with its send method, and
 * leaves with its last sender, without a gateway release. No catalog source = an empty catalog.
 */
export function channelRoutes(deps: PublicRouteDeps): RouteSource[] {
  const catalog: ChannelCatalogSource = deps.channelCatalog ?? { list: () => [], version: 0 };
  const list = defineRoute({
    method: 'GET',
    path: '/channels',
    operationId: 'listChannels',
    summary: 'The channel catalog',
    description: 'The channels whose senders are running, with their readiness for your organization and their send method. Read it instead of hard-coding a list.',
    tags: ['channels'],
    auth: 'apiKey',
    scope: null,
    rateLimited: true,
    responses: { 200: { description: 'The catalog.', body: ChannelsResponse } },
    handler: async ({ principal, metadata }) => {
      const entries = catalog.list();
      const profile = entries.length > 0 ? await deps.clients.contacts.getSendingProfile({ organizationId: principal.organization.id }, { metadata }) : undefined;
      const configured = new Set((profile?.channels ?? []).filter((c) => c.configured).map((c) => c.channel));
      return {
        body: {
          channels: entries.map((e) => ({ key: e.key, slug: e.slug, label: e.label, contactField: e.contactField, configured: configured.has(e.key), sendEndpoint: sendEndpointOf(e.slug) })),
        },
      };
    },
  });
  let cached: { version: number; routes: Route[] } = { version: -1, routes: [] };
  const sends: RouteProvider = {
    routes() {
      if (cached.version !== catalog.version) {
        cached = { version: catalog.version, routes: catalog.list().map((e) => sendRoute(e, deps, catalog)) };
      }
      return cached.routes;
    },
  };
  return [list, sends];
}
