import { grpcOrganizationProfiles, startScheduler } from '@rrs/cascade-scheduler';
import { startContacts } from '@rrs/contacts';
import { connectorsV1, contactsV1, schedulerV1, webhooksV1 } from '@rrs/proto';
import { createGrpcClient } from '@rrs/runtime';
import { createTestBus, createTestDatabase, testContext, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startGateway } from '../src';
import type { GatewayClients } from '../src/clients';

/**
 * How many gRPC calls a request makes (issue 28, "fewer calls"): every client the gateway uses and the
 * scheduler's client of contacts count their calls (a wrapper around the real clients, so the calls still
 * go over gRPC). The API key's lookup (Authenticate, cached by the gateway) is not counted: what is
 * counted is the request's own work. POST /contacts with `startCascade`: StartCascade with the contact from
 * the gateway, and the scheduler's two calls to contacts (the sending profile, UpsertContact): 3 in all
 * (there were 5: the gateway's dry run, UpsertContact and StartCascade, each start asking contacts for the
 * profile). POST /cascades: StartCascade, and the scheduler's one question to contacts (at most 2).
 */
describe('gRPC calls per request', () => {
  let db: TestDatabase;
  let tb: TestBus;
  const ctx = testContext('grpc-calls');
  const log: string[] = [];
  let base: string;
  let key: string;
  let locationId: string;

  /** The real client, each call logged as `<service>.<method>` before it goes out. */
  const counted = <C extends object>(service: string, client: C): C =>
    new Proxy(client, {
      get(target, method: string) {
        const real = (target as Record<string, unknown>)[method];
        if (typeof real !== 'function') return real;
        return (...args: unknown[]) => {
          // The API key's lookup (Authenticate, normally cached) is the key's cost, not the request's.
          if (method !== 'authenticate') log.push(`${service}.${method}`);
          return (real as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    const contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    const contactsAddress = `127.0.0.1:${contacts.grpcPort}`;
    const schedulersContacts = createGrpcClient(contactsV1.ContactsServiceClient, contactsAddress);
    ctx.lifecycle.onStop('scheduler contacts client', () => schedulersContacts.close());
    const scheduler = await startScheduler(
      { databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress },
      ctx,
      { bus: tb.bus, noDispatcher: true, profiles: grpcOrganizationProfiles(counted('scheduler→contacts', schedulersContacts.client)) },
    );
    const handles = {
      contacts: createGrpcClient(contactsV1.ContactsServiceClient, contactsAddress),
      scheduler: createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, `127.0.0.1:${scheduler.grpcPort}`),
      webhooks: createGrpcClient(webhooksV1.WebhooksServiceClient, '127.0.0.1:1'),
      connectors: createGrpcClient(connectorsV1.ConnectorsServiceClient, '127.0.0.1:1'),
    };
    ctx.lifecycle.onStop('gateway clients', () => Object.values(handles).forEach((h) => h.close()));
    const clients: GatewayClients = {
      contacts: counted('gateway→contacts', handles.contacts.client),
      scheduler: counted('gateway→scheduler', handles.scheduler.client),
      webhooks: handles.webhooks.client,
      connectors: handles.connectors.client,
    };
    const gateway = await startGateway({ host: '127.0.0.1', port: 0, contactsAddress, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`, publicBaseUrl: 'http://localhost', authCacheTtlMs: 5_000 }, ctx, { clients });
    base = gateway.url;
    const org = await contacts.directory.createOrganization({ name: 'Counted', plan: 'standard', emailConfirmed: true, defaultRegion: 'RU', sendWindow: null, cooldownDays: 0 });
    key = (await contacts.directory.issueApiKey({ organizationId: org.id })).secret;
    await contacts.channels.set({ organizationId: org.id, channel: 'EMAIL', configured: true });
    locationId = (await contacts.directory.createLocation({ organizationId: org.id, name: 'L', address: '', city: '' })).id;
    await scheduler.flows.create({ organizationId: org.id, name: 'Email', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] });
  });
  afterAll(async () => {
    await ctx.stop();
    await tb.cleanup();
    await db.drop();
  });

  const post = async (path: string, body: unknown) => {
    log.length = 0;
    const res = await fetch(`${base}/api/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, calls: [...log] };
  };

  it('POST /contacts with startCascade: 3 calls in all (StartCascade; the scheduler’s profile read and UpsertContact)', async () => {
    const r = await post('/contacts', { externalId: 'n-1', name: 'Nina', email: 'nina@example.com', locationId, startCascade: true });
    expect(r.status).toBe(200);
    expect(r.calls).toEqual(['gateway→scheduler.startCascade', 'scheduler→contacts.getSendingProfile', 'scheduler→contacts.upsertContact']);
  });

  it('POST /contacts without startCascade: 1 call (UpsertContact)', async () => {
    const r = await post('/contacts', { externalId: 'n-2', name: 'Nils' });
    expect(r.status).toBe(200);
    expect(r.calls).toEqual(['gateway→contacts.upsertContact']);
  });

  it('POST /cascades: at most 2 calls in all (StartCascade, and the scheduler’s one question to contacts)', async () => {
    const r = await post('/cascades', { locationId, recipients: [{ name: 'Oleg', email: 'oleg@example.com' }] });
    expect(r.status).toBe(202);
    expect(r.calls).toEqual(['gateway→scheduler.startCascade', 'scheduler→contacts.getSendingProfile']);
  });
});
