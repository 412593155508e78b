import { z } from 'zod';
import { DEFAULT_COOLDOWN_DAYS, MAX_COOLDOWN_DAYS, MAX_FLOW_STEPS, MAX_RESPONSE_WINDOW_MINUTES, SCOPES, SEND_WINDOW_TIME_PATTERN, type contactsV1, type schedulerV1 } from '@rrs/proto';
import type { GatewayClients } from '../clients';
import { defineRoute, type Route } from '../http/route';
import { ChannelKey, Locale, Plan, Scope } from '../routes/enums';
import { EXAMPLE_IDS } from '../routes/shapes';

/*
 * Every admin operation. Transport only: the contacts service (organizations, keys, locations,
 * templates, channels, SMS balance) and the cascade scheduler (flows) own the rules; the schemas here
 * refuse what is malformed before any call and document the shapes.
 */

export const Id = z.string().min(1).max(64);
/** A path parameter's id, with the example the document shows for it. */
export const idOf = (example: string) => Id.meta({ examples: [example] });
export const OrganizationId = idOf(EXAMPLE_IDS.organization);
export const OrgParams = z.object({ organizationId: OrganizationId });

const SEND_WINDOW_DOC = 'Local hours when steps may go out (docs/customer-respect.md): in the time zone of the recipient\'s location, else the organization\'s. A step due outside waits until the window opens.';
const LocalTime = z.string().regex(SEND_WINDOW_TIME_PATTERN, 'must be a local time HH:MM (00:00–23:59)');
export const SendWindowInput = z.strictObject({
  start: LocalTime.meta({ description: 'Opens, HH:MM local.', examples: ['09:00'] }),
  end: LocalTime.meta({ description: 'Closes, HH:MM local; before `start` = the window crosses midnight.', examples: ['21:00'] }),
  days: z.array(z.number().int().min(1).max(7)).max(7).optional().meta({ description: 'ISO weekdays the window opens on (1 = Monday … 7 = Sunday); absent or [] = every day.' }),
  channels: z.array(ChannelKey).max(16).optional().meta({ description: 'Channels it holds; absent or [] = SMS, MAX and TELEGRAM (email goes out at any time).' }),
}).meta({ description: SEND_WINDOW_DOC });
const SendWindow = z.object({ start: z.string(), end: z.string(), days: z.array(z.number().int()), channels: z.array(ChannelKey) }).meta({ description: SEND_WINDOW_DOC });

export const ResponseWindowMinutes = z.number().int().min(0).max(MAX_RESPONSE_WINDOW_MINUTES);
const RESPONSE_WINDOW_DOC = 'Minutes a recipient waits for a rating after its last step went out before it finishes `exhausted` (0 = at once; docs/cascades.md).';

const COOLDOWN_DOC = 'Days after a review request went out to a person (matched by email or phone across locations and cascades), or after they rated, during which no other is sent to them: such recipients are skipped with reason `cooldown` unless the request sets `ignoreCooldown` (docs/customer-respect.md). 0 = no cooldown.';
export const CooldownDays = z.number().int().min(0).max(MAX_COOLDOWN_DAYS);
const REQUIRE_CONSENT_DOC = 'Skip recipients given without `consentAt` (reason `no_consent`; docs/customer-respect.md).';
const ALLOWED_COUNTRIES_DOC =
  'ISO 3166 regions whose phone numbers SMS, MAX and TELEGRAM send to; a phone elsewhere is refused like a premium-rate one (400 `phone_not_allowed` on POST /contacts, steps skipped `phone_not_allowed`; docs/customer-respect.md). [] = `defaultRegion` only.';
const AllowedCountries = z.array(z.string().regex(/^[A-Z]{2}$/)).max(250);

