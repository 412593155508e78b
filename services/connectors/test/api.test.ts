import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { MD_IDEMPOTENCY_FINGERPRINT, MD_IDEMPOTENCY_KEY } from '@rrs/idempotency';
import type { connectorsV1 } from '@rrs/proto';
import { ConfigError, DomainError, generateSecretKey, SecretBox, secretKeyId } from '@rrs/runtime';
import { FakeAmoCrm, FakeBitrix24, testLogger, waitFor } from '@rrs/testkit';
import { buildConfig, Connectors } from '../src';
import { grpcReviewServices } from '../src/reviewServices';
import { startConnectorStack, type ConnectorStack } from './support/stack';

/** The management contract (ConnectorsService over gRPC): create, read, change, delete, status, sync. */
describe('ConnectorsService', () => {
  let stack: ConnectorStack;
  let amo: FakeAmoCrm;
  let b24: FakeBitrix24;
  let token: string;

  beforeAll(async () => {
    stack = await startConnectorStack();
    [amo, b24] = await Promise.all([FakeAmoCrm.start(), FakeBitrix24.start()]);
    token = amo.issueLongLivedToken();
  });
  afterAll(async () => {
    await stack?.close();
    await Promise.all([amo?.close(), b24?.close()]);
  });

  const amoCredentials = (over: Partial<connectorsV1.AmoCrmCredentials> = {}): connectorsV1.AmoCrmCredentials => ({
    baseUrl: amo.url, longLivedToken: token, clientId: '', clientSecret: '', redirectUri: '', accessToken: '', refreshToken: '', ...over,
  });
  const request = (over: Partial<connectorsV1.CreateConnectorRequest> = {}): connectorsV1.CreateConnectorRequest => ({
    organizationId: stack.organizationId, kind: 'amocrm', name: 'Sales', amocrm: amoCredentials(), bitrix24: undefined, wonStages: [],
    locationId: stack.locationId, locationMapping: undefined, flowId: '', writeBack: undefined, ...over,
  });
  const count = async () => (await stack.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM connectors')).rows[0].n;
  const refusal = async (call: Promise<unknown>) => {
    try {
      await call;
    } catch (err) {
      const e = err as DomainError;
      return { kind: e.kind, code: e.code, pointers: ((e.details?.errors ?? []) as Array<{ pointer: string }>).map((x) => x.pointer) };
    }
    throw new Error('the call succeeded');
  };

  it('creates a connector: the inbound URL carries an unguessable secret, the credentials are stored sealed and never shown', async () => {
    const r = await stack.grpc.createConnector(request({ writeBack: { note: true, ratingField: '777001', feedbackField: '', reasonField: '' } }));
    const c = r.connector!;
    expect(r.inboundUrl).toMatch(new RegExp(`^http://hooks\\.test/hooks/crm/${c.id}/[A-Za-z0-9_-]{43}$`));
    expect(c).toMatchObject({
      organizationId: stack.organizationId, kind: 'amocrm', name: 'Sales', enabled: true, crmUrl: amo.url, authMode: 'long_lived', wonStages: [],
      locationId: stack.locationId, flowId: '', writeBack: { note: true, ratingField: '777001', feedbackField: '', reasonField: '' },
      status: { lastError: '', pendingEvents: 0, cascadesStarted: 0 },
    });
    expect(c.activeSince).toBeInstanceOf(Date);
    expect(JSON.stringify(r)).not.toContain(token);
    const { rows } = await stack.pool.query('SELECT credentials, inbound_secret_hash FROM connectors WHERE id = $1', [c.id]);
    expect(rows[0].credentials).toMatch(/^sb1\./);
    expect(rows[0].credentials).not.toContain(token);
    expect(rows[0].inbound_secret_hash.toString('utf8')).not.toContain(r.inboundUrl.split('/').pop());
    const got = await stack.grpc.getConnector({ organizationId: stack.organizationId, id: c.id });
    expect(JSON.stringify(got)).not.toContain(token);
    expect(JSON.stringify(got)).not.toContain(r.inboundUrl.split('/').pop());
  });

  it('an Idempotency-Key repeat replays the answer (with the same inbound URL) and creates nothing more', async () => {
    const md = { [MD_IDEMPOTENCY_KEY]: `create-${Date.now()}`, [MD_IDEMPOTENCY_FINGERPRINT]: 'fp-1' };
    const before = await count();
    const first = await stack.grpc.createConnector(request({ name: 'Once' }), { metadata: md });
    const again = await stack.grpc.createConnector(request({ name: 'Once' }), { metadata: md });
    expect(first.idempotentReplayed).toBe(false);
    expect(again).toEqual({ ...first, idempotentReplayed: true });
    expect(await count()).toBe(before + 1);
  });

  it.each<[string, () => Partial<connectorsV1.CreateConnectorRequest>, string]>([
    ['an unknown kind', () => ({ kind: 'hubspot' }), '/kind'],
    ['no credentials', () => ({ amocrm: undefined }), '/amocrm'],
    ['credentials of the other CRM', () => ({ bitrix24: { webhookUrl: 'https://p.bitrix24.ru/rest/1/abc/', applicationToken: 'a'.repeat(32) } }), '/bitrix24'],
    ['an amoCRM address that is not an account', () => ({ amocrm: { ...amoCredentials(), baseUrl: 'https://evil.example.com' } }), '/amocrm/baseUrl'],
    ['plain http off loopback', () => ({ amocrm: { ...amoCredentials(), baseUrl: 'http://shop.amocrm.ru' } }), '/amocrm/baseUrl'],
    ['a long-lived token and OAuth together', () => ({ amocrm: { ...amoCredentials(), clientId: 'x' } }), '/amocrm/longLivedToken'],
    ['OAuth without a refresh token', () => ({ amocrm: { ...amoCredentials(), longLivedToken: '', clientId: 'c', clientSecret: 's', redirectUri: 'https://r.example/cb', accessToken: 'a' } }), '/amocrm/refreshToken'],
    ['a status id that is not a number', () => ({ wonStages: [{ pipelineId: '', stageId: 'WON' }] }), '/wonStages/0/stageId'],
    ['neither a location nor a mapping', () => ({ locationId: '' }), '/locationId'],
    ['a write-back field that is not a custom field id', () => ({ writeBack: { note: true, ratingField: 'rating', feedbackField: '', reasonField: '' } }), '/writeBack/ratingField'],
    ['a Bitrix24 URL that is not an inbound webhook', () => ({ kind: 'bitrix24', amocrm: undefined, bitrix24: { webhookUrl: 'https://p.bitrix24.ru/rest/1/', applicationToken: 'a'.repeat(32) } }), '/bitrix24/webhookUrl'],
    ['a Bitrix24 application token that is not one', () => ({ kind: 'bitrix24', amocrm: undefined, bitrix24: { webhookUrl: 'https://p.bitrix24.ru/rest/1/abc/', applicationToken: 'short' } }), '/bitrix24/applicationToken'],
    ['a Bitrix24 write-back to a system field', () => ({ kind: 'bitrix24', amocrm: undefined, bitrix24: { webhookUrl: 'https://p.bitrix24.ru/rest/1/abc/', applicationToken: 'a'.repeat(32) }, writeBack: { note: true, ratingField: 'STAGE_ID', feedbackField: '', reasonField: '' } }), '/writeBack/ratingField'],
  ])('refuses %s (400 naming the field) and creates nothing', async (_what, over, pointer) => {
    const before = await count();
    expect(await refusal(stack.grpc.createConnector(request(over())))).toEqual({ kind: 'invalid', code: 'invalid_request', pointers: expect.arrayContaining([pointer]) });
    expect(await count()).toBe(before);
  });

  it('refuses a location or flow of no one or of another organization (404 naming the field)', async () => {
    const before = await count();
    expect(await refusal(stack.grpc.createConnector(request({ locationId: '0190e0e0-0000-7000-8000-00000000dead' })))).toEqual({ kind: 'not_found', code: 'not_found', pointers: ['/locationId'] });
    expect(await refusal(stack.grpc.createConnector(request({ locationId: '', locationMapping: { field: 'pipeline_id', values: { '1': 'nope' } } })))).toMatchObject({ kind: 'not_found', pointers: ['/locationMapping/values/1'] });
    expect(await refusal(stack.grpc.createConnector(request({ flowId: '0190e0e0-0000-7000-8000-00000000beef' })))).toEqual({ kind: 'not_found', code: 'not_found', pointers: ['/flowId'] });
    expect(await refusal(stack.grpc.createConnector(request({ organizationId: stack.otherOrganizationId })))).toMatchObject({ kind: 'not_found', pointers: ['/locationId'] });
    expect(await count()).toBe(before);
  });

  it('scopes every call to the organization: another one sees not_found and an empty list', async () => {
    const { connector } = await stack.grpc.createConnector(request({ name: 'Mine' }));
    const other = { organizationId: stack.otherOrganizationId, id: connector!.id };
    for (const call of [stack.grpc.getConnector(other), stack.grpc.getConnectorStatus(other), stack.grpc.runSync(other), stack.grpc.deleteConnector(other), stack.grpc.updateConnector({ ...other, name: 'x', amocrm: undefined, bitrix24: undefined, wonStages: undefined, locationMapping: undefined, writeBack: undefined, rotateInboundSecret: false })]) {
      expect(await refusal(call)).toMatchObject({ kind: 'not_found', code: 'not_found' });
    }
    expect((await stack.grpc.listConnectors({ organizationId: stack.otherOrganizationId })).connectors).toEqual([]);
    expect((await stack.grpc.listConnectors({ organizationId: stack.organizationId })).connectors.map((c) => c.id)).toContain(connector!.id);
    expect(await refusal(stack.grpc.getConnector({ organizationId: stack.organizationId, id: 'not-a-uuid' }))).toMatchObject({ kind: 'not_found' });
  });

  it('updates: settings, a new inbound secret (the old URL stops at once), disable (events are not kept) and delete', async () => {
    const created = await stack.grpc.createConnector({ ...request({ name: 'Portal' }), kind: 'bitrix24', amocrm: undefined, bitrix24: { webhookUrl: b24.webhookUrl, applicationToken: b24.applicationToken } });
    const id = created.connector!.id;
    const base = { organizationId: stack.organizationId, id, amocrm: undefined, bitrix24: undefined, wonStages: undefined, locationMapping: undefined, writeBack: undefined, rotateInboundSecret: false };
    const renamed = await stack.grpc.updateConnector({ ...base, name: 'Portal 2', wonStages: { stages: [{ pipelineId: '', stageId: 'WON' }] }, writeBack: { note: false, ratingField: 'UF_CRM_RATING', feedbackField: '', reasonField: '' } });
    expect(renamed).toMatchObject({ inboundUrl: '', connector: { name: 'Portal 2', wonStages: [{ pipelineId: '', stageId: 'WON' }], writeBack: { note: false, ratingField: 'UF_CRM_RATING' } } });
    expect(await refusal(stack.grpc.updateConnector({ ...base, locationId: '', locationMapping: { field: '', values: {} } }))).toMatchObject({ kind: 'invalid', pointers: ['/locationId'] });

    const rotated = await stack.grpc.updateConnector({ ...base, rotateInboundSecret: true });
    expect(rotated.inboundUrl).toMatch(/^http:\/\/hooks\.test\/hooks\/crm\//);
    expect(rotated.inboundUrl).not.toBe(created.inboundUrl);
    const deal = b24.addDeal({});
    const body = b24.eventBody('ONCRMDEALUPDATE', deal.ID);
    expect((await stack.hook(created.inboundUrl, body)).status).toBe(404);
    expect(await stack.hook(rotated.inboundUrl, body)).toEqual({ status: 200, body: { accepted: 1 } });

    await stack.grpc.updateConnector({ ...base, enabled: false });
    const events = async () => (await stack.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM crm_events WHERE connector_id = $1', [id])).rows[0].n;
    const stored = await events();
    expect(await stack.hook(rotated.inboundUrl, body)).toEqual({ status: 200, body: { accepted: 0, ignored: 'connector_disabled' } });
    expect(await events()).toBe(stored);
    const enabled = await stack.grpc.updateConnector({ ...base, enabled: true });
    expect(enabled.connector!.status!.nextSyncAt!.getTime()).toBeLessThanOrEqual(Date.now() + 60_000);

    await stack.grpc.deleteConnector({ organizationId: stack.organizationId, id });
    expect(await refusal(stack.grpc.getConnector({ organizationId: stack.organizationId, id }))).toMatchObject({ kind: 'not_found' });
    expect((await stack.hook(rotated.inboundUrl, body)).status).toBe(404);
    expect(await events()).toBe(0);
  });

  it('a Bitrix24 connector made before its outbound webhook refuses events until the token is set', async () => {
    const created = await stack.grpc.createConnector({ ...request({ name: 'Later token' }), kind: 'bitrix24', amocrm: undefined, bitrix24: { webhookUrl: b24.webhookUrl, applicationToken: '' } });
    const id = created.connector!.id;
    const body = b24.eventBody('ONCRMDEALUPDATE', b24.addDeal({}).ID);
    expect(await stack.hook(created.inboundUrl, body)).toMatchObject({ status: 401, body: { code: 'invalid_application_token' } });
    expect(await stack.hook(created.inboundUrl, b24.eventBody('ONCRMDEALUPDATE', '1', ''))).toMatchObject({ status: 401, body: { code: 'invalid_application_token' } });
    const { status } = await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id });
    expect(status).toMatchObject({ lastErrorCode: 'application_token_missing', pendingEvents: 0 });
    await stack.grpc.updateConnector({
      organizationId: stack.organizationId, id, amocrm: undefined, bitrix24: { webhookUrl: b24.webhookUrl, applicationToken: b24.applicationToken },
      wonStages: undefined, locationMapping: undefined, writeBack: undefined, rotateInboundSecret: false,
    });
    expect(await stack.hook(created.inboundUrl, body)).toEqual({ status: 200, body: { accepted: 1 } });
  });

  it('the inbound endpoint answers only POSTs of forms or JSON, within its size', async () => {
    const { inboundUrl } = await stack.grpc.createConnector(request({ name: 'Hooks' }));
    const local = inboundUrl.replace('http://hooks.test', `http://127.0.0.1:${stack.running.hooksPort}`);
    expect((await fetch(local)).status).toBe(405);
    expect(await stack.hook(inboundUrl, '<xml/>', 'text/xml')).toMatchObject({ status: 415, body: { code: 'unsupported_media_type' } });
    expect(await stack.hook(inboundUrl, '{', 'application/json')).toMatchObject({ status: 400, body: { code: 'invalid_event' } });
    expect(await stack.hook(inboundUrl, 'leads[status][0][id]=abc')).toMatchObject({ status: 400, body: { code: 'invalid_event' } });
    expect(await stack.hook(inboundUrl, `x=${'a'.repeat(70_000)}`)).toMatchObject({ status: 413, body: { code: 'payload_too_large' } });
    expect(await stack.hook(inboundUrl, JSON.stringify({ leads: { status: [{ id: '5', status_id: '100', pipeline_id: '1' }] } }), 'application/json')).toEqual({ status: 200, body: { accepted: 1 } });
    // The same endpoint mounted on another process's server (as the all-in-one does).
    const mounted = http.createServer(stack.running.hooksListener);
    await new Promise<void>((resolve) => mounted.listen(0, '127.0.0.1', () => resolve()));
    try {
      const res = await fetch(inboundUrl.replace('http://hooks.test', `http://127.0.0.1:${(mounted.address() as AddressInfo).port}`), {
        method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'leads[status][0][id]=6&leads[status][0][status_id]=100&leads[status][0][pipeline_id]=1',
      });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ accepted: 1 });
    } finally {
      await new Promise((resolve) => mounted.close(resolve));
    }
  });

  it('RunSync reconciles now and the status shows when', async () => {
    const { connector } = await stack.grpc.createConnector(request({ name: 'Sync' }));
    const { nextSyncAt } = await stack.grpc.runSync({ organizationId: stack.organizationId, id: connector!.id });
    expect(nextSyncAt!.getTime()).toBeLessThanOrEqual(Date.now() + 1_000);
    const status = await waitFor(async () => {
      const { status: s } = await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id: connector!.id });
      return s!.lastSyncAt && s!.nextSyncAt!.getTime() > Date.now() + 60_000 ? s : undefined;
    }, { what: 'the sync' });
    expect(status).toMatchObject({ lastError: '', lastErrorCode: '' });
  });

  it('re-encrypts credentials sealed with a previous key when a new key is put first', async () => {
    const { connector } = await stack.grpc.createConnector(request({ name: 'Rotate' }));
    const newKey = Buffer.from(generateSecretKey(), 'base64');
    const rotated = new Connectors(stack.pool, new SecretBox([newKey, ...stack.secretKeys]), grpcReviewServices({} as never, {} as never), { publicBaseUrl: 'http://hooks.test', allowHttpCrm: true }, testLogger());
    expect(await rotated.reencryptCredentials()).toBeGreaterThanOrEqual(1);
    const { rows } = await stack.pool.query<{ credentials: string }>('SELECT credentials FROM connectors WHERE id = $1', [connector!.id]);
    expect(rows[0].credentials.split('.')[1]).toBe(secretKeyId(newKey));
    const onlyNew = new Connectors(stack.pool, new SecretBox([newKey]), grpcReviewServices({} as never, {} as never), { publicBaseUrl: 'http://hooks.test', allowHttpCrm: true }, testLogger());
    const loaded = await onlyNew.load(connector!.id);
    expect(onlyNew.credentials(loaded!)).toEqual({ kind: 'amocrm', auth: { mode: 'long_lived', token } });
    expect(await rotated.reencryptCredentials()).toBe(0);
  });
});

