import { z } from 'zod';
import { CONTACT_FIELDS, MAX_RECIPIENTS_PER_REQUEST, isOneOf, type ContactField as ContactFieldName } from '@rrs/proto';
import type { ChannelCatalogEntry } from '@rrs/sender-kit';
import type { ChannelCatalogSource } from '../catalog/channelCatalog';
import { deliversMessages, PROVIDER_STATES, publicProviderState } from '../catalog/providerHealth';
import { notFound } from '../http/errors';
import { defineRoute, type Route, type RouteProvider, type RouteSource } from '../http/route';
import { startCascade } from '../useCases/cascades';
import type { PublicRouteDeps } from './deps';
import { CascadeStatus, ChannelKey, ContactField } from './enums';
import { ConsentAt, EXAMPLE_IDS, IgnoreCooldown } from './shapes';

const PublicProviderHealth = z.object({
  name: z.string().meta({ description: 'The provider, e.g. `smtp`, `postmark`, `smsc`, `smsru`, `max`, `telegram`, `sink`.' }),
  state: z.enum(PROVIDER_STATES).meta({ description: '`ok`: steps go to it; `degraded`: it failed and a trial step is testing it; `down`: skipped after provider faults (steps go to the next provider), or the messenger account can\'t send. The worst over the sender\'s replicas.' }),
  since: z.iso.datetime().meta({ description: 'Since when it has been in `state`.' }),
}).meta({ id: 'ChannelProviderHealth' });

const CatalogEntryJson = z.object({
  key: ChannelKey,
  slug: z.string().meta({ description: 'Path segment of the send method.' }),
  label: z.string(),
  contactField: ContactField,
  configured: z.boolean().meta({ description: 'The channel is ready to send for your organization: configured for it, and its sender reports it can send now (false while, e.g., the working messenger account is blocked).' }),
  sendEndpoint: z.string().meta({ description: 'Path of the send method, e.g. `/api/v1/channels/email/send`.' }),
  delivers: z.boolean().meta({ description: 'False when the channel\'s sender uses the `sink` provider (a staging deployment that asked for it by name): messages are recorded, not delivered. Production never uses the sink otherwise.' }),
  providers: z.array(PublicProviderHealth).meta({ description: "The channel's providers in failover order, with their health over the sender's running replicas (no credentials). Empty from a sender that does not announce them." }),
});

const ChannelsResponse = z.object({ channels: z.array(CatalogEntryJson) });

/** A catalog entry the gateway can serve: its contact field is one recipients have. */
type ServedEntry = ChannelCatalogEntry & { contactField: ContactFieldName };
const served = (entries: readonly ChannelCatalogEntry[]): ServedEntry[] => entries.filter((e): e is ServedEntry => isOneOf(CONTACT_FIELDS, e.contactField));

const RecipientName = z.string().max(200).optional().meta({ description: 'Substituted for `{{name}}`.' });
const Email = z.email().max(254);
const Phone = z.string().max(64).regex(/\S/, 'must not be blank');
const PHONE_FORMAT = "Any format; normalized to E.164 (numbers without a country code are read in the organization's region).";

/** A recipient of a channel's send method: the channel's contact field is required, the other one is optional (kept with the recipient). */
function recipientFor(contactField: ContactFieldName) {
  return z.strictObject({
    name: RecipientName,
    email: contactField === 'email' ? Email.meta({ description: 'Required: the address the message goes to.' }) : Email.optional().meta({ description: 'Optional; kept with the recipient.' }),
    phone: contactField === 'phone' ? Phone.meta({ description: `Required: the number the message goes to. ${PHONE_FORMAT}` }) : Phone.optional().meta({ description: `Optional; kept with the recipient. ${PHONE_FORMAT}` }),
    consentAt: ConsentAt,
  });
}

function sendBodyFor(contactField: ContactFieldName) {
  return z.strictObject({
    locationId: z.string().min(1).max(64).meta({ description: 'An id from GET /locations; an unknown one is 404.' }),
    name: z.string().max(200).optional().meta({ description: 'Name of the mailing, for history.' }),
    externalId: z.string().max(200).optional().meta({ description: 'Your id (order number, deal id); returned in responses.' }),
    recipients: z
      .array(recipientFor(contactField))
      .min(1, `1 to ${MAX_RECIPIENTS_PER_REQUEST} recipients`)
      .max(MAX_RECIPIENTS_PER_REQUEST, `at most ${MAX_RECIPIENTS_PER_REQUEST} recipients per request`),
    ignoreCooldown: IgnoreCooldown,
  });
}

/** The send result: `channel` is the endpoint's own key, a constant. */
function sendResponseFor(key: string) {
  return z.object({
    id: z.string().meta({ description: 'The id of the one-step cascade: GET /cascades/{id} shows it.' }),
    status: CascadeStatus,
    channel: z.literal(key).meta({ description: "This endpoint's channel key." }),
    queued: z.number().int().meta({ description: 'Recipients put in the queue.' }),
    skipped: z.number().int().meta({ description: 'Recipients not put in the queue, as in POST /cascades: opted out, no consent where required, or within the cooldown (every recipient here has the contact field the channel needs).' }),
  });
}

/** The spec lists 429 for the email and sms send methods only; a channel added later is rate limited too. */
const NOT_RATE_LIMITED = new Set(['max', 'telegram']);