export const Organization = z.object({
  id: z.string(),
  name: z.string(),
  plan: Plan,
  emailConfirmed: z.boolean(),
  smsBalance: z.number().int().meta({ description: 'SMS parts the organization may still send.' }),
  timeZone: z.string(),
  locale: Locale,
  defaultRegion: z.string().meta({ description: 'ISO 3166 region used to read phone numbers written without a country code.' }),
  sendWindow: SendWindow.nullable().meta({ description: 'Null: steps go out at any time.' }),
  responseWindowMinutes: z.number().int().meta({ description: `${RESPONSE_WINDOW_DOC} For one-channel sends and flows that set none.` }),
  cooldownDays: z.number().int().meta({ description: COOLDOWN_DOC }),
  requireConsent: z.boolean().meta({ description: REQUIRE_CONSENT_DOC }),
  allowedCountries: z.array(z.string()).meta({ description: ALLOWED_COUNTRIES_DOC }),
  createdAt: z.string(),
});
export const OrganizationFields = {
  name: z.string().min(1).max(200),
  plan: Plan,
  emailConfirmed: z.boolean(),
  smsBalance: z.number().int().min(0).max(1_000_000_000),
  timeZone: z.string().min(1).max(64).meta({ description: 'IANA time zone, e.g. Europe/Moscow.' }),
  locale: Locale,
  defaultRegion: z.string().regex(/^[A-Z]{2}$/),
};
const CreateOrganizationBody = z.strictObject({
  name: OrganizationFields.name,
  plan: OrganizationFields.plan.optional().meta({ description: 'Default `trial`.' }),
  emailConfirmed: OrganizationFields.emailConfirmed.optional(),
  smsBalance: OrganizationFields.smsBalance.optional().meta({ description: 'Opening balance, recorded in the ledger.' }),
  timeZone: OrganizationFields.timeZone.optional().meta({ description: 'Default UTC.' }),
  locale: OrganizationFields.locale.optional().meta({ description: 'Default `en`; chooses the default message templates.' }),
  defaultRegion: OrganizationFields.defaultRegion.optional().meta({ description: 'Default RU.' }),
  sendWindow: SendWindowInput.nullable().optional().meta({ description: 'Default 09:00–21:00 every day for SMS, MAX and TELEGRAM; null = any time.' }),
  responseWindowMinutes: ResponseWindowMinutes.optional().meta({ description: `${RESPONSE_WINDOW_DOC} Default 4 320 (3 days).` }),
  cooldownDays: CooldownDays.optional().meta({ description: `${COOLDOWN_DOC} Default ${DEFAULT_COOLDOWN_DAYS}.` }),
  requireConsent: z.boolean().optional().meta({ description: `${REQUIRE_CONSENT_DOC} Default false.` }),
  allowedCountries: AllowedCountries.optional().meta({ description: `${ALLOWED_COUNTRIES_DOC} Default [].` }),
});
export const UpdateOrganizationBody = z.strictObject({
  name: OrganizationFields.name.optional(),
  plan: OrganizationFields.plan.optional(),
  emailConfirmed: OrganizationFields.emailConfirmed.optional(),
  smsBalance: OrganizationFields.smsBalance.optional().meta({ description: 'Sets the balance; the difference is recorded in the ledger as an adjustment.' }),
  timeZone: OrganizationFields.timeZone.optional(),
  locale: OrganizationFields.locale.optional(),
  defaultRegion: OrganizationFields.defaultRegion.optional(),
  sendWindow: SendWindowInput.nullable().optional().meta({ description: 'Replaces the window; null = any time; absent = unchanged.' }),
  responseWindowMinutes: ResponseWindowMinutes.optional().meta({ description: RESPONSE_WINDOW_DOC }),
  cooldownDays: CooldownDays.optional().meta({ description: COOLDOWN_DOC }),
  requireConsent: z.boolean().optional().meta({ description: REQUIRE_CONSENT_DOC }),
  allowedCountries: AllowedCountries.optional().meta({ description: `${ALLOWED_COUNTRIES_DOC} Replaces the list; absent = unchanged.` }),
});

export const ApiKey = z.object({
  id: z.string(),
  name: z.string(),
  scopes: z.array(Scope),
  prefix: z.string().meta({ description: 'The first characters of the key, for display.' }),
  last4: z.string(),
  createdAt: z.string(),
  revokedAt: z.string().nullable(),
});

const ReviewLink = z.strictObject({
  provider: z.string().min(1).max(32).meta({ description: 'e.g. google, yandex, 2gis.' }),
  url: z.string().min(1).max(2048).meta({ description: 'An absolute https URL of the public review page.' }),
});
export const Location = z.object({
  id: z.string(),
  name: z.string(),
  address: z.string(),
  city: z.string(),
  timeZone: z.string().meta({ description: "IANA time zone; empty = the organization's." }),
  reviewLinks: z.array(z.object({ provider: z.string(), url: z.string() })),
  sendWindow: SendWindow.nullable().meta({ description: "This location's own window; null = the organization's applies." }),
  createdAt: z.string(),
  updatedAt: z.string(),
});
const LocationParams = z.object({ organizationId: OrganizationId, locationId: idOf(EXAMPLE_IDS.location) });
export const CreateLocationBody = z.strictObject({
  name: z.string().min(1).max(200),
  address: z.string().max(500).optional(),
  city: z.string().max(200).optional(),
  timeZone: z.string().max(64).optional(),
  reviewLinks: z.array(ReviewLink).max(20).optional(),
  sendWindow: SendWindowInput.nullable().optional().meta({ description: "This location's own window; absent or null = the organization's." }),
});
export const UpdateLocationBody = z.strictObject({
  name: z.string().min(1).max(200).optional(),
  address: z.string().max(500).optional(),
  city: z.string().max(200).optional(),
  timeZone: z.string().max(64).optional(),
  reviewLinks: z.array(ReviewLink).max(20).optional().meta({ description: 'Replaces every link; [] removes them all.' }),
  sendWindow: SendWindowInput.nullable().optional().meta({ description: "Replaces this location's window; null = the organization's applies; absent = unchanged." }),
});

