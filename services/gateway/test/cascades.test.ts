import { openApiChecker, waitFor, type OpenApiChecker } from '@rrs/testkit';
import { schedulerV1 } from '@rrs/proto';
import { MD_IDEMPOTENCY_FINGERPRINT, MD_IDEMPOTENCY_KEY } from '@rrs/idempotency';
import { createGrpcClient } from '@rrs/runtime';
import { startContactCascade } from '../src/useCases/cascades';
import { startCascadeStack, type CascadeStack } from './cascadeStack';

/** Flows, cascades and review requests over real HTTP → gateway → gRPC → contacts + cascade-scheduler → Postgres + JetStream. */
describe('cascades through the gateway', () => {
  let stack: CascadeStack;
  let base: string;
  let api: OpenApiChecker;
  let sender: CascadeStack['sender'];
  let keys: CascadeStack['keys'];
  let locationId = '';
  let flowId = '';
  let schedulerPool: CascadeStack['pool'];

  beforeAll(async () => {
    stack = await startCascadeStack();
    ({ base, sender, keys, locationId, flowId, pool: schedulerPool } = stack);
    api = await openApiChecker(`${base}/api/v1/openapi.json`);
  });
  afterAll(async () => {
    await stack.close();
  });

  const call = (method: string, path: string, body?: unknown, who: keyof typeof keys = 'paid', headers: Record<string, string> = {}) =>
    api.fetch(`${base}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${keys[who]}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const cascadeCount = async () => (await schedulerPool.query('SELECT count(*)::int AS n FROM cascades')).rows[0].n as number;
  const pointers = (body: unknown) => ((body as { errors?: Array<{ pointer: string }> }).errors ?? []).map((e) => e.pointer);

  it('GET /flows lists the flows', async () => {
    const res = await call('GET', '/flows');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ flows: [{ id: flowId, name: 'Email then SMS', isDefault: true, steps: [{ order: 1, channel: 'EMAIL', delayMinutes: 0 }, { order: 2, channel: 'SMS', delayMinutes: 1440 }], responseWindowMinutes: null }] });
    expect((await call('GET', '/flows', undefined, 'other')).body).toEqual({ flows: [] });
  });

  it('POST /cascades → 202 {id,status,queued,skipped,flow}; GET /cascades/{id} shows recipients and steps', async () => {
    const res = await call('POST', '/cascades', { locationId, externalId: 'deal-7', recipients: [{ name: 'Anna', email: 'anna@example.com', phone: '8 916 123-45-67' }, { name: 'Nobody' }] });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ id: expect.any(String), status: 'running', queued: 1, skipped: 1, flow: { id: flowId, name: 'Email then SMS', steps: [{ order: 1, channel: 'EMAIL', delayMinutes: 0 }, { order: 2, channel: 'SMS', delayMinutes: 1440 }] } });
    const id = (res.body as { id: string }).id;
    await waitFor(() => sender.received.some((s) => s.cascadeId === id), { what: 'email sent' });
    const got = await waitFor(async () => {
      const r = await call('GET', `/cascades/${id}`);
      const b = r.body as { recipients: Array<{ steps: Array<{ status: string }> }> };
      return b.recipients[0].steps[0].status === 'sent' && b.recipients[0].steps[1].status === 'scheduled' ? r : undefined;
    }, { what: 'first step sent' });
    expect(got.body).toMatchObject({
      id, status: 'running', externalId: 'deal-7',
      counts: { recipients: 2, queued: 1, skipped: 1, running: 1, finished: 1, unreachable: 1, stepsSent: 1, stepsSkipped: 2, stepsPending: 1 },
      recipients: [
        { name: 'Anna', email: 'anna@example.com', phone: '+79161234567', externalId: null, status: 'running', finishReason: null, rating: null, feedback: null,
          steps: [
            { order: 1, channel: 'EMAIL', status: 'sent', dueAt: expect.any(String), sentAt: expect.any(String), skippedAt: null, reason: null, reroute: null },
            { order: 2, channel: 'SMS', status: 'scheduled', dueAt: expect.any(String), sentAt: null, skippedAt: null, reason: null, reroute: null },
          ] },
        { name: 'Nobody', email: null, phone: null, status: 'finished', finishReason: 'unreachable',
          steps: [{ status: 'skipped', reason: 'no_contact', skippedAt: expect.any(String) }, { status: 'skipped', reason: 'no_contact' }] },
      ],
    });
    const b = got.body as { recipients: Array<{ steps: Array<{ dueAt: string; sentAt: string }> }> };
    // The SMS is due 1440 flow minutes after the email was sent.
    expect(Date.parse(b.recipients[0].steps[1].dueAt) - Date.parse(b.recipients[0].steps[0].sentAt)).toBe(1440 * 40);
  });

  it("another organization's cascade, or an unknown id, is 404", async () => {
    const res = await call('POST', '/cascades', { locationId, recipients: [{ email: 'b@example.com' }] });
    const id = (res.body as { id: string }).id;
    for (const [path, who] of [[`/cascades/${id}`, 'other'], ['/cascades/0190e0e0-0000-7000-8000-000000000000', 'paid'], ['/cascades/nope', 'paid']] as const) {
      const r = await call('GET', path, undefined, who);
      expect(r.status).toBe(404);
      expect((r.body as { code: string }).code).toBe('not_found');
    }
  });

  it.each([
    ['no locationId', { recipients: [{ email: 'x@example.com' }] }, '/locationId'],
    ['no recipients', { locationId: 'l', recipients: [] }, '/recipients'],
    ['501 recipients', { locationId: 'l', recipients: Array.from({ length: 501 }, (_, i) => ({ email: `x${i}@example.com` })) }, '/recipients'],
    ['flowId and channel', { locationId: 'l', flowId: 'f', channel: 'EMAIL', recipients: [{ email: 'x@example.com' }] }, '/channel'],
    ['a bad email', { locationId: 'l', recipients: [{ email: 'nope' }] }, '/recipients/0/email'],
    ['a channel that is not a channel key', { locationId: 'l', channel: 'viber', recipients: [{ phone: '+79161234567' }] }, '/channel'],
  ])('400 invalid_request for %s, nothing created', async (_n, body, pointer) => {
    const before = await cascadeCount();
    const res = await call('POST', '/cascades', body);
    expect(res.status).toBe(400);
    expect((res.body as { code: string }).code).toBe('invalid_request');
    expect(pointers(res.body)).toContain(pointer);
    if (pointer === '/recipients') expect(JSON.stringify(res.body)).toContain('500');
    expect(await cascadeCount()).toBe(before);
  });

  it('a phone the service cannot read is a 400 naming the recipient', async () => {
    const res = await call('POST', '/cascades', { locationId, recipients: [{ phone: '12' }] });
    expect(res.status).toBe(400);
    expect(pointers(res.body)).toEqual(['/recipients/0/phone']);
  });

  it.each([
    ['trial', 402, 'plan_required', {}],
    ['unconfirmed', 409, 'email_not_confirmed', {}],
    ['paid', 404, 'not_found', { locationId: 'unknown' }],
    ['paid', 404, 'not_found', { flowId: '0190e0e0-0000-7000-8000-000000000000' }],
    ['other', 404, 'not_found', {}],
  ] as const)('%s → %d %s, nothing created or sent', async (who, status, code, over) => {
    const before = [await cascadeCount(), sender.received.length];
    const res = await call('POST', '/cascades', { locationId, recipients: [{ email: 'c@example.com' }], ...over }, who);
    expect(res.status).toBe(status);
    expect((res.body as { code: string }).code).toBe(code);
    expect([await cascadeCount(), sender.received.length]).toEqual(before);
  });

  it('409 channel_not_configured for a one-step cascade on an unconfigured channel', async () => {
    const before = await cascadeCount();
    const res = await call('POST', '/cascades', { locationId, channel: 'MAX', recipients: [{ phone: '+79161234567' }] });
    expect(res.status).toBe(409);
    expect((res.body as { code: string }).code).toBe('channel_not_configured');
    expect(await cascadeCount()).toBe(before);
  });

  it('any channel key is taken (the catalog is live): one no sender runs and the organization has not configured is 409 channel_not_configured', async () => {
    const before = await cascadeCount();
    const res = await call('POST', '/cascades', { locationId, channel: 'VIBER', recipients: [{ phone: '+79161234567' }] });
    expect(res.status).toBe(409);
    expect((res.body as { code: string }).code).toBe('channel_not_configured');
    expect(await cascadeCount()).toBe(before);
  });

  it('an Idempotency-Key replay of POST /cascades returns the saved answer and sends nothing new', async () => {
    const body = { locationId, channel: 'EMAIL', recipients: [{ email: 'idem@example.com' }] };
    const first = await call('POST', '/cascades', body, 'paid', { 'idempotency-key': 'crm-evt-1' });
    expect(first.status).toBe(202);
    await waitFor(() => sender.received.some((s) => s.recipient?.email === 'idem@example.com'), { what: 'sent' });
    const count = await cascadeCount();
    const again = await call('POST', '/cascades', body, 'paid', { 'idempotency-key': 'crm-evt-1' });
    expect(again.status).toBe(202);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    const other = await call('POST', '/cascades', { ...body, name: 'x' }, 'paid', { 'idempotency-key': 'crm-evt-1' });
    expect(other.status).toBe(409);
    expect((other.body as { code: string }).code).toBe('idempotency_key_reused');
    await new Promise((r) => setTimeout(r, 200));
    expect(await cascadeCount()).toBe(count);
    expect(sender.received.filter((s) => s.recipient?.email === 'idem@example.com')).toHaveLength(1);
  });

  it('POST /review-requests → 201 {id, token, url, status}; unknown location 404', async () => {
    const res = await call('POST', '/review-requests', { locationId, customerName: 'Anna', contact: '+79161234567' });
    expect(res.status).toBe(201);
    const b = res.body as { token: string };
    expect(res.body).toEqual({ id: expect.any(String), token: expect.stringMatching(/^[0-9A-Za-z]{22}$/), url: `http://reviews.test/r/${b.token}`, status: 'created' });
    const missing = await call('POST', '/review-requests', { locationId: 'nope' });
    expect(missing.status).toBe(404);
    const foreign = await call('POST', '/review-requests', { locationId }, 'other');
    expect(foreign.status).toBe(404);
    const bad = await call('POST', '/review-requests', { customerName: 'x' });
    expect(bad.status).toBe(400);
    expect(pointers(bad.body)).toEqual(['/locationId']);
  });

  it('StartCascade with a contact (POST /contacts with startCascade): one recipient from the saved contact; a retry with the same key saves and starts nothing new', async () => {
    const grpc = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, `127.0.0.1:${stack.scheduler.grpcPort}`);
    try {
      const md = { [MD_IDEMPOTENCY_KEY]: 'crm-contact-9', [MD_IDEMPOTENCY_FINGERPRINT]: 'fp-contact-9' };
      const contact = { organizationId: stack.orgIds.paid, externalId: 'crm-9', name: 'Olga', email: 'olga@example.com', phone: '+79161234567', locationId, consentAt: undefined, attributesJson: undefined, flowId: '' };
      const cascade = { flowId: '', externalId: 'crm-9', ignoreCooldown: false };
      const first = await startContactCascade({ scheduler: grpc.client }, contact, cascade, md);
      expect(first).toMatchObject({ status: 'running', queued: 1, skipped: 0, idempotentReplayed: false, contactReplayed: false, contact: { name: 'Olga', externalId: 'crm-9', locationId } });
      const before = await cascadeCount();
      const again = await startContactCascade({ scheduler: grpc.client }, contact, cascade, md);
      expect(again).toEqual({ ...first, idempotentReplayed: true, contactReplayed: true });
      expect(await cascadeCount()).toBe(before);
      const c = await stack.scheduler.cascades.get(stack.orgIds.paid, first.id);
      expect(c.locationId).toBe(locationId);
      expect(c.recipients[0]).toMatchObject({ name: 'Olga', contactExternalId: 'crm-9' });
      expect(c.externalId).toBe('crm-9');
      const { rows } = await schedulerPool.query('SELECT key FROM idempotency_keys');
      expect(rows.map((r) => r.key)).toContain('crm-contact-9:cascade');
    } finally {
      grpc.close();
    }
  });
});
