import { z } from 'zod';
import { CIRCUIT_STATES } from '@rrs/sender-kit';
import {
  ChannelConfiguration, CreateFlowBody, CreateLocationBody, createFlowRequest, createLocationRequest, EXAMPLE_EMAIL_TEMPLATE, EXAMPLE_FLOW, EXAMPLE_LOCATION, EXAMPLE_ORGANIZATION,
  EXAMPLE_SMS_TEMPLATE, Flow, flowJson, idOf, Location, locationJson, Organization, organizationJson, SetTemplateBody, Template, templateJson, UpdateFlowBody, updateFlowRequest,
  UpdateLocationBody, updateLocationRequest, UpdateOrganizationBody, updateOrganizationRequest,
} from '../admin/routes';
import type { ChannelCatalogSource } from '../catalog/channelCatalog';
import { deliversMessages } from '../catalog/providerHealth';
import type { GatewayClients } from '../clients';
import { defineRoute, type Route } from '../http/route';
import { ChannelKey } from '../routes/enums';
import { EXAMPLE_IDS } from '../routes/shapes';

/*
 * The console's configuration pages (docs/console.md): locations, flows, message templates, channels and
 * the organization's settings, for the session's organization. Transport only, like the admin API: the
 * same bodies, the same gRPC requests (admin/routes.ts); the session gate refuses a viewer's changes.
 */

export interface ConfigRouteDeps {
  clients: GatewayClients;
  /** PUBLIC_BASE_URL: the base of the review links the messages carry (the template previews use it). */
  publicBaseUrl: string;
  /** The live channel catalog (the senders' announcements); unset = none running. */
  channelCatalog?: ChannelCatalogSource;
}

/** What an organization may change of itself; its plan, balance, email confirmation, region and countries are the operator's. */
const UpdateSettingsBody = UpdateOrganizationBody.pick({ name: true, timeZone: true, locale: true, sendWindow: true, responseWindowMinutes: true, cooldownDays: true, requireConsent: true });

const ProviderHealth = z.object({
  name: z.string().meta({ description: 'The provider, e.g. `smsc`, `smsru`, `smtp`, `postmark`, `sink`.' }),
  state: z.enum(CIRCUIT_STATES).meta({ description: 'Its circuit breaker, the worst over the sender\'s replicas: `closed` (steps go to it), `open` (skipped after provider faults in a row; steps go to the next provider), `half_open` (one trial step may go).' }),
  since: z.iso.datetime().meta({ description: 'Since when the longest of the replicas in `state` has been in it.' }),
  lastFailureCode: z.string().nullable().meta({ description: 'The reason code of its most recent fault, e.g. `provider_unavailable`, `provider_auth_failed`.' }),
  lastFailureAt: z.iso.datetime().nullable(),
  replicas: z.number().int().meta({ description: 'Sender replicas that announced it.' }),
  replicasInState: z.number().int().meta({ description: 'How many of them are in `state`.' }),
}).meta({ id: 'ProviderHealth' });

const ChannelStatus = ChannelConfiguration.extend({
  label: z.string(),
  running: z.boolean().meta({ description: 'A sender of the channel is running (it is in the live catalog, GET /api/v1/channels).' }),
  available: z.boolean().meta({ description: "The running sender can send now; false while, e.g., the messenger's working account is blocked or logged out." }),
  unavailableReason: z.string().nullable().meta({ description: 'Why not, when not `available`, e.g. `account_blocked`.' }),
  sender: z.string().nullable().meta({ description: 'The service that announced it, e.g. `channel-sms`.' }),
  capabilities: z.array(z.string()),
  ready: z.boolean().meta({ description: 'Configured, running and available: steps in this channel go out (the catalog’s `configured`).' }),
  providers: z.array(ProviderHealth).meta({ description: "The channel's providers in failover order, with their circuit state (a messenger's working account: `open` while it can't send); empty when not running." }),
  delivers: z.boolean().meta({ description: 'Whether the channel\'s messages reach anyone: false when no sender runs it, or when the running sender uses the `sink` provider (asked for by name, e.g. a staging): messages are recorded, not delivered.' }),
}).meta({ id: 'ChannelStatus' });