const FLOW_STEPS = `a flow has 1 to ${MAX_FLOW_STEPS} steps`;
const FlowStep = z.strictObject({ channel: ChannelKey, delayMinutes: z.number().int().min(0).max(525_600) });
export const Flow = z.object({
  id: z.string(),
  name: z.string(),
  isDefault: z.boolean(),
  steps: z.array(z.object({ order: z.number().int(), channel: ChannelKey, delayMinutes: z.number().int() })),
  responseWindowMinutes: z.number().int().nullable().meta({ description: `${RESPONSE_WINDOW_DOC} Null = the organization's.` }),
});
const FlowParams = z.object({ organizationId: OrganizationId, flowId: idOf(EXAMPLE_IDS.flow) });
export const CreateFlowBody = z.strictObject({
  name: z.string().min(1).max(200),
  steps: z.array(FlowStep).min(1, FLOW_STEPS).max(MAX_FLOW_STEPS, FLOW_STEPS).meta({ description: 'In order; step 1 is sent at once whatever its delay.' }),
  isDefault: z.boolean().optional().meta({ description: "Make it the organization's default flow." }),
  responseWindowMinutes: ResponseWindowMinutes.nullable().optional().meta({ description: `${RESPONSE_WINDOW_DOC} Absent or null = the organization's.` }),
});
export const UpdateFlowBody = z.strictObject({
  name: z.string().min(1).max(200),
  steps: z.array(FlowStep).min(1, FLOW_STEPS).max(MAX_FLOW_STEPS, FLOW_STEPS),
  responseWindowMinutes: ResponseWindowMinutes.nullable().optional().meta({ description: `${RESPONSE_WINDOW_DOC} Replaced with the steps: absent or null = the organization's.` }),
});

export const Template = z.object({
  channel: ChannelKey,
  subject: z.string().meta({ description: 'EMAIL only; empty for the other channels.' }),
  body: z.string(),
  isDefault: z.boolean().meta({ description: "True when this is the default of the organization's locale." }),
});
const ChannelParams = z.object({ organizationId: OrganizationId, channel: ChannelKey.meta({ examples: ['EMAIL'] }) });
export const SetTemplateBody = z.strictObject({
  subject: z.string().max(200).optional().meta({ description: 'Required for EMAIL; not allowed for other channels.' }),
  body: z.string().min(1).max(4000).meta({ description: 'Placeholders: {{name}}, {{location}}, {{link}}; {{link}} is required.' }),
});
export const ChannelConfiguration = z.object({ channel: ChannelKey, configured: z.boolean() });
const SetChannelBody = z.strictObject({ configured: z.boolean() });
const CreditBody = z.strictObject({ parts: z.number().int().min(1).max(1_000_000), reason: z.string().max(500).optional().meta({ description: 'Kept in the ledger, e.g. an invoice number.' }) });

export const EXAMPLE_ORGANIZATION = {
  id: EXAMPLE_IDS.organization, name: 'Acme Dental', plan: 'standard', emailConfirmed: true, smsBalance: 500,
  timeZone: 'Europe/Moscow', locale: 'ru', defaultRegion: 'RU', sendWindow: { start: '09:00', end: '21:00', days: [], channels: [] }, responseWindowMinutes: 4320,
  cooldownDays: 30, requireConsent: false, allowedCountries: [], createdAt: '2026-05-01T09:00:00.000Z',
};
export const EXAMPLE_API_KEY = {
  id: '0190e0e0-8888-7000-8000-000000000008', name: 'CRM', scopes: ['locations:read', 'contacts:write'], prefix: 'rrs_live_3f9a', last4: 'x7Qe',
  createdAt: '2026-05-01T09:00:00.000Z', revokedAt: null,
};
export const EXAMPLE_LOCATION = {
  id: EXAMPLE_IDS.location, name: 'Tverskaya', address: 'Tverskaya st. 1', city: 'Moscow', timeZone: 'Europe/Moscow',
  reviewLinks: [{ provider: 'yandex', url: 'https://yandex.ru/maps/org/1/reviews/' }], sendWindow: null, createdAt: '2026-05-01T09:00:00.000Z', updatedAt: '2026-05-01T09:00:00.000Z',
};
export const EXAMPLE_FLOW = { id: EXAMPLE_IDS.flow, name: 'Email, then SMS a day later', isDefault: true, steps: [{ order: 1, channel: 'EMAIL', delayMinutes: 0 }, { order: 2, channel: 'SMS', delayMinutes: 1440 }], responseWindowMinutes: null };
export const EXAMPLE_EMAIL_TEMPLATE = { channel: 'EMAIL', subject: 'How was {{location}}?', body: 'Hello {{name}}, please rate your visit: {{link}}', isDefault: false };
export const EXAMPLE_SMS_TEMPLATE = { channel: 'SMS', subject: '', body: '{{location}}: rate your visit {{link}}', isDefault: true };

