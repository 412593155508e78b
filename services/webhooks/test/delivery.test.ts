import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { createGrpcClient, httpStatusOf, type DomainError, type GrpcClientHandle } from '@rrs/runtime';
import { eventsV1, eventSubject, PLANS, WEBHOOK_FAN_OUT, webhookFanOut, webhooksV1 } from '@rrs/proto';
import { createTestBus, createTestDatabase, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startWebhooks, type RunningWebhooks } from '../src';
import { Receiver, type Reply } from './support/receiver';
import { testWebhooksConfig } from './support/service';

/**
 * The webhooks service for real: PostgreSQL, the bus, its gRPC API, and a local receiver. The retry
 * schedule is shortened through config (the production one is checked as data in schedule.test.ts).
 */
const SCHEDULE = [0, 100, 100, 100, 100];
const TIMEOUT_MS = 400;

describe('webhook delivery', () => {
  let db: TestDatabase;
  let tb: TestBus;
  const ctx = testContext('webhooks-test');
  let svc: RunningWebhooks;
  let grpc: GrpcClientHandle<webhooksV1.WebhooksServiceClient>;
  let api: GrpcClientHandle<webhooksV1.WebhooksServiceClient>['client'];
  let sql: pg.Pool;
  const receiver = new Receiver();
  const dns: Record<string, string[]> = {};

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    await receiver.start();
    svc = await startWebhooks(
      testWebhooksConfig(db.url, tb.prefix, { concurrency: 8, policy: { retryScheduleMs: SCHEDULE, timeoutMs: TIMEOUT_MS, disableAfterMs: 60_000, secretGraceMs: 60_000 } }),
      ctx,
      {
        bus: tb.bus,
        resolve: async (host) => {
          if (!dns[host]) throw new Error(`ENOTFOUND ${host}`);
          return dns[host];
        },
      },
    );
    ctx.health.setReady(true);
    grpc = createGrpcClient(webhooksV1.WebhooksServiceClient, `127.0.0.1:${svc.grpcPort}`);
    api = grpc.client;
    sql = new pg.Pool({ connectionString: db.url, options: '-c search_path=webhooks', max: 2 });
  });
  afterAll(async () => {
    grpc.close();
    await sql.end();
    await ctx.stop();
    await receiver.stop();
    await tb.cleanup();
    await db.drop();
  });

  const finished = (org: string, overrides: Partial<eventsV1.CascadeRecipientFinished> = {}): eventsV1.Event => ({
    id: randomUUID(),
    type: 'cascade.recipient.finished',
    organizationId: org,
    occurredAt: new Date('2026-11-21T10:00:00.000Z'),
    payload: {
      $case: 'cascadeRecipientFinished',
      cascadeRecipientFinished: {
        cascadeId: 'c-1',
        cascadeExternalId: 'crm-42',
        recipient: { id: 'r-1', name: 'Anna', email: 'anna@example.com', phone: '', contactExternalId: 'cust-7' },
        rating: 5,
        feedback: 'Great',
        reason: 'rated',
        steps: [{ order: 1, channel: 'EMAIL', status: 'sent', reason: '', sentAt: new Date('2026-11-21T09:00:00.000Z'), reroutedTo: '', deliveredAt: new Date('2026-11-21T09:00:05.000Z'), provider: 'postmark' }],
        finishedAt: new Date('2026-11-21T10:00:00.000Z'),
        reviewRequestId: '',
        locationId: 'loc-1',
        ...overrides,
      },
    },
  });
  const publish = (e: eventsV1.Event) => tb.bus.publish(eventSubject(e.type), eventsV1.Event.encode(e).finish());
  const create = (org: string, path: string, extra: Partial<webhooksV1.CreateEndpointRequest> = {}) =>
    api.createEndpoint({ organizationId: org, plan: 'pro', url: receiver.url(path), events: ['cascade.recipient.finished'], description: '', ...extra });
  const deliveriesOf = async (org: string, endpointId: string) => (await api.listDeliveries({ organizationId: org, endpointId, limit: 0, cursor: '' })).deliveries;
  const settled = (org: string, endpointId: string, count = 1) =>
    waitFor(async () => {
      const ds = await deliveriesOf(org, endpointId);
      return ds.length >= count && ds.every((d) => d.status !== 'pending') && ds;
    }, { what: 'deliveries settled' });
  /** The error a gRPC call rejects with, and the HTTP status the gateway answers it with (by its kind). */
  const rejection = (call: Promise<unknown>) =>
    call.then(() => { throw new Error('expected a rejection'); }, (err: unknown) => Object.assign(err as DomainError, { status: httpStatusOf(err) }));

  it('fails 3 times then succeeds: one delivered attempt, one webhook-id, valid signatures, the documented body', async () => {
    const org = randomUUID();
    const { endpoint, secret } = await create(org, '/flaky');
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);
    receiver.reply = (_r, mine) => (mine.length <= 3 ? { status: 500, body: 'boom' } : { status: 200, body: 'thanks' });
    const event = finished(org);
    await publish(event);
    const [delivery] = await settled(org, endpoint!.id);

    const got = receiver.at('/flaky');
    expect(got).toHaveLength(4);
    const wh = new Webhook(secret);
    for (const request of got) {
      expect(request.headers['webhook-id']).toBe(event.id);
      expect(request.headers['content-type']).toBe('application/json');
      expect(wh.verify(request.body, request.headers)).toEqual(JSON.parse(request.body));
      expect(request.body).toBe(got[0].body);
    }
    expect(JSON.parse(got[0].body)).toEqual({
      type: 'cascade.recipient.finished',
      timestamp: '2026-11-21T10:00:00.000Z',
      data: {
        cascadeId: 'c-1',
        cascadeExternalId: 'crm-42',
        reviewRequestId: null,
        locationId: 'loc-1',
        recipient: { id: 'r-1', name: 'Anna', email: 'anna@example.com', phone: null, contactExternalId: 'cust-7' },
        rating: 5,
        feedback: 'Great',
        reason: 'rated',
        steps: [{ order: 1, channel: 'EMAIL', status: 'sent', reason: null, sentAt: '2026-11-21T09:00:00.000Z', reroutedTo: null, deliveredAt: '2026-11-21T09:00:05.000Z', provider: 'postmark', delivery: 'delivered' }],
        finishedAt: '2026-11-21T10:00:00.000Z',
      },
    });

    expect(delivery).toMatchObject({ eventId: event.id, eventType: 'cascade.recipient.finished', status: 'delivered', attemptCount: 4, nextAttemptAt: undefined });
    expect(delivery.attempts.map((a) => [a.number, a.statusCode, a.outcome])).toEqual([
      [1, 500, 'retry'],
      [2, 500, 'retry'],
      [3, 500, 'retry'],
      [4, 200, 'delivered'],
    ]);
    expect(delivery.attempts.filter((a) => a.outcome === 'delivered')).toHaveLength(1);
    expect(delivery.attempts[0].responseBody).toBe('boom');
    // Retries wait the (shortened) schedule: 100 ms ± 10 %.
    for (let i = 1; i < got.length; i++) expect(got[i].at - got[i - 1].at).toBeGreaterThanOrEqual(85);
    expect((await api.getEndpoint({ organizationId: org, id: endpoint!.id })).endpoint).toMatchObject({ disabled: false, failingSince: undefined });
  });

  it('a redelivered bus message never makes a second delivery', async () => {
    const org = randomUUID();
    const { endpoint } = await create(org, '/dedupe');
    receiver.reply = () => ({ status: 204 });
    const event = finished(org);
    await publish(event);
    await publish(event);
    await settled(org, endpoint!.id);
    await new Promise((r) => setTimeout(r, 300));
    expect(await deliveriesOf(org, endpoint!.id)).toHaveLength(1);
    expect(receiver.at('/dedupe')).toHaveLength(1);
    const { rows } = await sql.query('SELECT count(*)::int AS n FROM deliveries WHERE event_id = $1', [event.id]);
    expect(rows[0].n).toBe(1);
  });

  it('keeps no event nobody subscribes to', async () => {
    const org = randomUUID();
    const { endpoint } = await create(org, '/off');
    await api.updateEndpoint({ organizationId: org, id: endpoint!.id, disabled: true, events: undefined });
    const ignored = [finished(org), finished(randomUUID())];
    for (const e of ignored) await publish(e);
    const control = randomUUID();
    const { endpoint: live } = await create(control, '/control');
    receiver.reply = () => ({ status: 200 });
    const seen = finished(control);
    await publish(seen);
    await settled(control, live!.id);
    await waitFor(async () => (await tb.bus.pending('EVENTS', 'webhooks')) === 0, { what: 'every event consumed' });
    const { rows } = await sql.query('SELECT id FROM events WHERE id = ANY ($1)', [[...ignored, seen].map((e) => e.id)]);
    expect(rows.map((r) => r.id)).toEqual([seen.id]);
    expect(receiver.at('/off')).toHaveLength(0);
  });

  it('answers events arriving together by their own subscribers; one with a malformed organization id is dropped without holding up the others', async () => {
    const org = randomUUID();
    const { endpoint } = await create(org, '/together');
    receiver.reply = () => ({ status: 200 });
    const wanted = [finished(org), finished(org)];
    const unwanted = [finished(randomUUID()), finished('not-a-uuid')];
    await Promise.all([...unwanted, ...wanted].map((e) => publish(e)));
    await waitFor(async () => (await deliveriesOf(org, endpoint!.id)).length === 2, { what: 'both deliveries' });
    await waitFor(async () => (await tb.bus.pending('EVENTS', 'webhooks')) === 0, { what: 'every event consumed' });
    const { rows } = await sql.query('SELECT id FROM events WHERE id = ANY ($1) ORDER BY id', [[...wanted, ...unwanted].map((e) => e.id)]);
    expect(rows.map((r) => r.id)).toEqual(wanted.map((e) => e.id).sort());
  });

  it('410 disables the endpoint, visibly, and nothing more is sent to it', async () => {
    const org = randomUUID();
    const { endpoint } = await create(org, '/gone');
    receiver.reply = () => ({ status: 410 });
    await publish(finished(org));
    const [delivery] = await settled(org, endpoint!.id);
    expect(delivery.status).toBe('failed');
    expect(delivery.attempts.map((a) => [a.statusCode, a.outcome])).toEqual([[410, 'failed']]);
    const after = (await api.getEndpoint({ organizationId: org, id: endpoint!.id })).endpoint!;
    expect(after).toMatchObject({ disabled: true, disabledReason: 'gone' });
    expect(after.disabledAt).toBeInstanceOf(Date);

    await publish(finished(org));
    await new Promise((r) => setTimeout(r, 300));
    expect(await deliveriesOf(org, endpoint!.id)).toHaveLength(1);
    expect(receiver.at('/gone')).toHaveLength(1);
    const err = await rejection(api.sendTestEvent({ organizationId: org, id: endpoint!.id }));
    expect(err).toMatchObject({ status: 409, code: 'webhook_endpoint_disabled' });
  });

  it('retries a timed-out attempt', async () => {
    const org = randomUUID();
    const { endpoint } = await create(org, '/slow');
    receiver.reply = (_r, mine) => (mine.length === 1 ? { hang: true } : { status: 200 });
    await publish(finished(org));
    const [delivery] = await settled(org, endpoint!.id);
    expect(delivery.status).toBe('delivered');
    expect(delivery.attempts).toHaveLength(2);
    expect(delivery.attempts[0]).toMatchObject({ statusCode: 0, outcome: 'retry', error: `timeout after ${TIMEOUT_MS} ms` });
    expect(delivery.attempts[0].durationMs).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    expect(delivery.attempts[1]).toMatchObject({ statusCode: 200, outcome: 'delivered', error: '' });
  });

  it('honours Retry-After on 429, does not follow redirects, and caps the response body kept', async () => {
    const org = randomUUID();
    const { endpoint } = await create(org, '/busy');
    const replies: Reply[] = [{ status: 429, headers: { 'retry-after': '1' } }, { status: 302, headers: { location: '/elsewhere' } }, { status: 200, body: 'x'.repeat(100_000) }];
    receiver.reply = (_r, mine) => replies[Math.min(mine.length, replies.length) - 1];
    await publish(finished(org));
    const [delivery] = await settled(org, endpoint!.id);
    const got = receiver.at('/busy');
    expect(got).toHaveLength(3);
    expect(got[1].at - got[0].at).toBeGreaterThanOrEqual(950);
    expect(receiver.at('/elsewhere')).toHaveLength(0);
    expect(delivery.attempts.map((a) => [a.statusCode, a.outcome])).toEqual([[429, 'retry'], [302, 'retry'], [200, 'delivered']]);
    expect(delivery.attempts[2].responseBody).toHaveLength(4096);
  });

  it('fails a delivery after the last scheduled attempt, and disables an endpoint failing for the whole window', async () => {
    const org = randomUUID();
    const { endpoint } = await create(org, '/down');
    receiver.reply = () => ({ status: 503 });
    await publish(finished(org));
    const [delivery] = await settled(org, endpoint!.id);
    expect(delivery.status).toBe('failed');
    expect(delivery.attempts.map((a) => a.outcome)).toEqual(['retry', 'retry', 'retry', 'retry', 'failed']);
    const failing = (await api.getEndpoint({ organizationId: org, id: endpoint!.id })).endpoint!;
    expect(failing).toMatchObject({ disabled: false });
    expect(failing.failingSince).toBeInstanceOf(Date);

    // Time passes: the endpoint has been failing longer than the window (60 s in this test).
    await sql.query(`UPDATE endpoints SET failing_since = now() - interval '61 seconds' WHERE id = $1`, [endpoint!.id]);
    await publish(finished(org));
    await waitFor(async () => (await api.getEndpoint({ organizationId: org, id: endpoint!.id })).endpoint!.disabled, { what: 'endpoint disabled' });
    expect((await api.getEndpoint({ organizationId: org, id: endpoint!.id })).endpoint).toMatchObject({ disabled: true, disabledReason: 'failing' });
    const ds = await settled(org, endpoint!.id, 2);
    expect(ds[0]).toMatchObject({ status: 'failed', attemptCount: 1 });

    // Enabling again starts afresh; a replay then delivers.
    receiver.reply = () => ({ status: 200 });
    const enabled = (await api.updateEndpoint({ organizationId: org, id: endpoint!.id, disabled: false, events: undefined })).endpoint!;
    expect(enabled).toMatchObject({ disabled: false, disabledReason: '', failingSince: undefined });
    const replayed = (await api.replayDelivery({ organizationId: org, endpointId: endpoint!.id, deliveryId: ds[0].id })).delivery!;
    expect(replayed).toMatchObject({ id: ds[0].id, status: 'pending' });
    const after = await settled(org, endpoint!.id, 2);
    expect(after[0]).toMatchObject({ status: 'delivered', attemptCount: 2 });
    expect(after[0].attempts.map((a) => [a.number, a.statusCode])).toEqual([[1, 503], [2, 200]]);
  });

  it('sends a test event on request, and replays a delivery with the same webhook-id', async () => {
    const org = randomUUID();
    const { endpoint, secret } = await create(org, '/test', { events: ['cascade.recipient.finished'], description: 'CRM' });
    receiver.reply = () => ({ status: 200 });
    const queued = (await api.sendTestEvent({ organizationId: org, id: endpoint!.id })).delivery!;
    expect(queued).toMatchObject({ eventType: 'webhook.test', endpointId: endpoint!.id });
    await settled(org, endpoint!.id);
    const [first] = receiver.at('/test');
    expect(new Webhook(secret).verify(first.body, first.headers)).toMatchObject({ type: 'webhook.test', data: { endpointId: endpoint!.id } });

    await api.replayDelivery({ organizationId: org, endpointId: endpoint!.id, deliveryId: queued.id });
    const [again] = await waitFor(async () => {
      const ds = await deliveriesOf(org, endpoint!.id);
      return ds[0].attemptCount === 2 && ds[0].status === 'delivered' && ds;
    });
    expect(again.attempts.map((a) => a.outcome)).toEqual(['delivered', 'delivered']);
    const got = receiver.at('/test');
    expect(got).toHaveLength(2);
    expect(got[1].headers['webhook-id']).toBe(got[0].headers['webhook-id']);
    expect(got[1].headers['webhook-id']).toBe(queued.eventId);
  });

  it('replays once per Idempotency-Key', async () => {
    const org = randomUUID();
    const { endpoint } = await create(org, '/idem-replay');
    receiver.reply = () => ({ status: 200 });
    const { delivery } = await api.sendTestEvent({ organizationId: org, id: endpoint!.id }, { metadata: { 'idempotency-key': 'test-1', 'idempotency-fingerprint': 'fp' } });
    const again = await api.sendTestEvent({ organizationId: org, id: endpoint!.id }, { metadata: { 'idempotency-key': 'test-1', 'idempotency-fingerprint': 'fp' } });
    expect(again).toMatchObject({ idempotentReplayed: true, delivery: { id: delivery!.id } });
    await settled(org, endpoint!.id);
    const metadata = { 'idempotency-key': 'replay-1', 'idempotency-fingerprint': 'fp' };
    const first = await api.replayDelivery({ organizationId: org, endpointId: endpoint!.id, deliveryId: delivery!.id }, { metadata });
    expect(first.idempotentReplayed).toBe(false);
    await waitFor(async () => (await deliveriesOf(org, endpoint!.id))[0].attemptCount === 2 && (await deliveriesOf(org, endpoint!.id))[0].status === 'delivered');
    const second = await api.replayDelivery({ organizationId: org, endpointId: endpoint!.id, deliveryId: delivery!.id }, { metadata });
    expect(second).toMatchObject({ idempotentReplayed: true, delivery: { status: 'delivered', attemptCount: 2 } });
    await new Promise((r) => setTimeout(r, 200));
    expect(await deliveriesOf(org, endpoint!.id)).toHaveLength(1);
    expect(receiver.at('/idem-replay')).toHaveLength(2);
  });

  it('signs with both secrets during a rotation grace period', async () => {
    const org = randomUUID();
    const { endpoint, secret: oldSecret } = await create(org, '/rotate');
    const rotated = await api.rotateSecret({ organizationId: org, id: endpoint!.id });
    expect(rotated.secret).not.toBe(oldSecret);
    expect(rotated.endpoint!.previousSecretExpiresAt!.getTime()).toBeGreaterThan(Date.now() + 50_000);
    receiver.reply = () => ({ status: 200 });
    await api.sendTestEvent({ organizationId: org, id: endpoint!.id });
    await settled(org, endpoint!.id);
    const [got] = receiver.at('/rotate');
    expect(got.headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(() => new Webhook(rotated.secret).verify(got.body, got.headers)).not.toThrow();
    expect(() => new Webhook(oldSecret).verify(got.body, got.headers)).not.toThrow();

    // A second rotation ends the first secret at once: only the two newest sign.
    const second = await api.rotateSecret({ organizationId: org, id: endpoint!.id });
    await api.sendTestEvent({ organizationId: org, id: endpoint!.id });
    await settled(org, endpoint!.id, 2);
    const last = receiver.at('/rotate')[1];
    expect(last.headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(() => new Webhook(second.secret).verify(last.body, last.headers)).not.toThrow();
    expect(() => new Webhook(rotated.secret).verify(last.body, last.headers)).not.toThrow();
    expect(() => new Webhook(oldSecret).verify(last.body, last.headers)).toThrow();
  });

  it('refuses at send time a host that now resolves to a refused address (DNS rebinding), reaching nothing', async () => {
    const org = randomUUID();
    dns['rebind.example.com'] = ['93.184.216.34'];
    const { endpoint } = await api.createEndpoint({ organizationId: org, plan: 'pro', url: 'https://rebind.example.com/hook', events: ['cascade.recipient.finished'], description: '' });
    dns['rebind.example.com'] = ['169.254.169.254'];
    const before = receiver.received.length;
    await api.sendTestEvent({ organizationId: org, id: endpoint!.id });
    const [delivery] = await settled(org, endpoint!.id);
    expect(delivery.status).toBe('failed');
    expect(delivery.attempts).toHaveLength(SCHEDULE.length);
    for (const attempt of delivery.attempts) {
      expect(attempt.statusCode).toBe(0);
      // The tenant reads this log: it says the host is refused, never what it resolves to.
      expect(attempt.error).toBe('url_not_allowed: the webhook host must resolve to public addresses only');
    }
    expect(receiver.received.length).toBe(before);
  });

  it('manages endpoints: list, get, update, delete', async () => {
    const org = randomUUID();
    const first = (await create(org, '/a', { description: 'first' })).endpoint!;
    const second = (await create(org, '/b')).endpoint!;
    expect((await api.listEndpoints({ organizationId: org })).endpoints.map((e) => e.id)).toEqual([first.id, second.id]);
    expect(first).toMatchObject({ organizationId: org, url: receiver.url('/a'), events: ['cascade.recipient.finished'], description: 'first', disabled: false, disabledReason: '' });

    const updated = (await api.updateEndpoint({ organizationId: org, id: first.id, url: receiver.url('/a2'), description: 'moved', events: undefined })).endpoint!;
    expect(updated).toMatchObject({ url: receiver.url('/a2'), description: 'moved', events: ['cascade.recipient.finished'] });
    const off = (await api.updateEndpoint({ organizationId: org, id: first.id, disabled: true, events: undefined })).endpoint!;
    expect(off).toMatchObject({ disabled: true, disabledReason: 'manual' });

    await api.deleteEndpoint({ organizationId: org, id: second.id });
    expect((await api.listEndpoints({ organizationId: org })).endpoints.map((e) => e.id)).toEqual([first.id]);
    expect(await rejection(api.getEndpoint({ organizationId: org, id: second.id }))).toMatchObject({ status: 404, code: 'not_found' });
  });

  it('keeps organizations apart: another organization gets not_found and changes nothing', async () => {
    const org = randomUUID();
    const other = randomUUID();
    const { endpoint } = await create(org, '/mine');
    receiver.reply = () => ({ status: 200 });
    const { delivery } = await api.sendTestEvent({ organizationId: org, id: endpoint!.id });
    await settled(org, endpoint!.id);
    const id = endpoint!.id;
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['get', () => api.getEndpoint({ organizationId: other, id })],
      ['update', () => api.updateEndpoint({ organizationId: other, id, description: 'hijacked', events: undefined })],
      ['delete', () => api.deleteEndpoint({ organizationId: other, id })],
      ['rotate', () => api.rotateSecret({ organizationId: other, id })],
      ['test', () => api.sendTestEvent({ organizationId: other, id })],
      ['deliveries', () => api.listDeliveries({ organizationId: other, endpointId: id, limit: 0, cursor: '' })],
      ['replay', () => api.replayDelivery({ organizationId: other, endpointId: id, deliveryId: delivery!.id })],
      ['malformed id', () => api.getEndpoint({ organizationId: org, id: 'not-a-uuid' })],
    ];
    for (const [label, call] of calls) {
      const err = await rejection(call());
      expect([label, err.status, err.code]).toEqual([label, 404, 'not_found']);
    }
    expect((await api.listEndpoints({ organizationId: other })).endpoints).toEqual([]);
    expect((await api.getEndpoint({ organizationId: org, id })).endpoint).toMatchObject({ description: '', disabled: false, previousSecretExpiresAt: undefined });
    expect(await deliveriesOf(org, id)).toHaveLength(1);
    expect(receiver.at('/mine')).toHaveLength(1);
  });

  it.each([
    ['no event types', { events: [] }, 'invalid_request', '/events'],
    ['an unknown event type', { events: ['cascade.recipient.finished', 'order.paid'] }, 'invalid_request', '/events/1'],
    ['a too long description', { description: 'x'.repeat(501) }, 'invalid_request', '/description'],
    ['a private address', { url: 'https://10.0.0.8/hook' }, 'webhook_url_not_allowed', '/url'],
    ['the cloud metadata address', { url: 'https://169.254.169.254/latest/meta-data' }, 'webhook_url_not_allowed', '/url'],
    ['an IPv4-mapped loopback', { url: 'https://[::ffff:127.0.0.1]/hook' }, 'webhook_url_not_allowed', '/url'],
    ['a host resolving to CGNAT', { url: 'https://cgnat.example.com/hook' }, 'webhook_url_not_allowed', '/url'],
    ['plain http to a public host', { url: 'http://public.example.com/hook' }, 'webhook_url_not_allowed', '/url'],
    ['not a URL', { url: 'hook' }, 'webhook_url_not_allowed', '/url'],
  ])('refuses to register %s (400), creating nothing', async (_label, input, code, pointer) => {
    dns['cgnat.example.com'] = ['100.64.3.4'];
    dns['public.example.com'] = ['93.184.216.34'];
    const org = randomUUID();
    const err = await rejection(create(org, '/never', input));
    expect(err).toMatchObject({ status: 400, code });
    expect((err.details as { errors: Array<{ pointer: string }> }).errors[0].pointer).toBe(pointer);
    expect((await api.listEndpoints({ organizationId: org })).endpoints).toEqual([]);
  });

  it('refuses an update to a refused URL and keeps the old one', async () => {
    const org = randomUUID();
    const { endpoint } = await create(org, '/keep');
    const err = await rejection(api.updateEndpoint({ organizationId: org, id: endpoint!.id, url: 'https://192.168.0.1/x', events: undefined }));
    expect(err).toMatchObject({ status: 400, code: 'webhook_url_not_allowed' });
    expect((await api.getEndpoint({ organizationId: org, id: endpoint!.id })).endpoint!.url).toBe(receiver.url('/keep'));
  });

  it('creates once per Idempotency-Key, answering the same endpoint and secret again', async () => {
    const org = randomUUID();
    const metadata = { 'idempotency-key': 'create-1', 'idempotency-fingerprint': 'fp-1' };
    const req = { organizationId: org, plan: 'pro', url: receiver.url('/idem'), events: ['cascade.recipient.finished'], description: '' };
    const first = await api.createEndpoint(req, { metadata });
    const second = await api.createEndpoint(req, { metadata });
    expect(first.idempotentReplayed).toBe(false);
    expect(second).toMatchObject({ idempotentReplayed: true, secret: first.secret, endpoint: { id: first.endpoint!.id } });
    expect(second.endpoint!.createdAt).toEqual(first.endpoint!.createdAt);
    const err = await rejection(api.createEndpoint(req, { metadata: { 'idempotency-key': 'create-1', 'idempotency-fingerprint': 'fp-2' } }));
    expect(err).toMatchObject({ status: 409, code: 'idempotency_key_reused' });
    expect((await api.listEndpoints({ organizationId: org })).endpoints).toHaveLength(1);
  });

  it.each([...PLANS, ''])('bounds the endpoints of a %s plan (WEBHOOK_FAN_OUT): one more is 409 webhook_endpoint_limit, creating nothing', async (plan) => {
    const org = randomUUID();
    const limit = webhookFanOut(plan).endpoints;
    expect(limit).toBe(plan === '' ? WEBHOOK_FAN_OUT.trial.endpoints : WEBHOOK_FAN_OUT[plan as keyof typeof WEBHOOK_FAN_OUT].endpoints);
    for (let i = 0; i < limit; i++) await create(org, `/limit-${i}`, { plan });
    const err = await rejection(create(org, `/limit-${limit}`, { plan }));
    expect(err).toMatchObject({ status: 409, code: 'webhook_endpoint_limit', details: { limit } });
    expect((await api.listEndpoints({ organizationId: org })).endpoints).toHaveLength(limit);
  });

  it('refuses to replay to a disabled endpoint (409) or an unknown delivery (404), changing nothing', async () => {
    const org = randomUUID();
    const { endpoint } = await create(org, '/no-replay');
    receiver.reply = () => ({ status: 200 });
    const { delivery } = await api.sendTestEvent({ organizationId: org, id: endpoint!.id });
    await settled(org, endpoint!.id);
    const unknown = await rejection(api.replayDelivery({ organizationId: org, endpointId: endpoint!.id, deliveryId: randomUUID() }));
    expect(unknown).toMatchObject({ status: 404, code: 'not_found' });
    await api.updateEndpoint({ organizationId: org, id: endpoint!.id, disabled: true, events: undefined });
    const disabled = await rejection(api.replayDelivery({ organizationId: org, endpointId: endpoint!.id, deliveryId: delivery!.id }));
    expect(disabled).toMatchObject({ status: 409, code: 'webhook_endpoint_disabled' });
    await new Promise((r) => setTimeout(r, 150));
    expect(await deliveriesOf(org, endpoint!.id)).toMatchObject([{ status: 'delivered', attemptCount: 1 }]);
    expect(receiver.at('/no-replay')).toHaveLength(1);
  });

  it('pages the delivery log', async () => {
    const org = randomUUID();
    const { endpoint } = await create(org, '/pages');
    receiver.reply = () => ({ status: 200 });
    for (let i = 0; i < 3; i++) await publish(finished(org));
    await settled(org, endpoint!.id, 3);
    const p1 = await api.listDeliveries({ organizationId: org, endpointId: endpoint!.id, limit: 2, cursor: '' });
    expect(p1.deliveries).toHaveLength(2);
    const p2 = await api.listDeliveries({ organizationId: org, endpointId: endpoint!.id, limit: 2, cursor: p1.nextCursor });
    expect(p2.deliveries).toHaveLength(1);
    expect(p2.nextCursor).toBe('');
    expect(new Set([...p1.deliveries, ...p2.deliveries].map((d) => d.id)).size).toBe(3);
    const err = await rejection(api.listDeliveries({ organizationId: org, endpointId: endpoint!.id, limit: 101, cursor: '' }));
    expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
  });
});
