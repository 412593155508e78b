import { startScheduler } from '@rrs/cascade-scheduler';
import { startContacts, type RunningContacts } from '@rrs/contacts';
import { SCOPES } from '@rrs/proto';
import { createTestBus, createTestDatabase, openApiChecker, testContext, type OpenApiChecker, type TestDatabase } from '@rrs/testkit';
import { startGateway } from '../src';

/**
 * Idempotency-Key end to end on POST /contacts (HTTP → gateway → gRPC metadata → contacts, which saves
 * the response in the effect's transaction): concurrent duplicates make one effect, the record outlives a
 * restart of both services, and refusals before the effect (403, 402) are never saved.
 */
describe('Idempotency-Key through the gateway', () => {
  let db: TestDatabase;
  let orgId: string;
  let key: string;
  let narrowKey: string;

  interface Stack {
    ctx: ReturnType<typeof testContext>;
    contacts: RunningContacts;
    base: string;
    api: OpenApiChecker;
  }
  let stack: Stack;

  async function startStack(): Promise<Stack> {
    const ctx = testContext('idempotency-test');
    const contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    // The scheduler answers the start's admission (the sending rule included) before contacts saves anything.
    const bus = (await createTestBus('memory')).bus;
    const scheduler = await startScheduler({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}` }, ctx, { bus, noDispatcher: true });
    const gateway = await startGateway({ host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`, publicBaseUrl: 'http://localhost', authCacheTtlMs: 200 }, ctx);
    return { ctx, contacts, base: gateway.url, api: await openApiChecker(`${gateway.url}/api/v1/openapi.json`) };
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    stack = await startStack();
    const org = await stack.contacts.directory.createOrganization({ name: 'Acme', plan: 'standard', emailConfirmed: true, sendWindow: null, cooldownDays: 0 });
    orgId = org.id;
    key = (await stack.contacts.directory.issueApiKey({ organizationId: orgId })).secret;
    narrowKey = (await stack.contacts.directory.issueApiKey({ organizationId: orgId, scopes: SCOPES.filter((s) => s !== 'contacts:write') })).secret;
  });
  afterAll(async () => {
    await stack.ctx.stop();
    await db.drop();
  });

  const post = (body: unknown, idempotencyKey: string, apiKey = key) =>
    stack.api.fetch(`${stack.base}/api/v1/contacts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
      body: JSON.stringify(body),
    });
  const count = () => stack.contacts.contacts.count(orgId);

  it('lets concurrent duplicates make exactly one effect', async () => {
    const before = await count();
    // No externalId: without the key, every one of these calls would create a contact.
    const body = { name: 'Concurrent', email: 'c@example.com' };
    const results = await Promise.all(Array.from({ length: 12 }, () => post(body, 'burst-1')));
    expect(await count()).toBe(before + 1);

    const ok = results.filter((r) => r.status === 200);
    const busy = results.filter((r) => r.status === 409);
    expect(ok.length + busy.length).toBe(results.length);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    for (const r of busy) {
      expect(r.body).toMatchObject({ code: 'idempotency_key_in_use' });
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    const first = ok.find((r) => r.headers.get('idempotent-replayed') === null);
    expect(first).toBeDefined();
    for (const r of ok) expect(r.body).toEqual(first!.body);

    const later = await post(body, 'burst-1');
    expect(later.status).toBe(200);
    expect(later.headers.get('idempotent-replayed')).toBe('true');
    expect(later.body).toEqual(first!.body);
    expect(await count()).toBe(before + 1);
  });

  it('answers from the saved record after both services restart', async () => {
    const body = { name: 'Survivor', email: 's@example.com' };
    const first = await post(body, 'restart-1');
    expect(first.status).toBe(200);
    const before = await count();

    await stack.ctx.stop();
    stack = await startStack();

    const again = await post(body, 'restart-1');
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await count()).toBe(before);
    const reused = await post({ ...body, name: 'Changed' }, 'restart-1');
    expect(reused.status).toBe(409);
    expect(reused.body).toMatchObject({ code: 'idempotency_key_reused' });
    expect(await count()).toBe(before);
  });

  it('never saves a refusal that happens before the effect (403, 402)', async () => {
    const body = { name: 'Later', email: 'l@example.com' };
    const forbidden = await post(body, 'refused-1', narrowKey);
    expect(forbidden.status).toBe(403);
    const before = await count();
    const ok = await post(body, 'refused-1');
    expect(ok.status).toBe(200);
    expect(ok.headers.get('idempotent-replayed')).toBeNull();
    expect(await count()).toBe(before + 1);

    await stack.contacts.directory.updateOrganization(orgId, { plan: 'trial' });
    try {
      const trialBody = { externalId: 'plan-1', name: 'Plan', startCascade: true };
      const payment = await post(trialBody, 'refused-2');
      expect(payment.status).toBe(402);
      expect(payment.body).toMatchObject({ code: 'plan_required' });
      await stack.contacts.directory.updateOrganization(orgId, { plan: 'standard' });
      // The auth cache still knows the trial plan for up to its TTL; the key must not have been saved meanwhile.
      await new Promise((r) => setTimeout(r, 300));
      const retried = await post(trialBody, 'refused-2');
      expect(retried.body).not.toMatchObject({ code: 'plan_required' });
      expect(retried.headers.get('idempotent-replayed')).toBeNull();
    } finally {
      await stack.contacts.directory.updateOrganization(orgId, { plan: 'standard' });
    }
  });
});
