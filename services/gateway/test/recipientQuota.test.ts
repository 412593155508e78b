import { PLAN_RECIPIENT_QUOTAS } from '@rrs/proto';
import { inTransaction } from '@rrs/runtime';
import { buildConfig, RecipientBudgets } from '@rrs/cascade-scheduler';
import { openApiChecker, TEST_REDIS_URL, uniqueName, type OpenApiChecker } from '@rrs/testkit';
import { startCascadeStack, type CascadeStack } from './cascadeStack';

/** Small budgets so a test reaches them: standard runs out by the minute, pro by the day. */
const QUOTAS = { trial: { perMinute: 2, perDay: 2 }, standard: { perMinute: 5, perDay: 100 }, pro: { perMinute: 100, perDay: 4 } };

/**
 * Quotas count work: every route that creates recipients takes them from the organization's budgets
 * (per minute and per day, by plan), which the scheduler keeps in PostgreSQL and takes in the start's own
 * transaction, so every gateway replica draws from one budget; over budget it is 429
 * `recipient_quota_exceeded` with RateLimit fields in recipients, and nothing is created.
 */
describe('recipient quotas', () => {
  let stack: CascadeStack;
  let api: OpenApiChecker;
  const prefix = `${uniqueName('gwrq')}:`;
  let otherLocation: string;

  beforeAll(async () => {
    stack = await startCascadeStack({ gateway: { redisUrl: TEST_REDIS_URL, redisKeyPrefix: prefix }, scheduler: { recipientQuotas: QUOTAS }, replicas: 2 });
    api = await openApiChecker(`${stack.base}/api/v1/openapi.json`);
    otherLocation = (await stack.contacts.directory.createLocation({ organizationId: stack.orgIds.other, name: 'Arbat', address: 'Arbat 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [] })).id;
    await stack.scheduler.flows.create({ organizationId: stack.orgIds.other, name: 'Email', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] });
  });
  afterAll(async () => {
    await stack.close();
  });

  const post = (base: string, path: string, key: string, body: unknown, headers: Record<string, string> = {}) =>
    api.fetch(`${base}/api/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const people = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ name: `P${i}`, email: `${tag}-${i}@example.com` }));
  const count = async (table: string, orgId: string) => Number((await stack.pool.query(`SELECT count(*) AS n FROM ${table} WHERE organization_id = $1`, [orgId])).rows[0].n);
  const savedContacts = async (orgId: string, externalId: string) => Number((await stack.pool.query('SELECT count(*) AS n FROM contacts.contacts WHERE organization_id = $1 AND external_id = $2', [orgId, externalId])).rows[0].n);
  const item = (header: string | null, name: string) => new RegExp(`"${name}";([^,]+)`).exec(header ?? '')?.[1];

  it('takes each request’s recipients from the minute budget, on every replica, with RateLimit fields in recipients', async () => {
    const [a, b] = stack.bases;
    const first = await post(a, '/cascades', stack.keys.paid, { locationId: stack.locationId, recipients: people(3, 'm1') });
    expect(first.status).toBe(202);
    expect(first.headers.get('ratelimit-policy')).toBe('"standard";q=600;w=60, "recipients-minute";q=5;w=60, "recipients-day";q=100;w=86400');
    expect(item(first.headers.get('ratelimit'), 'recipients-minute')).toMatch(/^r=2;t=\d+$/);
    expect(item(first.headers.get('ratelimit'), 'recipients-day')).toMatch(/^r=97;t=\d+$/);

    const cascadesBefore = await count('cascades', stack.orgIds.paid);
    const recipientsBefore = await count('recipients', stack.orgIds.paid);
    const over = await post(b, '/cascades', stack.keys.paid, { locationId: stack.locationId, recipients: people(3, 'm2') });
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(over.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    expect(item(over.headers.get('ratelimit'), 'recipients-minute')).toMatch(/^r=2;t=\d+$/);
    expect(over.body).toMatchObject({ status: 429, code: 'recipient_quota_exceeded', quota: 'recipients-minute', limit: 5, remaining: 2, recipients: 3 });
    expect(await count('cascades', stack.orgIds.paid)).toBe(cascadesBefore);
    expect(await count('recipients', stack.orgIds.paid)).toBe(recipientsBefore);

    // Two fit: a channel send takes them, and the minute is spent.
    const send = await post(b, '/channels/email/send', stack.keys.paid, { locationId: stack.locationId, recipients: people(2, 'm3') });
    expect(send.status).toBe(202);
    expect(item(send.headers.get('ratelimit'), 'recipients-minute')).toMatch(/^r=0;t=\d+$/);
  });

  it('refuses every route that creates recipients once the budget is spent, creating nothing', async () => {
    const reviewRequestsBefore = await count('review_requests', stack.orgIds.paid);
    const rr = await post(stack.bases[0], '/review-requests', stack.keys.paid, { locationId: stack.locationId, customerName: 'Anna' });
    expect(rr.status).toBe(429);
    expect(rr.body).toMatchObject({ code: 'recipient_quota_exceeded' });
    expect(await count('review_requests', stack.orgIds.paid)).toBe(reviewRequestsBefore);

    const contact = await post(stack.bases[1], '/contacts', stack.keys.paid, { externalId: 'quota-1', name: 'Boris', email: 'boris@example.com', locationId: stack.locationId, startCascade: true });
    expect(contact.status).toBe(429);
    expect(contact.body).toMatchObject({ code: 'recipient_quota_exceeded' });
    expect(await savedContacts(stack.orgIds.paid, 'quota-1')).toBe(0);
    // A contact without a cascade creates no recipient: it is not counted.
    expect((await post(stack.bases[1], '/contacts', stack.keys.paid, { externalId: 'quota-2', name: 'Vera', email: 'vera@example.com' })).status).toBe(200);
  });

  it('gives the budget back when the request creates nothing (refused downstream, or an idempotent replay), and counts the day', async () => {
    const key = stack.keys.other;
    const unknownLocation = await post(stack.base, '/cascades', key, { locationId: '0190c3c4-0000-7000-8000-000000000000', recipients: people(3, 'd0') });
    expect(unknownLocation.status).toBe(404);
    const once = await post(stack.base, '/cascades', key, { locationId: otherLocation, recipients: people(1, 'd1') }, { 'idempotency-key': 'quota-replay' });
    expect(once.status).toBe(202);
    expect(item(once.headers.get('ratelimit'), 'recipients-day')).toMatch(/^r=3;/);
    const replay = await post(stack.bases[1], '/cascades', key, { locationId: otherLocation, recipients: people(1, 'd1') }, { 'idempotency-key': 'quota-replay' });
    expect(replay.status).toBe(202);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    // 3 of the day's 4 are left: neither the 404 nor the replay kept any.
    const rest = await post(stack.base, '/cascades', key, { locationId: otherLocation, recipients: people(3, 'd2') });
    expect(rest.status).toBe(202);
    const cascadesBefore = await count('cascades', stack.orgIds.other);
    const over = await post(stack.base, '/cascades', key, { locationId: otherLocation, recipients: people(1, 'd3') });
    expect(over.status).toBe(429);
    expect(over.body).toMatchObject({ code: 'recipient_quota_exceeded', quota: 'recipients-day', limit: 4, remaining: 0 });
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(86_000);
    expect(await count('cascades', stack.orgIds.other)).toBe(cascadesBefore);
  });

  it('lets concurrent starts never pass a budget together (the budget rows are taken in each start’s transaction)', async () => {
    const budgets = new RecipientBudgets({ ...QUOTAS, standard: { perMinute: 7, perDay: 100 } });
    const organization = { id: '0190c3c4-0000-7000-8000-00000000abcd', plan: 'standard' };
    const outcomes = await Promise.allSettled(Array.from({ length: 25 }, () => inTransaction(stack.pool, (client) => budgets.take(client, organization, 1))));
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(7);
    expect(outcomes.filter((o) => o.status === 'rejected').map((o) => (o as PromiseRejectedResult).reason.code)).toEqual(Array(18).fill('recipient_quota_exceeded'));
  });

  it('documents 429 recipient_quota_exceeded on every operation that creates recipients', () => {
    const doc = api.doc as unknown as { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: { allOf: Array<{ properties?: { code?: { enum?: string[] } } }> } }> }> }>> };
    for (const [path, method] of [['/cascades', 'post'], ['/review-requests', 'post'], ['/contacts', 'post'], ['/channels/email/send', 'post']]) {
      const codes = doc.paths[path][method].responses['429'].content!['application/problem+json'].schema.allOf[1].properties!.code!.enum;
      expect({ path, codes }).toEqual({ path, codes: expect.arrayContaining(['recipient_quota_exceeded']) });
    }
  });

  it('takes the plans’ numbers from @rrs/proto unless RECIPIENT_QUOTA_<PLAN> overrides one (the scheduler reads them)', () => {
    const env = { DATABASE_URL: 'postgres://localhost/x' };
    expect(buildConfig(env).recipientQuotas).toEqual(PLAN_RECIPIENT_QUOTAS);
    expect(buildConfig({ ...env, RECIPIENT_QUOTA_PRO: '100000/5000000' }).recipientQuotas).toEqual({ ...PLAN_RECIPIENT_QUOTAS, pro: { perMinute: 100_000, perDay: 5_000_000 } });
    expect(() => buildConfig({ ...env, RECIPIENT_QUOTA_STANDARD: '1000' })).toThrow(/^RECIPIENT_QUOTA_STANDARD: /);
  });
});