export const sendEndpointOf = (slug: string) => `/api/v1/channels/${slug}/send`;

const operationIdOf = (slug: string) => `send${slug.split('-').map((p) => p[0].toUpperCase() + p.slice(1)).join('')}`;

function sendRoute(entry: ServedEntry, deps: PublicRouteDeps, catalog: ChannelCatalogSource): Route {
  const contact = entry.contactField === 'email' ? { name: 'Anna', email: 'anna@example.com' } : { name: 'Anna', phone: '+7 916 123-45-67' };
  return defineRoute({
    method: 'POST',
    path: `/channels/${entry.slug}/send`,
    operationId: operationIdOf(entry.slug),
    summary: `Send a review request by ${entry.label}`,
    description: `A one-step cascade in the ${entry.key} channel: visible through GET /cascades/{id}, stopped by a rating, ended with the finish event. Every recipient needs \`${entry.contactField}\` (a recipient without it is 400 naming it). This method exists while a ${entry.key} sender is running.`,
    tags: ['channels'],
    auth: 'apiKey',
    scope: 'cascades:write',
    rateLimited: !NOT_RATE_LIMITED.has(entry.slug),
    sends: true,
    recipients: ({ body }) => body.recipients.length,
    request: { body: sendBodyFor(entry.contactField) },
    responses: {
      202: {
        description: 'Accepted: the messages are queued.',
        body: sendResponseFor(entry.key),
        example: { id: EXAMPLE_IDS.cascade, status: 'running', channel: entry.key, queued: 1, skipped: 0 },
      },
    },
    errors: [404, 'channel_not_configured'],
    example: { body: { locationId: EXAMPLE_IDS.location, externalId: 'order-1042', recipients: [contact] } },
    handler: async ({ body, principal, metadata }) => {
      // The route list is cached per catalog version; a channel that left between two reads is gone.
      if (!served(catalog.list()).some((e) => e.key === entry.key)) throw notFound(`no channel ${entry.slug}`);
      const r = await startCascade(deps.clients, { organizationId: principal.organization.id, ...body, channel: entry.key }, metadata);
      return { body: { id: r.id, status: r.status, channel: entry.key, queued: r.queued, skipped: r.skipped }, replayed: r.idempotentReplayed, recipientBudget: r.recipientBudget };
    },
  });
}

/**
 * GET /channels and one POST /channels/{slug}/send per channel in the catalog, both built from the
 * channels the running senders announce: a channel deployed later appears with its send method (its
 * request requiring the entry's `contactField`, its result's `channel` its key), and leaves with its
 * last sender, without a gateway release. No catalog source = an empty catalog. An entry whose
 * `contactField` is not a field recipients have (CONTACT_FIELDS) cannot be served and is left out.
 */
export function channelRoutes(deps: PublicRouteDeps): RouteSource[] {
  const catalog: ChannelCatalogSource = deps.channelCatalog ?? { list: () => [], version: 0 };
  const list = defineRoute({
    method: 'GET',
    path: '/channels',
    operationId: 'listChannels',
    summary: 'The channel catalog',
    description:
      'The channels whose senders are running, with their readiness for your organization, their send method and their providers\' health. Read it instead of hard-coding a list: a channel deployed later appears here with its send method.',
    tags: ['channels'],
    auth: 'apiKey',
    scope: null,
    rateLimited: true,
    responses: {
      200: {
        description: 'The catalog.',
        body: ChannelsResponse,
        example: {
          channels: [
            { key: 'EMAIL', slug: 'email', label: 'Email', contactField: 'email', configured: true, sendEndpoint: '/api/v1/channels/email/send', delivers: true, providers: [
              { name: 'smtp', state: 'down', since: '2026-03-02T09:14:05.000Z' }, { name: 'postmark', state: 'ok', since: '2026-03-01T08:00:00.000Z' },
            ] },
            { key: 'SMS', slug: 'sms', label: 'SMS', contactField: 'phone', configured: false, sendEndpoint: '/api/v1/channels/sms/send', delivers: true, providers: [{ name: 'smsc', state: 'ok', since: '2026-03-01T08:00:00.000Z' }] },
          ],
        },
      },
    },
    handler: async ({ principal, metadata }) => {
      const entries = served(catalog.list());
      const profile = entries.length > 0 ? await deps.clients.contacts.getSendingProfile({ organizationId: principal.organization.id, locationId: '' }, { metadata }) : undefined;
      const configured = new Set((profile?.channels ?? []).filter((c) => c.configured).map((c) => c.channel));
      return {
        body: {
          channels: entries.map((e) => {
            const providers = catalog.providerHealth?.(e.key) ?? [];
            return {
              key: e.key, slug: e.slug, label: e.label, contactField: e.contactField, configured: configured.has(e.key) && !e.unavailable, sendEndpoint: sendEndpointOf(e.slug),
              delivers: deliversMessages(providers),
              providers: providers.map((p) => ({ name: p.name, state: publicProviderState(p.state), since: p.since.toISOString() })),
            };
          }),
        },
      };
    },
  });
  let cached: { version: number; routes: Route[] } = { version: -1, routes: [] };
  const sends: RouteProvider = {
    routes() {
      if (cached.version !== catalog.version) {
        cached = { version: catalog.version, routes: served(catalog.list()).map((e) => sendRoute(e, deps, catalog)) };
      }
      return cached.routes;
    },
  };
  return [list, sends];
}