const iso = (d: Date | undefined) => (d ? d.toISOString() : '');
const sendWindowJson = (w: contactsV1.SendWindow | undefined) => (w ? { start: w.start, end: w.end, days: w.days, channels: w.channels } : null);
/** A request's window: absent = unchanged (or the default), null = none. */
export const sendWindowSetting = (w: z.infer<typeof SendWindowInput> | null | undefined): contactsV1.SendWindowSetting | undefined =>
  w === undefined ? undefined : { window: w === null ? undefined : { start: w.start, end: w.end, days: w.days ?? [], channels: w.channels ?? [] } };
export const organizationJson = (o: contactsV1.Organization) => ({
  id: o.id, name: o.name, plan: o.plan, emailConfirmed: o.emailConfirmed, smsBalance: o.smsBalance,
  timeZone: o.timeZone, locale: o.locale, defaultRegion: o.defaultRegion, sendWindow: sendWindowJson(o.sendWindow), responseWindowMinutes: o.responseWindowMinutes,
  cooldownDays: o.cooldownDays, requireConsent: o.requireConsent, allowedCountries: o.allowedCountries, createdAt: iso(o.createdAt),
});
export const apiKeyJson = (k: contactsV1.ApiKey) => ({ id: k.id, name: k.name, scopes: k.scopes, prefix: k.prefix, last4: k.last4, createdAt: iso(k.createdAt), revokedAt: k.revokedAt ? k.revokedAt.toISOString() : null });
export const locationJson = (l: contactsV1.Location) => ({
  id: l.id, name: l.name, address: l.address, city: l.city, timeZone: l.timeZone,
  reviewLinks: l.reviewLinks.map((r) => ({ provider: r.provider, url: r.url })), sendWindow: sendWindowJson(l.sendWindow), createdAt: iso(l.createdAt), updatedAt: iso(l.updatedAt),
});
export const flowJson = (f: schedulerV1.Flow) => ({
  id: f.id, name: f.name, isDefault: f.isDefault, steps: f.steps.map((s) => ({ order: s.order, channel: s.channel, delayMinutes: s.delayMinutes })), responseWindowMinutes: f.responseWindowMinutes ?? null,
});
/*
 * The gRPC requests of the writes the admin API and the account API (account/configRoutes.ts) share: one
 * body, one request, whoever names the organization (the path here, the session there).
 */
export const createLocationRequest = (organizationId: string, body: z.infer<typeof CreateLocationBody>): contactsV1.CreateLocationRequest => ({
  organizationId, name: body.name, address: body.address ?? '', city: body.city ?? '', timeZone: body.timeZone ?? '', reviewLinks: body.reviewLinks ?? [], sendWindow: sendWindowSetting(body.sendWindow),
});
export const updateLocationRequest = (organizationId: string, id: string, body: z.infer<typeof UpdateLocationBody>): contactsV1.UpdateLocationRequest => ({
  organizationId, id, name: body.name, address: body.address, city: body.city, timeZone: body.timeZone,
  reviewLinks: body.reviewLinks ?? [], replaceReviewLinks: body.reviewLinks !== undefined, sendWindow: sendWindowSetting(body.sendWindow),
});
const flowSteps = (steps: z.infer<typeof CreateFlowBody>['steps']) => steps.map((step, i) => ({ order: i + 1, ...step }));
export const createFlowRequest = (organizationId: string, body: z.infer<typeof CreateFlowBody>): schedulerV1.CreateFlowRequest => ({
  organizationId, name: body.name, isDefault: body.isDefault ?? false, steps: flowSteps(body.steps), responseWindowMinutes: body.responseWindowMinutes ?? undefined,
});
export const updateFlowRequest = (organizationId: string, id: string, body: z.infer<typeof UpdateFlowBody>): schedulerV1.UpdateFlowRequest => ({
  organizationId, id, name: body.name, steps: flowSteps(body.steps), responseWindowMinutes: body.responseWindowMinutes ?? undefined,
});
export const updateOrganizationRequest = (id: string, body: Partial<z.infer<typeof UpdateOrganizationBody>>): contactsV1.UpdateOrganizationRequest => ({
  id, ...body, sendWindow: sendWindowSetting(body.sendWindow), allowedCountries: body.allowedCountries === undefined ? undefined : { countries: body.allowedCountries },
});
export const templateJson = (t: contactsV1.MessageTemplate) => ({ channel: t.channel, subject: t.subject, body: t.body, isDefault: t.isDefault });