const LocationParams = z.object({ locationId: idOf(EXAMPLE_IDS.location) });
const FlowParams = z.object({ flowId: idOf(EXAMPLE_IDS.flow) });
const ChannelParams = z.object({ channel: ChannelKey.meta({ examples: ['EMAIL'] }) });

export function configRoutes(deps: ConfigRouteDeps): Route[] {
  const { contacts, scheduler } = deps.clients;
  const catalog = () => deps.channelCatalog?.list() ?? [];

  return [
    // Locations (GET /locations is in routes.ts, with what a send names)
    defineRoute({
      method: 'POST', path: '/locations', operationId: 'createLocation', summary: 'Create a location', tags: ['locations'], auth: 'session',
      description: 'The body of the admin API: name, address, city, time zone, public review links (absolute https URLs; the console builds Google, Yandex Maps and 2GIS links from their ids).',
      request: { body: CreateLocationBody },
      responses: { 201: { description: 'The location.', body: z.object({ location: Location }), example: { location: EXAMPLE_LOCATION } } },
      example: { body: { name: 'Tverskaya', address: 'Tverskaya st. 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'google', url: 'https://search.google.com/local/writereview?placeid=ChIJLU7jZClu5kcR4PcOOO6p3I0' }] } },
      handler: async ({ body, principal, metadata }) => ({ body: { location: locationJson((await contacts.createLocation(createLocationRequest(principal.organization.id, body), { metadata })).location!) } }),
    }),
    defineRoute({
      method: 'PATCH', path: '/locations/{locationId}', operationId: 'updateLocation', summary: 'Update a location', tags: ['locations'], auth: 'session',
      description: 'Changes the fields sent; `reviewLinks` replaces every link. Another organization\'s location is 404.',
      request: { params: LocationParams, body: UpdateLocationBody },
      responses: { 200: { description: 'The location as it is now.', body: z.object({ location: Location }), example: { location: { ...EXAMPLE_LOCATION, city: 'Moscow' } } } },
      example: { body: { city: 'Moscow', reviewLinks: [{ provider: '2gis', url: 'https://2gis.ru/firm/70000001000000001/tab/reviews' }] } },
      handler: async ({ params, body, principal, metadata }) => ({ body: { location: locationJson((await contacts.updateLocation(updateLocationRequest(principal.organization.id, params.locationId, body), { metadata })).location!) } }),
    }),

    // Flows (GET /flows is in routes.ts)
    defineRoute({
      method: 'POST', path: '/flows', operationId: 'createFlow', summary: 'Create a flow', tags: ['flows'], auth: 'session',
      request: { body: CreateFlowBody },
      responses: { 201: { description: 'The flow.', body: z.object({ flow: Flow }), example: { flow: EXAMPLE_FLOW } } },
      example: { body: { name: 'Email, then SMS a day later', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 1440 }] } },
      handler: async ({ body, principal, metadata }) => ({ body: { flow: flowJson((await scheduler.createFlow(createFlowRequest(principal.organization.id, body), { metadata })).flow!) } }),
    }),
    defineRoute({
      method: 'PUT', path: '/flows/{flowId}', operationId: 'updateFlow', summary: 'Replace the name, steps and response window of a flow', tags: ['flows'], auth: 'session',
      description: 'Cascades already running keep the steps they started with. Another organization\'s flow is 404.',
      request: { params: FlowParams, body: UpdateFlowBody },
      responses: { 200: { description: 'The flow as it is now.', body: z.object({ flow: Flow }), example: { flow: { ...EXAMPLE_FLOW, name: 'Email only', steps: [{ order: 1, channel: 'EMAIL', delayMinutes: 0 }] } } } },
      example: { body: { name: 'Email only', steps: [{ channel: 'EMAIL', delayMinutes: 0 }] } },
      handler: async ({ params, body, principal, metadata }) => ({ body: { flow: flowJson((await scheduler.updateFlow(updateFlowRequest(principal.organization.id, params.flowId, body), { metadata })).flow!) } }),
    }),
    defineRoute({
      method: 'POST', path: '/flows/{flowId}/default', operationId: 'setDefaultFlow', summary: "Make a flow the organization's default", tags: ['flows'], auth: 'session',
      request: { params: FlowParams },
      responses: { 200: { description: 'The flow, now the default.', body: z.object({ flow: Flow }), example: { flow: EXAMPLE_FLOW } } },
      handler: async ({ params, principal, metadata }) => ({ body: { flow: flowJson((await scheduler.setDefaultFlow({ organizationId: principal.organization.id, id: params.flowId }, { metadata })).flow!) } }),
    }),

    // Message templates
    defineRoute({
      method: 'GET', path: '/templates', operationId: 'listTemplates', summary: 'The message templates', tags: ['templates'], auth: 'session',
      description: "The template in effect for each channel: the organization's own, or the default of its locale. MAX and TELEGRAM steps use the SMS template, with the location's name as the first line.",
      responses: {
        200: {
          description: 'The templates.',
          body: z.object({
            templates: z.array(Template),
            reviewLinkBase: z.string().meta({ description: 'The base every review link starts with (PUBLIC_BASE_URL): a link is `<reviewLinkBase>/r/<22-character token>`, so a preview has the length of what is sent.' }),
          }),
          example: { templates: [EXAMPLE_EMAIL_TEMPLATE, EXAMPLE_SMS_TEMPLATE], reviewLinkBase: 'https://reviews.example.com' },
        },
      },
      handler: async ({ principal, metadata }) => ({
        body: { templates: (await contacts.listTemplates({ organizationId: principal.organization.id }, { metadata })).templates.map(templateJson), reviewLinkBase: deps.publicBaseUrl.replace(/\/+$/, '') },
      }),
    }),
    defineRoute({
      method: 'PUT', path: '/templates/{channel}', operationId: 'setTemplate', summary: "Set a channel's message template", tags: ['templates'], auth: 'session',
      request: { params: ChannelParams, body: SetTemplateBody },
      responses: { 200: { description: 'The template.', body: z.object({ template: Template }), example: { template: EXAMPLE_EMAIL_TEMPLATE } } },
      example: { body: { subject: 'How was {{location}}?', body: 'Hello {{name}}, please rate your visit: {{link}}' } },
      handler: async ({ params, body, principal, metadata }) => ({ body: { template: templateJson((await contacts.setTemplate({ organizationId: principal.organization.id, channel: params.channel, subject: body.subject ?? '', body: body.body }, { metadata })).template!) } }),
    }),
    defineRoute({
      method: 'DELETE', path: '/templates/{channel}', operationId: 'resetTemplate', summary: "Go back to a channel's default template", tags: ['templates'], auth: 'session',
      request: { params: ChannelParams },
      responses: { 200: { description: 'The default template now in effect.', body: z.object({ template: Template }), example: { template: { ...EXAMPLE_SMS_TEMPLATE, isDefault: true } } } },
      handler: async ({ params, principal, metadata }) => ({ body: { template: templateJson((await contacts.resetTemplate({ organizationId: principal.organization.id, channel: params.channel }, { metadata })).template!) } }),
    }),

    // Channels
    defineRoute({
      method: 'GET', path: '/channels', operationId: 'listChannelStatus', summary: 'Channels: configured, running, available; the SMS balance', tags: ['channels'], auth: 'session',
      description:
        "Each channel the organization has a configuration for or a sender runs: whether the operator configured it for the organization, whether its sender is running and can send now (a messenger's working account that is blocked or logged out makes it unavailable, with the reason), and so whether its steps go out; its providers in failover order with their circuit breakers (a provider open on any replica of the sender is `open`). With the organization's SMS balance in parts.",
      responses: {
        200: {
          description: 'The channels, in the catalog order, then the configured channels no sender runs.',
          body: z.object({ channels: z.array(ChannelStatus), smsBalance: z.number().int().meta({ description: 'SMS parts the organization may still send.' }) }),
          example: {
            channels: [
              { channel: 'SMS', label: 'SMS', configured: true, running: true, available: true, unavailableReason: null, sender: 'channel-sms', capabilities: ['send', 'balance'], ready: true, providers: [
                { name: 'smsc', state: 'open', since: '2026-03-01T10:05:00.000Z', lastFailureCode: 'provider_unavailable', lastFailureAt: '2026-03-01T10:05:00.000Z', replicas: 2, replicasInState: 1 },
                { name: 'smsru', state: 'closed', since: '2026-03-01T09:00:00.000Z', lastFailureCode: null, lastFailureAt: null, replicas: 2, replicasInState: 2 },
              ], delivers: true },
              { channel: 'MAX', label: 'MAX', configured: true, running: true, available: false, unavailableReason: 'account_blocked', sender: 'channel-messenger', capabilities: ['send', 'reachability'], ready: false, providers: [
                { name: 'max', state: 'open', since: '2026-03-01T11:20:00.000Z', lastFailureCode: 'account_blocked', lastFailureAt: '2026-03-01T11:20:00.000Z', replicas: 1, replicasInState: 1 },
              ], delivers: true },
            ],
            smsBalance: 500,
          },
        },
      },
      handler: async ({ principal, metadata }) => {
        const organizationId = principal.organization.id;
        const [configurations, organization] = await Promise.all([
          contacts.listChannelConfigurations({ organizationId }, { metadata }),
          contacts.getOrganization({ id: organizationId }, { metadata }),
        ]);
        const configured = new Map(configurations.channels.map((c) => [c.channel, c.configured]));
        const entries = catalog();
        const running = entries.map((e) => {
          const isConfigured = configured.get(e.key) ?? false;
          const providers = deps.channelCatalog?.providerHealth?.(e.key) ?? [];
          return {
            channel: e.key, label: e.label, configured: isConfigured, running: true, available: !e.unavailable, unavailableReason: e.unavailable ? e.unavailableReason || null : null,
            sender: e.sender || null, capabilities: e.capabilities, ready: isConfigured && !e.unavailable,
            providers: providers.map((p) => ({
              ...p, since: p.since.toISOString(), lastFailureAt: p.lastFailureAt?.toISOString() ?? null,
            })),
            delivers: deliversMessages(providers),
          };
        });
        const notRunning = configurations.channels
          .filter((c) => !entries.some((e) => e.key === c.channel))
          .map((c) => ({ channel: c.channel, label: c.channel, configured: c.configured, running: false, available: false, unavailableReason: null, sender: null, capabilities: [], ready: false, providers: [], delivers: false }));
        return { body: { channels: [...running, ...notRunning], smsBalance: organization.organization!.smsBalance } };
      },
    }),

    // Settings
    defineRoute({
      method: 'GET', path: '/settings', operationId: 'getSettings', summary: "The organization's settings", tags: ['settings'], auth: 'session',
      description: 'Name, locale, time zone, send window, response window, cooldown, consent; and what only the operator changes: the plan, the SMS balance, the default region and allowed countries.',
      responses: { 200: { description: 'The organization.', body: z.object({ organization: Organization }), example: { organization: EXAMPLE_ORGANIZATION } } },
      handler: async ({ principal, metadata }) => ({ body: { organization: organizationJson((await contacts.getOrganization({ id: principal.organization.id }, { metadata })).organization!) } }),
    }),
    defineRoute({
      method: 'PATCH', path: '/settings', operationId: 'updateSettings', summary: "Change the organization's settings", tags: ['settings'], auth: 'session',
      description: 'Changes the fields sent; the others keep their value. The plan, the SMS balance and the rest of what the operator sets are not accepted here (400).',
      request: { body: UpdateSettingsBody },
      responses: { 200: { description: 'The organization as it is now.', body: z.object({ organization: Organization }), example: { organization: { ...EXAMPLE_ORGANIZATION, cooldownDays: 14 } } } },
      example: { body: { sendWindow: { start: '10:00', end: '20:00' }, cooldownDays: 14, requireConsent: true } },
      handler: async ({ body, principal, metadata }) => ({ body: { organization: organizationJson((await contacts.updateOrganization(updateOrganizationRequest(principal.organization.id, body), { metadata })).organization!) } }),
    }),
  ];
}