describe('buildConfig', () => {
  const env = { DATABASE_URL: 'postgres://localhost/x', CONNECTOR_SECRET_KEYS: generateSecretKey() };
  const failure = (e: Record<string, string>) => {
    try {
      buildConfig(e);
    } catch (err) {
      return err instanceof ConfigError ? err.variable : `not a ConfigError: ${String(err)}`;
    }
    return 'no error';
  };

  it('reads the defaults: ports, addresses, pace', () => {
    expect(buildConfig(env)).toMatchObject({ grpcPort: 50054, hooksPort: 8090, opsPort: 9471, contactsAddress: '127.0.0.1:50051', schedulerAddress: '127.0.0.1:50052', allowHttpCrm: false, policy: { amocrmPerSecond: 7, bitrix24PerSecond: 2 } });
  });

  it('fails naming the variable: no keys, a short key, plain-http CRMs in production', () => {
    expect(failure({ DATABASE_URL: env.DATABASE_URL })).toBe('CONNECTOR_SECRET_KEYS');
    expect(failure({ ...env, CONNECTOR_SECRET_KEYS: Buffer.alloc(16).toString('base64') })).toBe('CONNECTOR_SECRET_KEYS');
    expect(failure({ ...env, NODE_ENV: 'production', CONNECTOR_ALLOW_HTTP_CRM: 'true' })).toBe('CONNECTOR_ALLOW_HTTP_CRM');
    expect(failure({ ...env, SCHEDULER_ADDR: 'nope' })).toBe('SCHEDULER_ADDR');
  });
});