export function adminRoutes(clients: GatewayClients): Route[] {
  const { contacts, scheduler } = clients;
  /** Flows live in the scheduler, which does not know organizations: the directory is asked first. */
  const requireOrganization = (organizationId: string, metadata: Record<string, string>) => contacts.getOrganization({ id: organizationId }, { metadata });

  return [
    // Organizations
    defineRoute({
      method: 'POST', path: '/organizations', operationId: 'createOrganization', summary: 'Create an organization', tags: ['organizations'], auth: 'adminToken',
      request: { body: CreateOrganizationBody },
      responses: { 201: { description: 'The organization.', body: z.object({ organization: Organization }), example: { organization: EXAMPLE_ORGANIZATION } } },
      example: { body: { name: 'Acme Dental', plan: 'standard', emailConfirmed: true, smsBalance: 500, timeZone: 'Europe/Moscow', locale: 'ru', defaultRegion: 'RU' } },
      handler: async ({ body, metadata }) => {
        const r = await contacts.createOrganization({
          name: body.name, plan: body.plan ?? '', emailConfirmed: body.emailConfirmed ?? false, smsBalance: body.smsBalance ?? 0,
          timeZone: body.timeZone ?? '', locale: body.locale ?? '', defaultRegion: body.defaultRegion ?? '', sendWindow: sendWindowSetting(body.sendWindow), responseWindowMinutes: body.responseWindowMinutes,
          cooldownDays: body.cooldownDays, requireConsent: body.requireConsent,
          allowedCountries: body.allowedCountries === undefined ? undefined : { countries: body.allowedCountries },
        }, { metadata });
        return { body: { organization: organizationJson(r.organization!) } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations', operationId: 'listOrganizations', summary: 'List organizations', tags: ['organizations'], auth: 'adminToken',
      description: 'In creation order, one page at a time: pass `nextAfter` as `after` for the next page.',
      request: {
        query: z.object({
          limit: z.coerce.number().int().min(1).max(500).optional().meta({ description: 'Page size, 1 to 500.' }),
          after: z.string().max(64).optional().meta({ description: '`nextAfter` of the previous page.', examples: [EXAMPLE_IDS.organization] }),
        }),
      },
      responses: { 200: { description: 'One page of organizations.', body: z.object({ organizations: z.array(Organization), nextAfter: z.string().nullable() }), example: { organizations: [EXAMPLE_ORGANIZATION], nextAfter: EXAMPLE_IDS.organization } } },
      example: { query: { limit: '1' } },
      handler: async ({ query, metadata }) => {
        const r = await contacts.listOrganizations({ limit: query.limit ?? 0, after: query.after ?? '' }, { metadata });
        return { body: { organizations: r.organizations.map(organizationJson), nextAfter: r.nextAfter || null } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}', operationId: 'getOrganization', summary: 'Get an organization', tags: ['organizations'], auth: 'adminToken',
      request: { params: OrgParams },
      responses: { 200: { description: 'The organization.', body: z.object({ organization: Organization }), example: { organization: EXAMPLE_ORGANIZATION } } },
      handler: async ({ params, metadata }) => ({ body: { organization: organizationJson((await contacts.getOrganization({ id: params.organizationId }, { metadata })).organization!) } }),
    }),
    defineRoute({
      method: 'PATCH', path: '/organizations/{organizationId}', operationId: 'updateOrganization', summary: 'Update an organization', tags: ['organizations'], auth: 'adminToken',
      description: 'Changes the fields sent; the others keep their value.',
      request: { params: OrgParams, body: UpdateOrganizationBody },
      responses: { 200: { description: 'The organization as it is now.', body: z.object({ organization: Organization }), example: { organization: { ...EXAMPLE_ORGANIZATION, plan: 'pro' } } } },
      example: { body: { plan: 'pro', emailConfirmed: true } },
      handler: async ({ params, body, metadata }) => ({ body: { organization: organizationJson((await contacts.updateOrganization(updateOrganizationRequest(params.organizationId, body), { metadata })).organization!) } }),
    }),

    // API keys
    defineRoute({
      method: 'POST', path: '/organizations/{organizationId}/api-keys', operationId: 'issueApiKey', summary: 'Issue an API key', tags: ['api-keys'], auth: 'adminToken',
      description: 'The key (`secret`) is in this response only: it is not stored and cannot be read again. Without `scopes` the key gets every scope.',
      request: { params: OrgParams, body: z.strictObject({ name: z.string().max(200).optional(), scopes: z.array(Scope).min(1).max(SCOPES.length).optional().meta({ description: 'Leave out for every scope.' }) }) },
      responses: { 201: { description: 'The key and its secret.', body: z.object({ apiKey: ApiKey, secret: z.string() }), example: { apiKey: EXAMPLE_API_KEY, secret: 'rrs_live_3f9aT2kq8ZsVn4LrW0pYd6HcJmBx7Qe' } } },
      example: { body: { name: 'CRM', scopes: ['locations:read', 'contacts:write'] } },
      handler: async ({ params, body, metadata }) => {
        const r = await contacts.issueApiKey({ organizationId: params.organizationId, name: body.name ?? '', scopes: body.scopes ?? [], secret: '' }, { metadata });
        return { body: { apiKey: apiKeyJson(r.apiKey!), secret: r.secret } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/api-keys', operationId: 'listApiKeys', summary: 'List API keys', tags: ['api-keys'], auth: 'adminToken',
      description: 'Revoked keys included; only the prefix and the last 4 characters of each key are shown.',
      request: { params: OrgParams },
      responses: { 200: { description: 'The keys.', body: z.object({ apiKeys: z.array(ApiKey) }), example: { apiKeys: [EXAMPLE_API_KEY] } } },
      handler: async ({ params, metadata }) => ({ body: { apiKeys: (await contacts.listApiKeys({ organizationId: params.organizationId }, { metadata })).apiKeys.map(apiKeyJson) } }),
    }),
    defineRoute({
      method: 'DELETE', path: '/organizations/{organizationId}/api-keys/{keyId}', operationId: 'revokeApiKey', summary: 'Revoke an API key', tags: ['api-keys'], auth: 'adminToken',
      description: 'The key stops working within 5 seconds. Revoking a revoked key changes nothing.',
      request: { params: z.object({ organizationId: OrganizationId, keyId: idOf(EXAMPLE_API_KEY.id) }) },
      responses: { 200: { description: 'The revoked key.', body: z.object({ apiKey: ApiKey }), example: { apiKey: { ...EXAMPLE_API_KEY, revokedAt: '2026-05-02T09:00:00.000Z' } } } },
      handler: async ({ params, metadata }) => ({ body: { apiKey: apiKeyJson((await contacts.revokeApiKey({ organizationId: params.organizationId, id: params.keyId }, { metadata })).apiKey!) } }),
    }),

    // Locations
    defineRoute({
      method: 'POST', path: '/organizations/{organizationId}/locations', operationId: 'createLocation', summary: 'Create a location', tags: ['locations'], auth: 'adminToken',
      request: { params: OrgParams, body: CreateLocationBody },
      responses: { 201: { description: 'The location.', body: z.object({ location: Location }), example: { location: EXAMPLE_LOCATION } } },
      example: { body: { name: 'Tverskaya', address: 'Tverskaya st. 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'yandex', url: 'https://yandex.ru/maps/org/1/reviews/' }] } },
      handler: async ({ params, body, metadata }) => {
        const r = await contacts.createLocation(createLocationRequest(params.organizationId, body), { metadata });
        return { body: { location: locationJson(r.location!) } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/locations', operationId: 'listLocations', summary: 'List locations', tags: ['locations'], auth: 'adminToken',
      request: { params: OrgParams },
      responses: { 200: { description: 'The live locations.', body: z.object({ locations: z.array(Location) }), example: { locations: [EXAMPLE_LOCATION] } } },
      handler: async ({ params, metadata }) => {
        await requireOrganization(params.organizationId, metadata);
        return { body: { locations: (await contacts.listLocations({ organizationId: params.organizationId }, { metadata })).locations.map(locationJson) } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/locations/{locationId}', operationId: 'getLocation', summary: 'Get a location', tags: ['locations'], auth: 'adminToken',
      request: { params: LocationParams },
      responses: { 200: { description: 'The location.', body: z.object({ location: Location }), example: { location: EXAMPLE_LOCATION } } },
      handler: async ({ params, metadata }) => ({ body: { location: locationJson((await contacts.getLocation({ organizationId: params.organizationId, id: params.locationId }, { metadata })).location!) } }),
    }),
    defineRoute({
      method: 'PATCH', path: '/organizations/{organizationId}/locations/{locationId}', operationId: 'updateLocation', summary: 'Update a location', tags: ['locations'], auth: 'adminToken',
      request: { params: LocationParams, body: UpdateLocationBody },
      responses: {
        200: {
          description: 'The location as it is now.',
          body: z.object({ location: Location }),
          example: { location: { ...EXAMPLE_LOCATION, reviewLinks: [{ provider: '2gis', url: 'https://2gis.ru/moscow/firm/1' }], updatedAt: '2026-05-02T09:00:00.000Z' } },
        },
      },
      example: { body: { reviewLinks: [{ provider: '2gis', url: 'https://2gis.ru/moscow/firm/1' }] } },
      handler: async ({ params, body, metadata }) => {
        const r = await contacts.updateLocation(updateLocationRequest(params.organizationId, params.locationId, body), { metadata });
        return { body: { location: locationJson(r.location!) } };
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/organizations/{organizationId}/locations/{locationId}', operationId: 'deleteLocation', summary: 'Delete a location', tags: ['locations'], auth: 'adminToken',
      description: 'The location leaves lists and lookups; contacts that named it keep the reference.',
      request: { params: LocationParams },
      responses: { 204: { description: 'Deleted.' } },
      handler: async ({ params, metadata }) => {
        await contacts.deleteLocation({ organizationId: params.organizationId, id: params.locationId }, { metadata });
        return {};
      },
    }),

    // Flows
    defineRoute({
      method: 'POST', path: '/organizations/{organizationId}/flows', operationId: 'createFlow', summary: 'Create a flow', tags: ['flows'], auth: 'adminToken',
      request: { params: OrgParams, body: CreateFlowBody },
      responses: { 201: { description: 'The flow.', body: z.object({ flow: Flow }), example: { flow: EXAMPLE_FLOW } } },
      example: { body: { name: 'Email, then SMS a day later', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 1440 }] } },
      handler: async ({ params, body, metadata }) => {
        await requireOrganization(params.organizationId, metadata);
        const r = await scheduler.createFlow(createFlowRequest(params.organizationId, body), { metadata });
        return { body: { flow: flowJson(r.flow!) } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/flows', operationId: 'listFlows', summary: 'List flows', tags: ['flows'], auth: 'adminToken',
      request: { params: OrgParams },
      responses: { 200: { description: 'The flows, the default first.', body: z.object({ flows: z.array(Flow) }), example: { flows: [EXAMPLE_FLOW] } } },
      handler: async ({ params, metadata }) => {
        await requireOrganization(params.organizationId, metadata);
        return { body: { flows: (await scheduler.listFlows({ organizationId: params.organizationId }, { metadata })).flows.map(flowJson) } };
      },
    }),
    defineRoute({
      method: 'PUT', path: '/organizations/{organizationId}/flows/{flowId}', operationId: 'updateFlow', summary: 'Replace the name and steps of a flow', tags: ['flows'], auth: 'adminToken',
      description: 'Cascades already running keep the steps they started with.',
      request: { params: FlowParams, body: UpdateFlowBody },
      responses: { 200: { description: 'The flow as it is now.', body: z.object({ flow: Flow }), example: { flow: { ...EXAMPLE_FLOW, name: 'Email only', steps: [{ order: 1, channel: 'EMAIL', delayMinutes: 0 }] } } } },
      example: { body: { name: 'Email only', steps: [{ channel: 'EMAIL', delayMinutes: 0 }] } },
      handler: async ({ params, body, metadata }) => {
        await requireOrganization(params.organizationId, metadata);
        const r = await scheduler.updateFlow(updateFlowRequest(params.organizationId, params.flowId, body), { metadata });
        return { body: { flow: flowJson(r.flow!) } };
      },
    }),
    defineRoute({
      method: 'POST', path: '/organizations/{organizationId}/flows/{flowId}/default', operationId: 'setDefaultFlow', summary: "Make a flow the organization's default", tags: ['flows'], auth: 'adminToken',
      request: { params: FlowParams },
      responses: { 200: { description: 'The flow, now the default.', body: z.object({ flow: Flow }), example: { flow: EXAMPLE_FLOW } } },
      handler: async ({ params, metadata }) => {
        await requireOrganization(params.organizationId, metadata);
        return { body: { flow: flowJson((await scheduler.setDefaultFlow({ organizationId: params.organizationId, id: params.flowId }, { metadata })).flow!) } };
      },
    }),

    // Message templates
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/templates', operationId: 'listTemplates', summary: 'List message templates', tags: ['templates'], auth: 'adminToken',
      description: "The template in effect for each channel: the organization's own, or the default of its locale.",
      request: { params: OrgParams },
      responses: { 200: { description: 'The templates.', body: z.object({ templates: z.array(Template) }), example: { templates: [EXAMPLE_EMAIL_TEMPLATE, EXAMPLE_SMS_TEMPLATE] } } },
      handler: async ({ params, metadata }) => ({ body: { templates: (await contacts.listTemplates({ organizationId: params.organizationId }, { metadata })).templates.map(templateJson) } }),
    }),
    defineRoute({
      method: 'PUT', path: '/organizations/{organizationId}/templates/{channel}', operationId: 'setTemplate', summary: "Set a channel's message template", tags: ['templates'], auth: 'adminToken',
      request: { params: ChannelParams, body: SetTemplateBody },
      responses: { 200: { description: 'The template.', body: z.object({ template: Template }), example: { template: EXAMPLE_EMAIL_TEMPLATE } } },
      example: { body: { subject: 'How was {{location}}?', body: 'Hello {{name}}, please rate your visit: {{link}}' } },
      handler: async ({ params, body, metadata }) => ({ body: { template: templateJson((await contacts.setTemplate({ organizationId: params.organizationId, channel: params.channel, subject: body.subject ?? '', body: body.body }, { metadata })).template!) } }),
    }),
    defineRoute({
      method: 'DELETE', path: '/organizations/{organizationId}/templates/{channel}', operationId: 'resetTemplate', summary: "Go back to a channel's default template", tags: ['templates'], auth: 'adminToken',
      request: { params: ChannelParams },
      responses: { 200: { description: 'The default template now in effect.', body: z.object({ template: Template }), example: { template: { ...EXAMPLE_EMAIL_TEMPLATE, subject: 'Rate your visit to {{location}}', body: 'Hello {{name}}! Please rate your visit: {{link}}', isDefault: true } } } },
      handler: async ({ params, metadata }) => ({ body: { template: templateJson((await contacts.resetTemplate({ organizationId: params.organizationId, channel: params.channel }, { metadata })).template!) } }),
    }),

    // Channel configuration
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/channels', operationId: 'listChannelConfigurations', summary: 'Which channels are configured', tags: ['channels'], auth: 'adminToken',
      request: { params: OrgParams },
      responses: {
        200: {
          description: 'One entry per known channel and per channel ever set.',
          body: z.object({ channels: z.array(ChannelConfiguration) }),
          example: { channels: [{ channel: 'EMAIL', configured: true }, { channel: 'SMS', configured: true }, { channel: 'MAX', configured: false }, { channel: 'TELEGRAM', configured: false }] },
        },
      },
      handler: async ({ params, metadata }) => ({ body: { channels: (await contacts.listChannelConfigurations({ organizationId: params.organizationId }, { metadata })).channels.map((c) => ({ channel: c.channel, configured: c.configured })) } }),
    }),
    defineRoute({
      method: 'PUT', path: '/organizations/{organizationId}/channels/{channel}', operationId: 'setChannelConfiguration', summary: 'Configure a channel', tags: ['channels'], auth: 'adminToken',
      request: { params: ChannelParams, body: SetChannelBody },
      responses: { 200: { description: 'The configuration.', body: z.object({ channel: ChannelConfiguration }), example: { channel: { channel: 'EMAIL', configured: true } } } },
      example: { body: { configured: true } },
      handler: async ({ params, body, metadata }) => {
        const r = await contacts.setChannelConfiguration({ organizationId: params.organizationId, channel: params.channel, configured: body.configured }, { metadata });
        return { body: { channel: { channel: r.channel!.channel, configured: r.channel!.configured } } };
      },
    }),

    // SMS balance
    defineRoute({
      method: 'POST', path: '/organizations/{organizationId}/sms-balance/credits', operationId: 'creditSmsBalance', summary: 'Add SMS parts to the balance', tags: ['sms-balance'], auth: 'adminToken',
      request: { params: OrgParams, body: CreditBody },
      responses: { 200: { description: 'The balance after the credit.', body: z.object({ balance: z.number().int() }), example: { balance: 1500 } } },
      example: { body: { parts: 1000, reason: 'invoice 2026-118' } },
      handler: async ({ params, body, metadata }) => ({ body: { balance: (await contacts.creditSmsBalance({ organizationId: params.organizationId, parts: body.parts, reason: body.reason ?? '' }, { metadata })).balance } }),
    }),
  ];
}
