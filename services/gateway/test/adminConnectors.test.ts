import { FakeAmoCrm, FakeBitrix24, openApiChecker, testContext, waitFor, type OpenApiChecker } from '@rrs/testkit';
import { startConnectorStack, type ConnectorStack } from '../../connectors/test/support/stack';
import { startGateway } from '../src';

const TOKEN = 'adm_test_token_0123456789';
const UNKNOWN = '0190c3c4-0000-7000-8000-000000000000';

interface ConnectorJson {
  id: string;
  status: Record<string, unknown>;
  [field: string]: unknown;
}

/**
 * The admin API's CRM connectors over real HTTP → gateway → gRPC → connectors (with contacts and the
 * cascade scheduler) → PostgreSQL and NATS, against a local fake of amoCRM's API.
 */
describe('admin API: /organizations/{id}/connectors', () => {
  let stack: ConnectorStack;
  let amo: FakeAmoCrm;
  let b24: FakeBitrix24;
  let amoToken: string;
  let base: string;
  let api: OpenApiChecker;
  const ctx = testContext('gateway-admin-connectors');

  beforeAll(async () => {
    stack = await startConnectorStack();
    [amo, b24] = await Promise.all([FakeAmoCrm.start(), FakeBitrix24.start()]);
    amoToken = amo.issueLongLivedToken();
    const gateway = await startGateway({
      host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${stack.contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${stack.scheduler.grpcPort}`,
      connectorsAddress: `127.0.0.1:${stack.running.grpcPort}`, publicBaseUrl: 'http://localhost', adminTokens: [TOKEN],
    }, ctx);
    ctx.health.setReady(true);
    base = gateway.url;
    api = await openApiChecker(`${base}/admin/v1/openapi.json`);
  });
  afterAll(async () => {
    await ctx.stop();
    await stack?.close();
    await Promise.all([amo?.close(), b24?.close()]);
  });

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await api.fetch(`${base}/admin/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    // Credentials are write-only: no answer of any operation carries one.
    for (const credential of [amoToken, b24.applicationToken]) expect(JSON.stringify(res.body ?? null)).not.toContain(credential);
    return res;
  };
  const connectorsPath = (organizationId = stack.organizationId) => `/organizations/${organizationId}/connectors`;
  const amoBody = (over: Record<string, unknown> = {}) => ({ kind: 'amocrm', name: 'Sales', amocrm: { baseUrl: amo.url, longLivedToken: amoToken }, locationId: stack.locationId, ...over });
  const create = async (over: Record<string, unknown> = {}, organizationId = stack.organizationId) => {
    const res = await call('POST', connectorsPath(organizationId), amoBody(over));
    if (res.status !== 201) throw new Error(`create answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body as { connector: ConnectorJson; inboundUrl: string };
  };
  const stored = async () => (await stack.pool.query<{ id: string; name: string }>('SELECT id, name FROM connectors ORDER BY id')).rows;
  const pointers = (body: unknown) => ((body as { errors?: Array<{ pointer?: string }> }).errors ?? []).map((e) => e.pointer);
  const statusOf = async (id: string) => (await call('GET', `${connectorsPath()}/${id}/status`)).body as { status: Record<string, unknown> };

  it('creates an amoCRM connector: 201 with the inbound URL and its secret, the credentials stored sealed and never shown', async () => {
    const res = await call('POST', connectorsPath(), amoBody({ writeBack: { ratingField: '777001' } }));
    expect(res.status).toBe(201);
    const { connector, inboundUrl } = res.body as { connector: ConnectorJson; inboundUrl: string };
    expect(inboundUrl).toMatch(new RegExp(`^http://hooks\\.test/hooks/crm/${connector.id}/[A-Za-z0-9_-]{43}$`));
    expect(connector).toEqual({
      id: expect.any(String), kind: 'amocrm', name: 'Sales', enabled: true, crmUrl: amo.url, authMode: 'long_lived', wonStages: [],
      locationId: stack.locationId, locationMapping: null, flowId: null, writeBack: { note: true, ratingField: '777001', feedbackField: null, reasonField: null },
      status: expect.objectContaining({ lastError: null, lastErrorCode: null, pendingEvents: 0, cascadesStarted: 0 }),
      activeSince: expect.any(String), createdAt: expect.any(String), updatedAt: expect.any(String),
    });
    expect(JSON.stringify(res.body)).not.toContain(amoToken);
    const { rows } = await stack.pool.query<{ credentials: string }>('SELECT credentials FROM connectors WHERE id = $1', [connector.id]);
    expect(rows[0].credentials).not.toContain(amoToken);

    // The URL is the one the CRM calls: a won lead posted to it becomes a cascade, visible in the status.
    // (After the connector's first reconciliation, run at creation, which could find the lead as well.)
    await waitFor(async () => (await statusOf(connector.id)).status.lastSyncAt !== null, { what: 'the first reconciliation' });
    const contact = amo.addContact({ name: 'Anna', email: 'anna@example.com' });
    const lead = amo.addLead({ contactId: contact.id });
    expect((await stack.hook(inboundUrl, amo.moveLead(lead.id, 142))).status).toBe(200);
    await stack.settled(connector.id);
    expect((await statusOf(connector.id)).status).toMatchObject({ cascadesStarted: 1, pendingEvents: 0, failedEvents: 0, lastEventAt: expect.any(String) });

    const secret = inboundUrl.split('/').pop()!;
    for (const path of [connectorsPath(), `${connectorsPath()}/${connector.id}`, `${connectorsPath()}/${connector.id}/status`]) {
      const read = await call('GET', path);
      expect(read.status).toBe(200);
      expect(JSON.stringify(read.body)).not.toContain(secret);
    }
  });

  it('creates a Bitrix24 connector without its application token, which an update adds', async () => {
    const { connector } = await create({ kind: 'bitrix24', amocrm: undefined, bitrix24: { webhookUrl: b24.webhookUrl }, locationId: undefined, locationMapping: { field: 'CATEGORY_ID', values: { '0': stack.locationId, '1': stack.otherLocationId } } });
    expect(connector).toMatchObject({ kind: 'bitrix24', authMode: 'webhook', locationId: null, locationMapping: { field: 'CATEGORY_ID', values: { '0': stack.locationId, '1': stack.otherLocationId } } });
    const res = await call('PATCH', `${connectorsPath()}/${connector.id}`, { bitrix24: { webhookUrl: b24.webhookUrl, applicationToken: b24.applicationToken } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ connector: { id: connector.id, kind: 'bitrix24' }, inboundUrl: null });
  });

  it('lists, reads, updates and deletes', async () => {
    const { connector, inboundUrl } = await create({ name: 'Listed' });
    const listed = (await call('GET', connectorsPath())).body as { connectors: ConnectorJson[] };
    expect(listed.connectors.map((c) => c.id)).toContain(connector.id);
    // The status moves on its own (the first reconciliation runs as soon as the connector exists).
    expect((await call('GET', `${connectorsPath()}/${connector.id}`)).body).toEqual({ connector: { ...connector, status: expect.any(Object) } });

    const patched = await call('PATCH', `${connectorsPath()}/${connector.id}`, {
      name: 'Renamed', enabled: false, wonStages: [{ stageId: '142' }], flowId: stack.flowId, writeBack: { note: false, feedbackField: '777002' },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({
      connector: { ...connector, name: 'Renamed', enabled: false, wonStages: [{ pipelineId: '', stageId: '142' }], flowId: stack.flowId, writeBack: { note: false, ratingField: null, feedbackField: '777002', reasonField: null }, status: expect.any(Object), updatedAt: expect.any(String) },
      inboundUrl: null,
    });
    // null takes a setting back to its default; the CRM stays on the same credentials.
    expect(((await call('PATCH', `${connectorsPath()}/${connector.id}`, { flowId: null, enabled: true })).body as { connector: ConnectorJson }).connector).toMatchObject({ flowId: null, enabled: true, authMode: 'long_lived' });

    const rotated = await call('PATCH', `${connectorsPath()}/${connector.id}`, { rotateInboundSecret: true });
    const newUrl = (rotated.body as { inboundUrl: string }).inboundUrl;
    expect(newUrl).toMatch(new RegExp(`^http://hooks\\.test/hooks/crm/${connector.id}/[A-Za-z0-9_-]{43}$`));
    expect(newUrl).not.toBe(inboundUrl);
    const lead = amo.addLead({ contactId: amo.addContact({ name: 'Ivan', email: 'ivan@example.com' }).id });
    expect((await stack.hook(inboundUrl, amo.statusWebhookBody(lead, { status: 100, pipeline: lead.pipeline_id }))).status).toBe(404);
    expect((await stack.hook(newUrl, amo.statusWebhookBody(lead, { status: 100, pipeline: lead.pipeline_id }))).status).toBe(200);

    const deleted = await call('DELETE', `${connectorsPath()}/${connector.id}`);
    expect(deleted.status).toBe(204);
    expect((await call('GET', `${connectorsPath()}/${connector.id}`)).body).toMatchObject({ status: 404, code: 'not_found' });
    expect((await call('DELETE', `${connectorsPath()}/${connector.id}`)).status).toBe(404);
    expect((await stored()).map((c) => c.id)).not.toContain(connector.id);
    expect((await stack.hook(newUrl, amo.statusWebhookBody(lead, { status: 100, pipeline: lead.pipeline_id }))).status).toBe(404);
  });

  it('reconciles on demand: a won lead whose webhook never came becomes a cascade after POST …/sync', async () => {
    // An account of its own: the leads other tests won a moment ago would be found as well.
    const account = await FakeAmoCrm.start();
    try {
      const { connector } = await create({ name: 'Reconciled', amocrm: { baseUrl: account.url, longLivedToken: account.issueLongLivedToken() } });
      await waitFor(async () => (await statusOf(connector.id)).status.lastSyncAt !== null, { what: 'the first reconciliation', timeoutMs: 30_000 });
      const lead = account.addLead({ contactId: account.addContact({ name: 'Olga', email: 'olga@example.com' }).id });
      account.moveLead(lead.id, 142); // the webhook is lost: only the reconciliation can find the lead

      const res = await call('POST', `${connectorsPath()}/${connector.id}/sync`);
      expect(res.status).toBe(202);
      expect(Date.parse((res.body as { nextSyncAt: string }).nextSyncAt)).toBeLessThanOrEqual(Date.now() + 1000);
      await waitFor(async () => (await statusOf(connector.id)).status.cascadesStarted === 1, { what: 'the lost lead to start a cascade', timeoutMs: 20_000 });
      expect((await statusOf(connector.id)).status).toMatchObject({ lastSyncAt: expect.any(String), lastError: null });
    } finally {
      await account.close();
    }
  });

  it('shows the last error in the status: a refused token makes the sync fail with crm_unauthorized', async () => {
    const { connector } = await create({ name: 'Bad token', amocrm: { baseUrl: amo.url, longLivedToken: 'not-a-token-amocrm-knows' } });
    expect((await call('POST', `${connectorsPath()}/${connector.id}/sync`)).status).toBe(202);
    await waitFor(async () => (await statusOf(connector.id)).status.lastErrorCode === 'crm_unauthorized', { what: 'the refused sync in the status', timeoutMs: 20_000 });
    expect((await statusOf(connector.id)).status).toMatchObject({ lastError: expect.stringMatching(/^reconciliation: /), lastErrorAt: expect.any(String) });
    expect(((await call('GET', `${connectorsPath()}/${connector.id}`)).body as { connector: ConnectorJson }).connector.status).toMatchObject({ lastErrorCode: 'crm_unauthorized' });
  });

  it.each<[string, () => Record<string, unknown>, string[]]>([
    ['an unknown kind (schema)', () => amoBody({ kind: 'hubspot' }), ['/kind']],
    ['an unknown field (schema)', () => amoBody({ secretSauce: true }), ['/secretSauce']],
    ['no credentials (service)', () => amoBody({ amocrm: undefined }), ['/amocrm']],
    ['credentials of the other CRM (service)', () => amoBody({ bitrix24: { webhookUrl: b24.webhookUrl } }), ['/bitrix24']],
    ['an address that is not an amoCRM account (service)', () => amoBody({ amocrm: { baseUrl: 'https://evil.example.com', longLivedToken: amoToken } }), ['/amocrm/baseUrl']],
    ['neither a location nor a mapping (service)', () => amoBody({ locationId: undefined }), ['/locationId']],
    ['a won stage that is not an amoCRM status (service)', () => amoBody({ wonStages: [{ stageId: 'WON' }] }), ['/wonStages/0/stageId']],
  ])('refuses %s with 400 invalid_request naming the field, and creates nothing', async (_label, body, expected) => {
    const before = await stored();
    const res = await call('POST', connectorsPath(), body());
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(pointers(res.body)).toEqual(expected);
    expect(await stored()).toEqual(before);
  });

  it('answers 404 for a location of another organization, and creates nothing', async () => {
    const other = await stack.contacts.directory.createLocation({ organizationId: stack.otherOrganizationId, name: 'Theirs', address: '', city: '', timeZone: '', reviewLinks: [] });
    const before = await stored();
    const res = await call('POST', connectorsPath(), amoBody({ locationId: other.id }));
    expect(res.status).toBe(404);
    expect(pointers(res.body)).toEqual(['/locationId']);
    expect(await stored()).toEqual(before);
  });

  it("answers 404 for another organization's connector on every operation, and changes nothing", async () => {
    const { connector } = await create({ name: 'Mine' });
    const theirs = connectorsPath(stack.otherOrganizationId);
    for (const [method, path, body] of [
      ['GET', `${theirs}/${connector.id}`],
      ['PATCH', `${theirs}/${connector.id}`, { name: 'Stolen' }],
      ['DELETE', `${theirs}/${connector.id}`],
      ['GET', `${theirs}/${connector.id}/status`],
      ['POST', `${theirs}/${connector.id}/sync`],
    ] as Array<[string, string, unknown?]>) {
      const res = await call(method, path, body);
      expect({ method, path, status: res.status, code: (res.body as { code?: string }).code }).toEqual({ method, path, status: 404, code: 'not_found' });
    }
    expect(((await call('GET', theirs)).body as { connectors: ConnectorJson[] }).connectors).toEqual([]);
    expect((await stored()).find((c) => c.id === connector.id)).toEqual({ id: connector.id, name: 'Mine' });
  });

  it('answers 404 for an unknown organization, and creates nothing', async () => {
    const before = await stored();
    expect((await call('POST', connectorsPath(UNKNOWN), amoBody())).body).toMatchObject({ status: 404, code: 'not_found' });
    expect((await call('GET', connectorsPath(UNKNOWN))).body).toMatchObject({ status: 404, code: 'not_found' });
    expect((await call('GET', `${connectorsPath(UNKNOWN)}/${UNKNOWN}/status`)).status).toBe(404);
    expect(await stored()).toEqual(before);
  });

  it('documents every connector operation in the admin OpenAPI document', async () => {
    const doc = (await (await fetch(`${base}/admin/v1/openapi.json`)).json()) as { paths: Record<string, Record<string, { operationId: string }>> };
    const operations = Object.entries(doc.paths).filter(([path]) => path.includes('/connectors')).flatMap(([, ops]) => Object.values(ops).map((o) => o.operationId));
    expect(operations.sort()).toEqual(['createConnector', 'deleteConnector', 'getConnector', 'getConnectorStatus', 'listConnectors', 'syncConnector', 'updateConnector']);
  });
});
