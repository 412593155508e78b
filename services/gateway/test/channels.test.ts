import { startContacts, type RunningContacts } from '@rrs/contacts';
import { startScheduler } from '@rrs/cascade-scheduler';
import { startEmailSender } from '@rrs/channel-email';
import { createPool, type Pool } from '@rrs/runtime';
import { SinkOutbox, sinkSend, startChannelSender } from '@rrs/sender-kit';
import { createTestBus, createTestDatabase, openApiChecker, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startGateway } from '../src';
import { startChannelCatalog, type RunningChannelCatalog } from '../src/catalog/channelCatalog';

const TTL_MS = 1_500;

/**
 * The live catalog: gateway + contacts + cascade-scheduler + real senders (sink providers) on one bus.
 * A fourth channel (VIBER) is started and stopped inside the test, with no gateway restart.
 */
describe('channel catalog and send endpoints built from running senders', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let contacts: RunningContacts;
  let catalog: RunningChannelCatalog;
  let schedulerPool: Pool;
  let base: string;
  const ctx = testContext('gateway-channels');
  const outbox = new SinkOutbox();
  const keys: Record<string, string> = {};
  let locationId = '';
  const locations: Record<string, string> = {};

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    const scheduler = await startScheduler(
      { databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://reviews.test', minuteMs: 40 },
      ctx,
      { bus: tb.bus, channelsCacheMs: 0 },
    );
    catalog = await startChannelCatalog({ bus: tb.bus, logger: ctx.logger, ttlMs: TTL_MS, pollMs: 100 });
    ctx.lifecycle.onStop('catalog', () => catalog.stop());
    const gateway = await startGateway(
      { host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`, publicBaseUrl: 'http://reviews.test' },
      ctx,
      { channelCatalog: catalog },
    );
    base = gateway.url;
    await startEmailSender({ databaseUrl: db.url, concurrency: 4, channelTtlMs: TTL_MS }, ctx, { bus: tb.bus, outbox });
    ctx.health.setReady(true);
    const setups = { paid: { plan: 'standard', channels: ['EMAIL', 'VIBER'] }, bare: { plan: 'standard', channels: [] }, trial: { plan: 'trial', channels: ['EMAIL', 'VIBER'] } } as const;
    for (const [name, s] of Object.entries(setups)) {
      const org = await contacts.directory.createOrganization({ name, plan: s.plan, emailConfirmed: true, locale: 'en', defaultRegion: 'RU', sendWindow: null, cooldownDays: 0 });
      keys[name] = (await contacts.directory.issueApiKey({ organizationId: org.id })).secret;
      for (const channel of s.channels) await contacts.channels.set({ organizationId: org.id, channel, configured: true });
      locations[name] = (await contacts.directory.createLocation({ organizationId: org.id, name: 'Tverskaya', address: 'Tverskaya 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [] })).id;
    }
    locationId = locations.paid;
    schedulerPool = createPool({ url: db.url, schema: 'scheduler' });
  });
  afterAll(async () => {
    await ctx.stop();
    await schedulerPool.end();
    await tb.cleanup();
    await db.drop();
  });

  const call = async (method: string, path: string, body?: unknown, who = 'paid') => {
    const api = await openApiChecker(`${base}/api/v1/openapi.json`);
    return api.fetch(`${base}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${keys[who]}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  };
  const keysOf = (body: unknown) => (body as { channels: Array<{ key: string }> }).channels.map((c) => c.key);
  const cascadeCount = async () => (await schedulerPool.query('SELECT count(*)::int AS n FROM cascades')).rows[0].n as number;

  it('GET /channels lists the running senders with per-organization configured and sendEndpoint', async () => {
    const res = await call('GET', '/channels');
    expect(res.status).toBe(200);
    // The sender runs the sink (outside production, no provider configured): the catalog says nothing is delivered.
    expect(res.body).toEqual({ channels: [{
      key: 'EMAIL', slug: 'email', label: 'Email', contactField: 'email', configured: true, sendEndpoint: '/api/v1/channels/email/send',
      delivers: false, providers: [{ name: 'sink', state: 'ok', since: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) }],
    }] });
    expect((await call('GET', '/channels', undefined, 'bare')).body).toEqual({ channels: [expect.objectContaining({ key: 'EMAIL', configured: false })] });
  });

  it('POST /channels/email/send → 202 and the email goes out as a one-step cascade', async () => {
    const res = await call('POST', '/channels/email/send', { locationId, externalId: 'order-1', recipients: [{ name: 'Anna', email: 'anna@example.com' }, { name: 'Boris', email: 'boris@example.com', phone: '+79161234567' }] });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ id: expect.any(String), status: 'running', channel: 'EMAIL', queued: 2, skipped: 0 });
    const id = (res.body as { id: string }).id;
    await waitFor(() => outbox.list().some((m) => m.channel === 'EMAIL' && m.to === 'anna@example.com'), { what: 'email in the sink' });
    const cascade = await waitFor(async () => {
      const r = await call('GET', `/cascades/${id}`);
      const b = r.body as { recipients: Array<{ steps: Array<{ channel: string; status: string }> }> };
      return b.recipients.some((x) => x.steps[0]?.status === 'sent') ? b : undefined;
    }, { what: 'step sent' });
    expect(cascade.recipients.map((r) => r.steps.map((s) => s.channel))).toEqual([['EMAIL'], ['EMAIL']]);
  });

  it('a fourth channel appears with its send endpoint while its sender runs, and leaves when it stops', async () => {
    expect((await call('POST', '/channels/viber/send', { locationId, recipients: [{ phone: '+79161234567' }] })).status).toBe(404);

    const viberCtx = testContext('viber-sender');
    const viberOutbox = new SinkOutbox();
    const viberSender = await startChannelSender({ databaseUrl: db.url, concurrency: 2, channelTtlMs: TTL_MS }, viberCtx, {
      service: 'channel-viber',
      schema: 'channel_viber',
      bus: tb.bus,
      channels: [{ entry: { key: 'VIBER', slug: 'viber', label: 'Viber', contactField: 'phone', capabilities: ['send'], position: 50 }, send: sinkSend('VIBER', viberOutbox, (s) => s.recipient?.phone ?? '') }],
    });
    const listed = await waitFor(async () => {
      const r = await call('GET', '/channels');
      return keysOf(r.body).includes('VIBER') ? r.body : undefined;
    }, { what: 'VIBER in the catalog' });
    expect((listed as { channels: unknown[] }).channels).toEqual([
      expect.objectContaining({ key: 'EMAIL' }),
      // A sender that announces no provider health: nothing known against it.
      { key: 'VIBER', slug: 'viber', label: 'Viber', contactField: 'phone', configured: true, sendEndpoint: '/api/v1/channels/viber/send', delivers: true, providers: [] },
    ]);
    // A sender that reports it cannot send now (its working account blocked) shows as not configured, and back.
    const viberConfigured = async () => ((await call('GET', '/channels')).body as { channels: Array<{ key: string; configured: boolean }> }).channels.find((c) => c.key === 'VIBER')?.configured;
    await viberSender.setAvailability('VIBER', { available: false, reason: 'account_blocked' });
    await waitFor(async () => (await viberConfigured()) === false, { what: 'VIBER unavailable' });
    await viberSender.setAvailability('VIBER', { available: true });
    await waitFor(async () => (await viberConfigured()) === true, { what: 'VIBER available again' });

    // Its request requires the entry's contactField (phone), its result's channel is its key.
    const doc = (await (await fetch(`${base}/api/v1/openapi.json`)).json()) as { paths: Record<string, { post: { requestBody: { content: { 'application/json': { schema: { properties: { recipients: { items: { required: string[] } } } } } } }; responses: Record<string, { content: { 'application/json': { schema: { properties: { channel: unknown } } } } }> } }> };
    const viber = doc.paths['/channels/viber/send'].post;
    expect(viber.requestBody.content['application/json'].schema.properties.recipients.items.required).toEqual(['phone']);
    expect(viber.responses['202'].content['application/json'].schema.properties.channel).toMatchObject({ const: 'VIBER' });
    const withoutPhone = await call('POST', '/channels/viber/send', { locationId, recipients: [{ name: 'Boris', phone: '8 916 765-43-21' }, { name: 'Only email', email: 'x@example.com' }] });
    expect(withoutPhone.status).toBe(400);
    expect(withoutPhone.body).toMatchObject({ code: 'invalid_request', errors: [{ pointer: '/recipients/1/phone' }] });
    expect(viberOutbox.list()).toEqual([]);

    const res = await call('POST', '/channels/viber/send', { locationId, name: 'Spring', recipients: [{ name: 'Boris', phone: '8 916 765-43-21' }, { name: 'Vera', phone: '+7 916 000-11-22', email: 'vera@example.com' }] });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ id: expect.any(String), status: 'running', channel: 'VIBER', queued: 2, skipped: 0 });
    const msg = await waitFor(() => viberOutbox.list().find((m) => m.to === '+79167654321'), { what: 'viber message' });
    expect(msg).toMatchObject({ channel: 'VIBER', to: '+79167654321' });

    await viberCtx.stop();
    await waitFor(async () => !keysOf((await call('GET', '/channels')).body).includes('VIBER'), { timeoutMs: TTL_MS * 4, what: 'VIBER to leave' });
    const gone = await call('POST', '/channels/viber/send', { locationId, recipients: [{ phone: '+79161234567' }] });
    expect(gone.status).toBe(404);
    expect((gone.body as { code: string }).code).toBe('not_found');
  });

  it.each([
    ['a trial plan', 'trial', () => ({ locationId: locations.trial, recipients: [{ email: 'a@example.com' }] }), 402, 'plan_required'],
    ['a channel not configured for the organization', 'bare', () => ({ locationId: locations.bare, recipients: [{ email: 'a@example.com' }] }), 409, 'channel_not_configured'],
    ['an unknown location', 'paid', () => ({ locationId: 'nope', recipients: [{ email: 'a@example.com' }] }), 404, 'not_found'],
    ['no recipients', 'paid', () => ({ locationId, recipients: [] }), 400, 'invalid_request'],
    ['501 recipients', 'paid', () => ({ locationId, recipients: Array.from({ length: 501 }, (_, i) => ({ email: `r${i}@example.com` })) }), 400, 'invalid_request'],
    ['a bad email', 'paid', () => ({ locationId, recipients: [{ email: 'not-an-email' }] }), 400, 'invalid_request'],
    ['a recipient without the email the channel needs', 'paid', () => ({ locationId, recipients: [{ email: 'a@example.com' }, { name: 'Boris', phone: '+79161234567' }] }), 400, 'invalid_request'],
  ])('refuses %s with %s and creates or sends nothing', async (_label, who, body, status, code) => {
    const cascadesBefore = await cascadeCount();
    const sentBefore = outbox.list().length;
    const res = await call('POST', '/channels/email/send', body(), who);
    expect(res.status).toBe(status);
    expect((res.body as { code: string }).code).toBe(code);
    expect(await cascadeCount()).toBe(cascadesBefore);
    await new Promise((r) => setTimeout(r, 100));
    expect(outbox.list().length).toBe(sentBefore);
  });
});
