import { startContacts, type RunningContacts } from '@rrs/contacts';
import { startScheduler, type RunningScheduler } from '@rrs/cascade-scheduler';
import { createTestBus, createTestDatabase, openApiChecker, testContext, waitFor, type OpenApiChecker, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startGateway } from '../src';

const TOKEN = 'adm_test_token_0123456789';

/** The account admin API over real HTTP → gateway → gRPC → contacts and cascade-scheduler → PostgreSQL. */
describe('admin API /admin/v1', () => {
  let db: TestDatabase;
  let bus: TestBus;
  const ctx = testContext('gateway-admin');
  let contacts: RunningContacts;
  let scheduler: RunningScheduler;
  let base: string;
  let api: OpenApiChecker;

  beforeAll(async () => {
    db = await createTestDatabase();
    bus = await createTestBus('memory');
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    scheduler = await startScheduler(
      { databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}` },
      ctx,
      { bus: bus.bus, noDispatcher: true },
    );
    const gateway = await startGateway({
      host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`,
      publicBaseUrl: 'http://localhost', adminTokens: [TOKEN], authCacheTtlMs: 1000,
    }, ctx);
    ctx.health.setReady(true);
    base = gateway.url;
    api = await openApiChecker(`${base}/admin/v1/openapi.json`);
  });
  afterAll(async () => {
    await ctx.stop();
    await bus.cleanup();
    await db.drop();
  });

  const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    api.fetch(`${base}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const pointers = (body: unknown) => ((body as { errors?: Array<{ pointer?: string; parameter?: string }> }).errors ?? []).map((e) => e.pointer ?? e.parameter);
  const newOrg = async (over: Record<string, unknown> = {}) => ((await call('POST', '/organizations', { name: 'Acme', plan: 'standard', emailConfirmed: true, ...over })).body as { organization: { id: string } }).organization.id;
  const UNKNOWN = '0190c3c4-0000-7000-8000-000000000000';

  describe('authorization', () => {
    it.each([
      ['no Authorization header', {}, 'missing_admin_token'],
      ['another token', { authorization: 'Bearer not-the-admin-token' }, 'invalid_admin_token'],
      ['a non-Bearer scheme', { authorization: `Basic ${TOKEN}` }, 'invalid_admin_token'],
    ])('answers 401 for %s', async (_l, headers, code) => {
      const res = await api.fetch(`${base}/admin/v1/organizations`, { headers: headers as Record<string, string> });
      expect(res.status).toBe(401);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ code, status: 401 });
    });

    it('does not let an API key in', async () => {
      const org = await newOrg();
      const { secret } = await contacts.directory.issueApiKey({ organizationId: org });
      expect((await api.fetch(`${base}/admin/v1/organizations`, { headers: { authorization: `Bearer ${secret}` } })).body).toMatchObject({ code: 'invalid_admin_token' });
    });

    it('is 404 everywhere when no ADMIN_TOKEN is configured', async () => {
      const off = testContext('gateway-admin-off');
      try {
        const g = await startGateway({ host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: '127.0.0.1:1', publicBaseUrl: 'http://localhost' }, off);
        const res = await fetch(`${g.url}/admin/v1/organizations`, { headers: { authorization: `Bearer ${TOKEN}` } });
        expect(res.status).toBe(404);
        expect(await res.json()).toMatchObject({ code: 'not_found' });
      } finally {
        await off.stop();
      }
    });
  });

  describe('organizations', () => {
    it('are created, read, listed and updated', async () => {
      const created = await call('POST', '/organizations', { name: 'Acme Dental', plan: 'standard', emailConfirmed: true, smsBalance: 500, timeZone: 'Europe/Moscow', locale: 'ru', defaultRegion: 'RU' });
      expect(created.status).toBe(201);
      const org = (created.body as { organization: Record<string, unknown> }).organization;
      expect(org).toMatchObject({ name: 'Acme Dental', plan: 'standard', emailConfirmed: true, smsBalance: 500, timeZone: 'Europe/Moscow', locale: 'ru', defaultRegion: 'RU' });
      expect((await call('GET', `/organizations/${org.id}`)).body).toEqual({ organization: org });

      const patched = await call('PATCH', `/organizations/${org.id}`, { plan: 'pro', smsBalance: 20 });
      expect(patched.status).toBe(200);
      expect(patched.body).toEqual({ organization: { ...org, plan: 'pro', smsBalance: 20 } });

      const ids: string[] = [];
      let after: string | null = '';
      for (let i = 0; i < 100 && after !== null; i++) {
        const page = (await call('GET', `/organizations?limit=1${after ? `&after=${after}` : ''}`)).body as { organizations: Array<{ id: string }>; nextAfter: string | null };
        ids.push(...page.organizations.map((o) => o.id));
        after = page.nextAfter;
      }
      expect(ids).toContain(org.id);
    });

    it.each<[string, unknown, string]>([
      ['an unknown plan (schema)', { name: 'X', plan: 'gold' }, '/plan'],
      ['no name (schema)', { plan: 'trial' }, '/name'],
      ['an unknown field (schema)', { name: 'X', color: 'red' }, '/color'],
      ['a bad time zone (service)', { name: 'X', timeZone: 'Mars/Olympus' }, '/timeZone'],
      ['a region without phone numbers (service)', { name: 'X', defaultRegion: 'XX' }, '/defaultRegion'],
    ])('refuse %s with 400 naming the field, and create nothing', async (_l, body, pointer) => {
      const before = (await contacts.directory.listOrganizations({ limit: 500 })).organizations.length;
      const res = await call('POST', '/organizations', body);
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'invalid_request' });
      expect(pointers(res.body)).toEqual([pointer]);
      expect((await contacts.directory.listOrganizations({ limit: 500 })).organizations.length).toBe(before);
    });

    it('refuse a bad query parameter', async () => {
      const res = await call('GET', '/organizations?limit=0');
      expect(res.status).toBe(400);
      expect(pointers(res.body)).toEqual(['limit']);
    });

    it('answer 404 for unknown ids, and a bad update changes nothing', async () => {
      expect((await call('GET', `/organizations/${UNKNOWN}`)).body).toMatchObject({ code: 'not_found' });
      expect((await call('PATCH', `/organizations/${UNKNOWN}`, { name: 'x' })).status).toBe(404);
      const id = await newOrg({ name: 'Stable' });
      expect((await call('PATCH', `/organizations/${id}`, { name: 'Changed', locale: 'de' })).status).toBe(400);
      expect((await contacts.directory.getOrganization(id)).name).toBe('Stable');
    });

    it('answer a known path with another method with 405 and Allow', async () => {
      const res = await call('PUT', '/organizations', { name: 'x' });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('GET, HEAD, POST');
      expect(res.body).toMatchObject({ code: 'method_not_allowed', allow: ['GET', 'HEAD', 'POST'] });
      expect((await call('GET', '/nothing-here')).status).toBe(404);
    });

    it('answer malformed JSON and a wrong content type with problems', async () => {
      const bad = await api.fetch(`${base}/admin/v1/organizations`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: '{"name":' });
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ code: 'malformed_json' });
      const text = await api.fetch(`${base}/admin/v1/organizations`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'text/plain' }, body: 'name=x' });
      expect(text.status).toBe(415);
      expect(text.body).toMatchObject({ code: 'unsupported_media_type' });
    });
  });

  describe('API keys', () => {
    it('are issued once with their secret, listed without it, and stop working after revocation', async () => {
      const org = await newOrg();
      const issued = await call('POST', `/organizations/${org}/api-keys`, { name: 'CRM' });
      expect(issued.status).toBe(201);
      const { apiKey, secret } = issued.body as { apiKey: { id: string; prefix: string; last4: string; scopes: string[]; revokedAt: null }; secret: string };
      expect(apiKey).toMatchObject({ name: 'CRM', prefix: secret.slice(0, 8), last4: secret.slice(-4), revokedAt: null });
      expect(apiKey.scopes).toHaveLength(7);
      const ping = () => fetch(`${base}/api/v1/ping`, { headers: { authorization: `Bearer ${secret}` } });
      expect((await ping()).status).toBe(200);

      const listed = await call('GET', `/organizations/${org}/api-keys`);
      expect(listed.body).toEqual({ apiKeys: [apiKey] });
      expect(JSON.stringify(listed.body)).not.toContain(secret);

      const revoked = await call('DELETE', `/organizations/${org}/api-keys/${apiKey.id}`);
      expect(revoked.status).toBe(200);
      expect((revoked.body as { apiKey: { revokedAt: string } }).apiKey.revokedAt).toEqual(expect.any(String));
      await waitFor(async () => (await ping()).status === 401, { timeoutMs: 5000, what: 'the revoked key to be refused' });
    });

    it('carry the scopes asked for; an unknown scope is 400 and issues nothing', async () => {
      const org = await newOrg();
      const r = await call('POST', `/organizations/${org}/api-keys`, { scopes: ['locations:read'] });
      expect((r.body as { apiKey: { scopes: string[] } }).apiKey.scopes).toEqual(['locations:read']);
      const bad = await call('POST', `/organizations/${org}/api-keys`, { scopes: ['locations:read', 'root'] });
      expect(bad.status).toBe(400);
      expect(pointers(bad.body)).toEqual(['/scopes/1']);
      const empty = await call('POST', `/organizations/${org}/api-keys`, { scopes: [] });
      expect(empty.status).toBe(400);
      expect(pointers(empty.body)).toEqual(['/scopes']);
      expect((await contacts.directory.listApiKeys(org)).length).toBe(1);
    });

    it("of another organization cannot be revoked (404) and keep working", async () => {
      const a = await newOrg();
      const b = await newOrg();
      const { apiKey, secret } = (await call('POST', `/organizations/${a}/api-keys`, {})).body as { apiKey: { id: string }; secret: string };
      expect((await call('DELETE', `/organizations/${b}/api-keys/${apiKey.id}`)).status).toBe(404);
      expect((await fetch(`${base}/api/v1/ping`, { headers: { authorization: `Bearer ${secret}` } })).status).toBe(200);
      expect((await call('POST', `/organizations/${UNKNOWN}/api-keys`, {})).status).toBe(404);
    });
  });

  describe('locations', () => {
    it('are created, listed, read, updated and deleted', async () => {
      const org = await newOrg();
      const created = await call('POST', `/organizations/${org}/locations`, { name: 'Tverskaya', address: 'Tverskaya st. 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'yandex', url: 'https://yandex.ru/maps/org/1/reviews/' }] });
      expect(created.status).toBe(201);
      const loc = (created.body as { location: { id: string } }).location;
      expect(loc).toMatchObject({ name: 'Tverskaya', city: 'Moscow', reviewLinks: [{ provider: 'yandex', url: 'https://yandex.ru/maps/org/1/reviews/' }] });
      expect((await call('GET', `/organizations/${org}/locations`)).body).toEqual({ locations: [loc] });
      expect((await call('GET', `/organizations/${org}/locations/${loc.id}`)).body).toEqual({ location: loc });

      const patched = await call('PATCH', `/organizations/${org}/locations/${loc.id}`, { city: 'Moskva', reviewLinks: [{ provider: '2gis', url: 'https://2gis.ru/moscow/firm/1' }] });
      expect(patched.body).toMatchObject({ location: { name: 'Tverskaya', city: 'Moskva', reviewLinks: [{ provider: '2gis', url: 'https://2gis.ru/moscow/firm/1' }] } });

      const deleted = await call('DELETE', `/organizations/${org}/locations/${loc.id}`);
      expect(deleted.status).toBe(204);
      expect((await call('GET', `/organizations/${org}/locations/${loc.id}`)).status).toBe(404);
      expect((await call('DELETE', `/organizations/${org}/locations/${loc.id}`)).status).toBe(404);
      expect((await call('GET', `/organizations/${org}/locations`)).body).toEqual({ locations: [] });
    });

    it('refuse a review link that is not https, and create nothing', async () => {
      const org = await newOrg();
      const res = await call('POST', `/organizations/${org}/locations`, { name: 'X', reviewLinks: [{ provider: 'google', url: 'http://maps.google.com/' }] });
      expect(res.status).toBe(400);
      expect(pointers(res.body)).toEqual(['/reviewLinks/0/url']);
      expect(await contacts.directory.listLocations(org)).toEqual([]);
    });

    it('are 404 through another organization or an unknown one', async () => {
      const a = await newOrg();
      const b = await newOrg();
      const loc = ((await call('POST', `/organizations/${a}/locations`, { name: 'A' })).body as { location: { id: string } }).location;
      expect((await call('GET', `/organizations/${b}/locations/${loc.id}`)).status).toBe(404);
      expect((await call('PATCH', `/organizations/${b}/locations/${loc.id}`, { name: 'B' })).status).toBe(404);
      expect((await call('DELETE', `/organizations/${b}/locations/${loc.id}`)).status).toBe(404);
      expect((await call('GET', `/organizations/${UNKNOWN}/locations`)).status).toBe(404);
      expect((await contacts.directory.getLocation(a, loc.id)).name).toBe('A');
    });
  });

  describe('flows', () => {
    it('are created, listed, replaced and made the default', async () => {
      const org = await newOrg();
      const first = await call('POST', `/organizations/${org}/flows`, { name: 'Email then SMS', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 60 }] });
      expect(first.status).toBe(201);
      const f1 = (first.body as { flow: { id: string } }).flow;
      expect(f1).toEqual({ id: expect.any(String), name: 'Email then SMS', isDefault: true, steps: [{ order: 1, channel: 'EMAIL', delayMinutes: 0 }, { order: 2, channel: 'SMS', delayMinutes: 60 }], responseWindowMinutes: null });
      const f2 = ((await call('POST', `/organizations/${org}/flows`, { name: 'SMS only', steps: [{ channel: 'SMS', delayMinutes: 0 }] })).body as { flow: { id: string } }).flow;

      const replaced = await call('PUT', `/organizations/${org}/flows/${f2.id}`, { name: 'Telegram then SMS', steps: [{ channel: 'TELEGRAM', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 30 }] });
      expect(replaced.status).toBe(200);
      expect(replaced.body).toMatchObject({ flow: { id: f2.id, name: 'Telegram then SMS', isDefault: false, steps: [{ order: 1, channel: 'TELEGRAM' }, { order: 2, channel: 'SMS', delayMinutes: 30 }] } });

      const made = await call('POST', `/organizations/${org}/flows/${f2.id}/default`);
      expect(made.status).toBe(200);
      expect(made.body).toMatchObject({ flow: { id: f2.id, isDefault: true } });
      const list = (await call('GET', `/organizations/${org}/flows`)).body as { flows: Array<{ id: string; isDefault: boolean }> };
      expect(list.flows.map((f) => [f.id, f.isDefault])).toEqual([[f2.id, true], [f1.id, false]]);
    });

    it('refuse malformed steps and unknown organizations, creating nothing', async () => {
      const org = await newOrg();
      for (const [body, pointer] of [
        [{ name: 'x', steps: [] }, '/steps'],
        [{ name: 'x', steps: [{ channel: 'email', delayMinutes: 0 }] }, '/steps/0/channel'],
        // One channel-key rule everywhere (proto rules.ts): a key longer than 32 characters is refused here as in templates.
        [{ name: 'x', steps: [{ channel: 'S'.repeat(33), delayMinutes: 0 }] }, '/steps/0/channel'],
        [{ name: 'x', steps: [{ channel: 'SMS', delayMinutes: -1 }] }, '/steps/0/delayMinutes'],
      ] as const) {
        const res = await call('POST', `/organizations/${org}/flows`, body);
        expect(res.status).toBe(400);
        expect([...new Set(pointers(res.body))]).toEqual([pointer]);
      }
      expect(await scheduler.flows.list(org)).toEqual([]);
      expect((await call('POST', `/organizations/${UNKNOWN}/flows`, { name: 'x', steps: [{ channel: 'SMS', delayMinutes: 0 }] })).status).toBe(404);
      expect(await scheduler.flows.list(UNKNOWN)).toEqual([]);
    });

    it("of another organization are 404", async () => {
      const a = await newOrg();
      const b = await newOrg();
      const f = ((await call('POST', `/organizations/${a}/flows`, { name: 'A', steps: [{ channel: 'EMAIL', delayMinutes: 0 }] })).body as { flow: { id: string } }).flow;
      expect((await call('PUT', `/organizations/${b}/flows/${f.id}`, { name: 'B', steps: [{ channel: 'SMS', delayMinutes: 0 }] })).status).toBe(404);
      expect((await call('POST', `/organizations/${b}/flows/${f.id}/default`)).status).toBe(404);
      expect((await scheduler.flows.list(a))[0]).toMatchObject({ name: 'A', isDefault: false });
    });
  });

  describe('templates, channels and the SMS balance', () => {
    it('templates default by locale, are set per channel and reset', async () => {
      const org = await newOrg({ locale: 'ru' });
      const list = (await call('GET', `/organizations/${org}/templates`)).body as { templates: Array<{ channel: string; isDefault: boolean; subject: string }> };
      expect(list.templates.map((t) => t.channel)).toEqual(['EMAIL', 'SMS', 'MAX', 'TELEGRAM']);
      expect(list.templates[0].subject).toMatch(/визит/);
      const set = await call('PUT', `/organizations/${org}/templates/EMAIL`, { subject: 'Оцените {{location}}', body: '{{name}}, оцените визит: {{link}}' });
      expect(set.body).toEqual({ template: { channel: 'EMAIL', subject: 'Оцените {{location}}', body: '{{name}}, оцените визит: {{link}}', isDefault: false } });
      const reset = await call('DELETE', `/organizations/${org}/templates/EMAIL`);
      expect(reset.body).toMatchObject({ template: { channel: 'EMAIL', isDefault: true } });
    });

    it('refuse a template without {{link}} and a channel key that is not one, changing nothing', async () => {
      const org = await newOrg();
      const res = await call('PUT', `/organizations/${org}/templates/SMS`, { body: 'Please rate us' });
      expect(res.status).toBe(400);
      expect(pointers(res.body)).toEqual(['/body']);
      expect((await call('PUT', `/organizations/${org}/templates/sms`, { body: '{{link}}' })).status).toBe(404);
      expect((await contacts.templates.list(org)).every((t) => t.isDefault)).toBe(true);
    });

    it('channels are configured per organization', async () => {
      const org = await newOrg();
      expect((await call('PUT', `/organizations/${org}/channels/MAX`, { configured: true })).body).toEqual({ channel: { channel: 'MAX', configured: true } });
      expect((await call('GET', `/organizations/${org}/channels`)).body).toEqual({
        channels: [{ channel: 'EMAIL', configured: false }, { channel: 'SMS', configured: false }, { channel: 'MAX', configured: true }, { channel: 'TELEGRAM', configured: false }],
      });
      expect((await call('PUT', `/organizations/${org}/channels/EMAIL`, { configured: 'yes' })).status).toBe(400);
    });

    it('the SMS balance is credited; a zero credit is refused and changes nothing', async () => {
      const org = await newOrg({ smsBalance: 5 });
      expect((await call('POST', `/organizations/${org}/sms-balance/credits`, { parts: 100, reason: 'invoice 1' })).body).toEqual({ balance: 105 });
      const bad = await call('POST', `/organizations/${org}/sms-balance/credits`, { parts: 0 });
      expect(bad.status).toBe(400);
      expect(pointers(bad.body)).toEqual(['/parts']);
      expect((await contacts.directory.getOrganization(org)).smsBalance).toBe(105);
    });
  });

  it('serves its OpenAPI 3.1 document listing every operation', async () => {
    const doc = api.doc as { openapi: string; paths: Record<string, Record<string, { operationId: string }>> };
    expect(doc.openapi).toBe('3.1.0');
    // The CRM connectors' operations are listed by adminConnectors.test.ts.
    const ops = Object.entries(doc.paths).filter(([path]) => !path.includes('/connectors')).flatMap(([, p]) => Object.values(p).map((o) => o.operationId)).sort();
    expect(ops).toEqual([
      'addSuppression', 'checkDeliverability', 'createFlow', 'createLocation', 'createOrganization', 'creditSmsBalance', 'deleteLocation', 'erasePerson', 'exportPerson', 'getDataRetention', 'getLocation', 'getOrganization',
      'getPersonErasure', 'inviteMember', 'issueApiKey', 'listApiKeys', 'listChannelConfigurations', 'listFlows', 'listLifecycleActions', 'listLocations', 'listMembers', 'listOrganizations', 'listSuppressions', 'listTemplates',
      'removeSuppression', 'resetTemplate', 'revokeApiKey', 'setChannelConfiguration', 'setDataRetention', 'setDefaultFlow', 'setTemplate', 'startPasswordReset', 'updateFlow', 'updateLocation', 'updateOrganization',
    ]);
  });
  describe('send windows', () => {
    const DEFAULT = { start: '09:00', end: '21:00', days: [], channels: [] };

    it('new organizations get 09:00–21:00 for the phone channels; a window can be replaced, removed, and set per location', async () => {
      const created = (await call('POST', '/organizations', { name: 'Acme', plan: 'standard', emailConfirmed: true })).body as { organization: { id: string; sendWindow: unknown } };
      expect(created.organization.sendWindow).toEqual(DEFAULT);
      const org = created.organization.id;
      const us = { start: '08:00', end: '21:00', days: [5, 1, 2, 3, 4], channels: ['SMS', 'EMAIL'] };
      expect(((await call('PATCH', `/organizations/${org}`, { sendWindow: us })).body as { organization: { sendWindow: unknown } }).organization.sendWindow)
        .toEqual({ start: '08:00', end: '21:00', days: [1, 2, 3, 4, 5], channels: ['EMAIL', 'SMS'] });
      // A PATCH without the field keeps it.
      expect(((await call('PATCH', `/organizations/${org}`, { name: 'Acme 2' })).body as { organization: { sendWindow: unknown } }).organization.sendWindow).toMatchObject({ start: '08:00' });
      expect(((await call('PATCH', `/organizations/${org}`, { sendWindow: null })).body as { organization: { sendWindow: unknown } }).organization.sendWindow).toBeNull();
      expect(((await call('POST', '/organizations', { name: 'Night owls', sendWindow: null })).body as { organization: { sendWindow: unknown } }).organization.sendWindow).toBeNull();

      const loc = ((await call('POST', `/organizations/${org}/locations`, { name: 'Tverskaya', timeZone: 'Europe/Moscow', sendWindow: { start: '22:00', end: '02:00' } })).body as { location: { id: string; sendWindow: unknown } }).location;
      expect(loc.sendWindow).toEqual({ start: '22:00', end: '02:00', days: [], channels: [] });
      expect(((await call('PATCH', `/organizations/${org}/locations/${loc.id}`, { sendWindow: null })).body as { location: { sendWindow: unknown } }).location.sendWindow).toBeNull();
      expect((await contacts.directory.getLocation(org, loc.id)).sendWindow).toBeNull();
    });

    it.each([
      ['a time that is not HH:MM', { start: '9:00', end: '21:00' }, '/sendWindow/start'],
      ['a day outside 1–7', { start: '09:00', end: '21:00', days: [0] }, '/sendWindow/days/0'],
      ['a lower-case channel', { start: '09:00', end: '21:00', channels: ['sms'] }, '/sendWindow/channels/0'],
      ['a window of no time', { start: '09:00', end: '09:00' }, '/sendWindow/end'],
      ['a repeated day', { start: '09:00', end: '21:00', days: [1, 1] }, '/sendWindow/days'],
    ])('refuse %s with 400 and change nothing', async (_label, sendWindow, pointer) => {
      const org = await newOrg();
      const res = await call('PATCH', `/organizations/${org}`, { sendWindow });
      expect(res.status).toBe(400);
      expect(res.body).toMatchObject({ code: 'invalid_request' });
      expect(pointers(res.body)).toContain(pointer);
      expect((await contacts.directory.getOrganization(org)).sendWindow).toEqual(DEFAULT);
      const location = await call('POST', `/organizations/${org}/locations`, { name: 'X', sendWindow });
      expect(location.status).toBe(400);
      expect(await contacts.directory.listLocations(org)).toEqual([]);
    });
  });
});
