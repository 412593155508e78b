import { FakeAmoCrm, FakeBitrix24, waitFor } from '@rrs/testkit';
import { addMember, DEMO_PASSWORD, signIn, startConsoleStack, type ConsoleStack, type Signed } from './consoleStack';

/**
 * Connecting a CRM from the console's account API on the real all-in-one: amoCRM's OAuth consent
 * (authorize → the fake's page → the code back → complete), Bitrix24 with its inbound webhook and then its
 * application token, a new inbound URL; a viewer is refused every change (403 `read_only_role`) with
 * nothing created; another organization's connector is 404; without an amoCRM integration of its own the
 * service answers 409 `amocrm_oauth_not_configured`.
 */
describe('account API: connecting a CRM', () => {
  let stack: ConsoleStack;
  let amo: FakeAmoCrm;
  let b24: FakeBitrix24;
  let owner: Signed;
  let viewer: Signed;
  let locationId: string;

  beforeAll(async () => {
    [amo, b24] = await Promise.all([FakeAmoCrm.start(), FakeBitrix24.start()]);
    amo.oauthClient.redirectUri = 'http://localhost:8080/app/';
    stack = await startConsoleStack('connectors-api', {
      allowHttpCrm: true,
      amoCrmOAuth: { clientId: amo.oauthClient.clientId, clientSecret: amo.oauthClient.clientSecret, redirectUri: amo.oauthClient.redirectUri, authorizeUrl: `${amo.url}/oauth` },
    });
    owner = await signIn(stack.aio.url, 'demo@example.com', DEMO_PASSWORD);
    viewer = await addMember(stack, stack.aio.demo.organizationId, 'crm-viewer@example.com', 'viewer');
    locationId = (await owner.call('GET', '/locations')).body.locations[0].id;
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await Promise.all([amo?.close(), b24?.close()]);
  });

  const connectorCount = async () => (await owner.call('GET', '/connectors')).body.connectors.length as number;

  it('amoCRM: authorize → consent → complete creates an OAuth connector with its inbound URL; a viewer is refused; the state works once', async () => {
    expect((await viewer.call('POST', '/connectors/amocrm/authorize', { body: { locationId } })).body.code).toBe('read_only_role');
    const started = await owner.call('POST', '/connectors/amocrm/authorize', { body: { name: 'Sales', locationId } });
    expect(started.status).toBe(200);
    const page = await fetch(started.body.authorizeUrl);
    const state = /name="state" value="([^"]*)"/.exec(await page.text())![1];
    const allowed = await fetch(`${amo.url}/oauth/allow`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ state }) });
    const back = new URL(allowed.headers.get('location')!);
    const completion = { state: back.searchParams.get('state')!, code: back.searchParams.get('code')!, referer: back.searchParams.get('referer')! };
    expect((await viewer.call('POST', '/connectors/amocrm/complete', { body: completion })).body.code).toBe('read_only_role');
    expect(await connectorCount()).toBe(0);
    const done = await owner.call('POST', '/connectors/amocrm/complete', { body: completion });
    expect(done).toMatchObject({ status: 201, body: { connector: { kind: 'amocrm', authMode: 'oauth', name: 'Sales', crmUrl: amo.url }, inboundUrl: expect.stringMatching(/\/hooks\/crm\//) } });
    expect((await owner.call('POST', '/connectors/amocrm/complete', { body: completion })).body.code).toBe('oauth_state_invalid');
    expect((await viewer.call('GET', '/connectors')).body.connectors).toEqual([expect.objectContaining({ id: done.body.connector.id, status: expect.objectContaining({ lastError: null }) })]);
  });

  it('Bitrix24: the inbound webhook, then the application token; a new inbound URL; refusals change nothing', async () => {
    const before = await connectorCount();
    expect((await viewer.call('POST', '/connectors/bitrix24', { body: { webhookUrl: b24.webhookUrl, locationId } })).body.code).toBe('read_only_role');
    const bad = await owner.call('POST', '/connectors/bitrix24', { body: { webhookUrl: 'https://example.com/not-a-webhook', locationId } });
    expect(bad.status).toBe(400);
    expect(await connectorCount()).toBe(before);
    const created = await owner.call('POST', '/connectors/bitrix24', { body: { webhookUrl: b24.webhookUrl, locationId, name: 'Portal' } });
    expect(created).toMatchObject({ status: 201, body: { connector: { kind: 'bitrix24', name: 'Portal' } } });
    const id = created.body.connector.id as string;
    // An event before the token: refused, and the status says why.
    const hook = (url: string) => fetch(url.replace('http://localhost:8080', stack.aio.url), { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: b24.eventBody('ONCRMDEALUPDATE', '1') });
    expect((await hook(created.body.inboundUrl)).status).toBe(401);
    const statusOf = async () => (await owner.call('GET', '/connectors')).body.connectors.find((c: { id: string }) => c.id === id).status;
    expect(await statusOf()).toMatchObject({ lastErrorCode: 'application_token_missing' });
    expect((await viewer.call('PUT', `/connectors/${id}/application-token`, { body: { applicationToken: b24.applicationToken } })).body.code).toBe('read_only_role');
    const tokened = await owner.call('PUT', `/connectors/${id}/application-token`, { body: { applicationToken: b24.applicationToken } });
    expect(tokened.status).toBe(200);
    expect(await statusOf()).toMatchObject({ lastErrorCode: null, lastError: null });
    expect((await hook(created.body.inboundUrl)).status).toBe(200);

    expect((await viewer.call('POST', `/connectors/${id}/inbound-url`)).body.code).toBe('read_only_role');
    const rotated = await owner.call('POST', `/connectors/${id}/inbound-url`);
    expect(rotated.body.inboundUrl).not.toBe(created.body.inboundUrl);
    expect((await hook(created.body.inboundUrl)).status).toBe(404);
    await waitFor(async () => (await statusOf()).lastEventAt !== null || undefined, { what: 'the event recorded' });
  });

  it('another organization sees none of them; without an amoCRM integration the consent is 409', async () => {
    const [first] = (await owner.call('GET', '/connectors')).body.connectors;
    const org = await stack.admin('POST', '/organizations', { name: 'Other CRM Co', plan: 'standard', emailConfirmed: true });
    const other = await addMember(stack, org.body.organization.id, 'crm-other@example.com', 'owner');
    expect((await other.call('GET', '/connectors')).body.connectors).toEqual([]);
    expect((await other.call('POST', `/connectors/${first.id}/inbound-url`)).status).toBe(404);
    expect((await other.call('DELETE', `/connectors/${first.id}`)).status).toBe(404);
    expect(await connectorCount()).toBe(2);

    const plain = await startConsoleStack('connectors-api-plain');
    try {
      const member = await signIn(plain.aio.url, 'demo@example.com', DEMO_PASSWORD);
      const location = (await member.call('GET', '/locations')).body.locations[0].id;
      expect(await member.call('POST', '/connectors/amocrm/authorize', { body: { locationId: location } })).toMatchObject({ status: 409, body: { code: 'amocrm_oauth_not_configured' } });
    } finally {
      await plain.close();
    }
  });
});
