import { startContacts, type RunningContacts } from '@rrs/contacts';
import { startGateway } from '@rrs/gateway';
import { SCOPES, WEBHOOK_FAN_OUT } from '@rrs/proto';
import { createTestBus, createTestDatabase, openApiChecker, testContext, waitFor, type OpenApiChecker, type TestBus, type TestDatabase } from '@rrs/testkit';
import { Webhook } from 'standardwebhooks';
import { startWebhooks, type RunningWebhooks } from '../src';
import { Receiver } from './support/receiver';
import { testWebhooksConfig } from './support/service';

/**
 * /api/v1/webhooks over real HTTP → gateway → gRPC → webhooks → PostgreSQL, every response checked
 * against the OpenAPI document, and deliveries received by a local receiver.
 */
describe('webhooks API through the gateway', () => {
  let db: TestDatabase;
  let tb: TestBus;
  const ctx = testContext('webhooks-api');
  let contacts: RunningContacts;
  let webhooks: RunningWebhooks;
  let base: string;
  let api: OpenApiChecker;
  const receiver = new Receiver();
  const keys = { mine: '', other: '', readOnly: '', hooksOnly: '' };

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    await receiver.start();
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    webhooks = await startWebhooks(
      testWebhooksConfig(db.url, tb.prefix, { policy: { retryScheduleMs: [0, 100, 100] } }),
      ctx,
      { bus: tb.bus },
    );
    const gateway = await startGateway(
      { host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: '127.0.0.1:1', webhooksAddress: `127.0.0.1:${webhooks.grpcPort}`, publicBaseUrl: 'http://localhost' },
      ctx,
    );
    ctx.health.setReady(true);
    base = gateway.url;
    const directory = contacts.directory;
    const mine = await directory.createOrganization({ name: 'Acme', plan: 'standard', emailConfirmed: true });
    const other = await directory.createOrganization({ name: 'Other', plan: 'standard', emailConfirmed: true });
    keys.mine = (await directory.issueApiKey({ organizationId: mine.id })).secret;
    keys.other = (await directory.issueApiKey({ organizationId: other.id })).secret;
    keys.readOnly = (await directory.issueApiKey({ organizationId: mine.id, scopes: SCOPES.filter((s) => s !== 'webhooks:write') })).secret;
    keys.hooksOnly = (await directory.issueApiKey({ organizationId: mine.id, scopes: ['webhooks:read', 'webhooks:write'] })).secret;
    api = await openApiChecker(`${base}/api/v1/openapi.json`);
  });
  afterAll(async () => {
    await ctx.stop();
    await receiver.stop();
    await tb.cleanup();
    await db.drop();
  });

  const call = (method: string, path: string, body?: unknown, key = keys.mine, headers: Record<string, string> = {}) =>
    api.fetch(`${base}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const listIds = async (key = keys.mine) => ((await call('GET', '/webhooks', undefined, key)).body as { webhooks: Array<{ id: string }> }).webhooks.map((w) => w.id);
  type Json = Record<string, any>;

  it('registers, shows, changes, tests, rotates, logs, replays and deletes an endpoint', async () => {
    receiver.reply = () => ({ status: 200 });
    const created = await call('POST', '/webhooks', { url: receiver.url('/api'), events: ['cascade.recipient.finished'], description: 'CRM' });
    expect(created.status).toBe(201);
    const hook = created.body as Json;
    expect(hook).toEqual({
      id: expect.any(String), url: receiver.url('/api'), events: ['cascade.recipient.finished'], description: 'CRM', disabled: false, disabledReason: null,
      disabledAt: null, failingSince: null, previousSecretExpiresAt: null, createdAt: expect.any(String), updatedAt: expect.any(String), secret: expect.stringMatching(/^whsec_/),
    });

    const shown = await call('GET', `/webhooks/${hook.id}`);
    expect(shown.body).toEqual({ ...hook, secret: undefined });
    expect(JSON.stringify(shown.body)).not.toContain(hook.secret);
    expect(await listIds()).toEqual([hook.id]);

    const patched = await call('PATCH', `/webhooks/${hook.id}`, { description: 'CRM (prod)' });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ description: 'CRM (prod)', url: receiver.url('/api') });

    const test = await call('POST', `/webhooks/${hook.id}/test`);
    expect(test.status).toBe(202);
    expect(test.body).toMatchObject({ eventType: 'webhook.test', status: 'pending', attempts: [] });
    const [got] = await waitFor(() => receiver.at('/api').length === 1 && receiver.at('/api'));
    expect(new Webhook(hook.secret).verify(got.body, got.headers)).toMatchObject({ type: 'webhook.test' });

    const log = await waitFor(async () => {
      const response = await call('GET', `/webhooks/${hook.id}/deliveries`);
      const ds = (response.body as Json).deliveries;
      return ds[0]?.status === 'delivered' && (response.body as Json);
    });
    expect(log).toEqual({
      deliveries: [{
        id: (test.body as Json).id, eventId: got.headers['webhook-id'], eventType: 'webhook.test', status: 'delivered', attemptCount: 1, nextAttemptAt: null,
        createdAt: expect.any(String), updatedAt: expect.any(String),
        attempts: [{ number: 1, startedAt: expect.any(String), durationMs: expect.any(Number), statusCode: 200, responseBody: '', error: null, outcome: 'delivered' }],
      }],
      nextCursor: null,
    });

    const rotated = await call('POST', `/webhooks/${hook.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    const newSecret = (rotated.body as Json).secret as string;
    expect(newSecret).not.toBe(hook.secret);
    expect((rotated.body as Json).previousSecretExpiresAt).not.toBeNull();

    const replayed = await call('POST', `/webhooks/${hook.id}/deliveries/${(test.body as Json).id}/replay`);
    expect(replayed.status).toBe(202);
    const [, again] = await waitFor(() => receiver.at('/api').length === 2 && receiver.at('/api'));
    expect(again.headers['webhook-id']).toBe(got.headers['webhook-id']);
    expect(() => new Webhook(newSecret).verify(again.body, again.headers)).not.toThrow();
    expect(() => new Webhook(hook.secret).verify(again.body, again.headers)).not.toThrow();

    const deleted = await api.fetch(`${base}/api/v1/webhooks/${hook.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${keys.mine}` } });
    expect(deleted.status).toBe(204);
    expect((await call('GET', `/webhooks/${hook.id}`)).status).toBe(404);
    expect(await listIds()).toEqual([]);
  });

  it("bounds an organization's endpoints by its plan (the gateway passes the plan): one more is 409 webhook_endpoint_limit, nothing created", async () => {
    const trial = await contacts.directory.createOrganization({ name: 'Trial', plan: 'trial', emailConfirmed: true });
    const key = (await contacts.directory.issueApiKey({ organizationId: trial.id })).secret;
    const limit = WEBHOOK_FAN_OUT.trial.endpoints;
    for (let i = 0; i < limit; i++) expect((await call('POST', '/webhooks', { url: receiver.url(`/trial-${i}`), events: ['cascade.recipient.finished'] }, key)).status).toBe(201);
    const refused = await call('POST', '/webhooks', { url: receiver.url('/trial-over'), events: ['cascade.recipient.finished'] }, key);
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({ code: 'webhook_endpoint_limit', limit });
    expect(await listIds(key)).toHaveLength(limit);
  });

  it('answers a repeated create with the same Idempotency-Key from the saved response', async () => {
    const body = { url: receiver.url('/idem'), events: ['cascade.recipient.finished'] };
    const first = await call('POST', '/webhooks', body, keys.mine, { 'idempotency-key': 'hook-1' });
    const again = await call('POST', '/webhooks', body, keys.mine, { 'idempotency-key': 'hook-1' });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect((await listIds()).filter((id) => id === (first.body as Json).id)).toHaveLength(1);
    await call('DELETE', `/webhooks/${(first.body as Json).id}`);
  });

  it.each<[string, unknown, number, string, string]>([
    ['an unknown event type', { url: 'https://hooks.example.com/x', events: ['order.paid'] }, 400, 'invalid_request', '/events/0'],
    ['no events', { url: 'https://hooks.example.com/x', events: [] }, 400, 'invalid_request', '/events'],
    ['no url', { events: ['cascade.recipient.finished'] }, 400, 'invalid_request', '/url'],
    ['an unknown field', { url: 'https://hooks.example.com/x', events: ['cascade.recipient.finished'], secret: 'mine' }, 400, 'invalid_request', '/secret'],
    ['a private address', { url: 'https://10.0.0.1/x', events: ['cascade.recipient.finished'] }, 400, 'webhook_url_not_allowed', '/url'],
    ['the metadata service', { url: 'http://169.254.169.254/latest', events: ['cascade.recipient.finished'] }, 400, 'webhook_url_not_allowed', '/url'],
    ['an IPv6 unique-local address', { url: 'https://[fd00::1]/x', events: ['cascade.recipient.finished'] }, 400, 'webhook_url_not_allowed', '/url'],
  ])('refuses to create with %s, creating nothing', async (_l, body, status, code, pointer) => {
    const before = await listIds();
    const res = await call('POST', '/webhooks', body);
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body).toMatchObject({ status, code });
    expect(((res.body as Json).errors as Array<{ pointer: string }>).map((e) => e.pointer)).toEqual([pointer]);
    expect(await listIds()).toEqual(before);
  });

  it("answers 404 for another organization's endpoint on every route, changing nothing", async () => {
    receiver.reply = () => ({ status: 200 });
    const hook = (await call('POST', '/webhooks', { url: receiver.url('/theirs'), events: ['cascade.recipient.finished'] })).body as Json;
    const delivery = (await call('POST', `/webhooks/${hook.id}/test`)).body as Json;
    await waitFor(() => receiver.at('/theirs').length === 1);
    for (const [method, path, body] of [
      ['GET', `/webhooks/${hook.id}`],
      ['PATCH', `/webhooks/${hook.id}`, { disabled: true }],
      ['DELETE', `/webhooks/${hook.id}`],
      ['POST', `/webhooks/${hook.id}/rotate-secret`],
      ['POST', `/webhooks/${hook.id}/test`],
      ['GET', `/webhooks/${hook.id}/deliveries`],
      ['POST', `/webhooks/${hook.id}/deliveries/${delivery.id}/replay`],
    ] as Array<[string, string, unknown?]>) {
      const res = await call(method, path, body, keys.other);
      expect([method, path, res.status, (res.body as Json).code]).toEqual([method, path, 404, 'not_found']);
    }
    expect(await listIds(keys.other)).toEqual([]);
    expect((await call('GET', `/webhooks/${hook.id}`)).body).toMatchObject({ disabled: false, previousSecretExpiresAt: null });
    await new Promise((r) => setTimeout(r, 150));
    expect(receiver.at('/theirs')).toHaveLength(1);
  });

  it('reads with webhooks:read and needs webhooks:write to change anything', async () => {
    expect((await call('GET', '/webhooks', undefined, keys.readOnly)).status).toBe(200);
    const res = await call('POST', '/webhooks', { url: receiver.url('/ro'), events: ['cascade.recipient.finished'] }, keys.readOnly);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ code: 'insufficient_scope', requiredScope: 'webhooks:write' });
  });

  it.each(['cascade.recipient.finished', 'cascade.recipient.rated', 'review_request.rated'])(
    'needs cascades:read besides webhooks:write to subscribe to %s, at create and at update (403, nothing created or changed)',
    async (event) => {
      const before = await listIds();
      const refused = await call('POST', '/webhooks', { url: receiver.url('/scoped'), events: [event] }, keys.hooksOnly);
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({ code: 'insufficient_scope', requiredScope: 'cascades:read' });
      expect(await listIds()).toEqual(before);
      const made = ((await call('POST', '/webhooks', { url: receiver.url('/scoped'), events: ['cascade.recipient.finished'] })).body as Json).id as string;
      const update = await call('PATCH', `/webhooks/${made}`, { events: [event], description: 'changed' }, keys.hooksOnly);
      expect(update.status).toBe(403);
      expect(((await call('GET', `/webhooks/${made}`)).body as Json).description).not.toBe('changed');
      expect((await call('DELETE', `/webhooks/${made}`)).status).toBe(204);
    },
  );

  it("needs the scope of the endpoint's own events on every route that changes, tests, rotates, replays or deletes it (M1: 403, nothing changed or sent)", async () => {
    receiver.reply = () => ({ status: 200 });
    const hook = (await call('POST', '/webhooks', { url: receiver.url('/data'), events: ['cascade.recipient.finished'], description: 'CRM' })).body as Json;
    const delivery = (await call('POST', `/webhooks/${hook.id}/test`)).body as Json;
    await waitFor(() => receiver.at('/data').length === 1);
    const before = (await call('GET', `/webhooks/${hook.id}`)).body as Json;
    for (const [method, path, body] of [
      ['PATCH', `/webhooks/${hook.id}`, { url: receiver.url('/attacker') }],
      ['PATCH', `/webhooks/${hook.id}`, { disabled: true }],
      ['PATCH', `/webhooks/${hook.id}`, { description: 'renamed' }],
      ['POST', `/webhooks/${hook.id}/rotate-secret`],
      ['POST', `/webhooks/${hook.id}/test`],
      ['POST', `/webhooks/${hook.id}/deliveries/${delivery.id}/replay`],
      ['DELETE', `/webhooks/${hook.id}`],
    ] as Array<[string, string, unknown?]>) {
      const res = await call(method, path, body, keys.hooksOnly);
      expect([method, path, res.status, (res.body as Json)?.code, (res.body as Json)?.requiredScope]).toEqual([method, path, 403, 'insufficient_scope', 'cascades:read']);
    }
    expect((await call('GET', `/webhooks/${hook.id}`)).body).toEqual(before);
    const log = (await call('GET', `/webhooks/${hook.id}/deliveries`)).body as Json;
    expect(log.deliveries).toHaveLength(1);
    expect(receiver.at('/attacker')).toHaveLength(0);
    expect(receiver.at('/data')).toHaveLength(1);
    // A key with the data scope still manages it.
    expect((await call('PATCH', `/webhooks/${hook.id}`, { description: 'renamed' })).status).toBe(200);
    expect((await call('DELETE', `/webhooks/${hook.id}`)).status).toBe(204);
  });

  it('answers 404 for a malformed id and 400 for a bad page size', async () => {
    expect((await call('GET', '/webhooks/not-an-id')).status).toBe(404);
    const hook = (await call('POST', '/webhooks', { url: receiver.url('/page'), events: ['cascade.recipient.finished'] })).body as Json;
    const res = await call('GET', `/webhooks/${hook.id}/deliveries?limit=500`);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'invalid_request' });
  });
});
