import { FakeAmoCrm, waitFor } from '@rrs/testkit';
import { startConnectorStack, type ConnectorStack } from './support/stack';

/**
 * amoCRM connector end to end: the fake account's "lead status changed" webhook → the inbound URL →
 * inbox → the lead and its contact from the fake's API → contacts + cascade-scheduler (real, over gRPC)
 * → a cascade whose first email reaches the scripted sender.
 */
describe('amoCRM connector', () => {
  let stack: ConnectorStack;
  let amo: FakeAmoCrm;
  let connectorId: string;
  let inboundUrl: string;

  beforeAll(async () => {
    stack = await startConnectorStack();
    amo = await FakeAmoCrm.start();
    const r = await stack.grpc.createConnector({
      organizationId: stack.organizationId,
      kind: 'amocrm',
      name: 'Sales',
      amocrm: { baseUrl: amo.url, longLivedToken: amo.issueLongLivedToken(), clientId: '', clientSecret: '', redirectUri: '', accessToken: '', refreshToken: '' },
      bitrix24: undefined,
      wonStages: [],
      locationId: stack.locationId,
      locationMapping: undefined,
      flowId: '',
      writeBack: undefined,
    });
    connectorId = r.connector!.id;
    inboundUrl = r.inboundUrl;
    await stack.firstPass(connectorId);
  });
  afterAll(async () => {
    await stack?.close();
    await amo?.close();
  });

  const dealRow = async (leadId: number) =>
    (await stack.pool.query('SELECT deal_id, won_key, cascade_id, contact_id, crm_contact_id FROM deal_cascades WHERE connector_id = $1 AND deal_id = $2', [connectorId, String(leadId)])).rows;
  const eventsOf = async (leadId: number) =>
    (await stack.pool.query('SELECT status, outcome, source FROM crm_events WHERE connector_id = $1 AND deal_id = $2 ORDER BY id', [connectorId, String(leadId)])).rows;
  const apiCallsFor = (leadId: number) => amo.requests.filter((r) => r.path.startsWith(`/api/v4/leads/${leadId}`)).length;
  const wonLead = (name = 'Anna') => {
    const contact = amo.addContact({ name, phone: '8 916 123-45-67', email: `${name.toLowerCase()}@example.com` });
    return { contact, lead: amo.addLead({ contactId: contact.id }) };
  };

  it('a won lead starts one cascade for its contact, upserted by the CRM contact id', async () => {
    const { contact, lead } = wonLead();
    const res = await stack.hook(inboundUrl, amo.moveLead(lead.id, 142));
    expect(res).toEqual({ status: 200, body: { accepted: 1 } });
    const [row] = await waitFor(async () => ((await dealRow(lead.id)).length ? dealRow(lead.id) : undefined), { what: 'the cascade of the lead', timeoutMs: 20_000 });
    expect(row).toMatchObject({ won_key: `${amo.pipelines[0]}:142`, crm_contact_id: String(contact.id) });
    expect(await stack.cascadesOf(`amocrm:lead:${lead.id}`)).toEqual([{ id: row.cascade_id }]);
    const stored = await stack.contacts.contacts.get(stack.organizationId, row.contact_id);
    expect(stored).toMatchObject({ externalId: `amocrm:contact:${contact.id}`, name: 'Anna', email: 'anna@example.com', phone: '+79161234567', locationId: stack.locationId });
    const step = await waitFor(() => stack.sender.received.find((s) => s.cascadeId === row.cascade_id), { what: 'the first email at the sender', timeoutMs: 20_000 });
    expect(step).toMatchObject({ channel: 'EMAIL', recipient: { name: 'Anna', email: 'anna@example.com', phone: '+79161234567' } });
    await stack.settled(connectorId);
    expect(await eventsOf(lead.id)).toEqual([{ status: 'done', outcome: 'started', source: 'webhook' }]);
  });

  it('the same webhook three times (a CRM retry, a duplicate) starts one cascade', async () => {
    const { lead } = wonLead('Boris');
    const body = amo.moveLead(lead.id, 142);
    const answers = await Promise.all([stack.hook(inboundUrl, body), stack.hook(inboundUrl, body), stack.hook(inboundUrl, body)]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    await stack.settled(connectorId);
    await waitFor(async () => (await dealRow(lead.id)).length === 1, { what: 'the deal row' });
    expect(await stack.cascadesOf(`amocrm:lead:${lead.id}`)).toHaveLength(1);
    const events = await eventsOf(lead.id);
    expect(events).toHaveLength(3);
    expect(events.every((e) => e.status === 'done' && (e.outcome === 'started' || e.outcome === 'duplicate'))).toBe(true);
    // A later copy of the hook is answered from the deal mapping, without asking amoCRM again.
    const calls = apiCallsFor(lead.id);
    expect((await stack.hook(inboundUrl, body)).status).toBe(200);
    await stack.settled(connectorId);
    expect(apiCallsFor(lead.id)).toBe(calls);
    expect(await stack.cascadesOf(`amocrm:lead:${lead.id}`)).toHaveLength(1);
  });

  it('a status change that is not "won" starts nothing (and asks amoCRM nothing)', async () => {
    const { lead } = wonLead('Vera');
    for (const status of [200, 143]) {
      const res = await stack.hook(inboundUrl, amo.moveLead(lead.id, status));
      expect(res).toEqual({ status: 200, body: { accepted: 1 } });
    }
    await stack.settled(connectorId);
    expect((await eventsOf(lead.id)).map((e) => e.outcome)).toEqual(['not_won', 'not_won']);
    expect(await dealRow(lead.id)).toEqual([]);
    expect(await stack.cascadesOf(`amocrm:lead:${lead.id}`)).toEqual([]);
    expect(apiCallsFor(lead.id)).toBe(0);
  });

  it('a missed webhook is picked up by reconciliation, exactly once', async () => {
    const { lead } = wonLead('Gleb');
    amo.moveLead(lead.id, 142); // amoCRM's digital-pipeline hooks are sent once: this one never arrived.
    await stack.grpc.runSync({ organizationId: stack.organizationId, id: connectorId });
    const [row] = await waitFor(async () => ((await dealRow(lead.id)).length ? dealRow(lead.id) : undefined), { what: 'reconciliation to start the lead', timeoutMs: 20_000 });
    // The deal row is written before the event is marked done: wait for the event to settle.
    await stack.settled(connectorId);
    expect(await eventsOf(lead.id)).toEqual([{ status: 'done', outcome: 'started', source: 'reconcile' }]);
    // Another pass, and then the late webhook itself: still the one cascade.
    await stack.grpc.runSync({ organizationId: stack.organizationId, id: connectorId });
    await waitFor(async () => {
      const { status } = await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id: connectorId });
      return status!.lastSyncAt !== undefined && status!.nextSyncAt!.getTime() > Date.now() + 60_000;
    }, { what: 'the second pass' });
    expect((await stack.hook(inboundUrl, amo.statusWebhookBody(lead, { status: 100, pipeline: lead.pipeline_id }))).status).toBe(200);
    await stack.settled(connectorId);
    expect(await stack.cascadesOf(`amocrm:lead:${lead.id}`)).toEqual([{ id: row.cascade_id }]);
    const { status } = await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id: connectorId });
    expect(status).toMatchObject({ lastError: '', pendingEvents: 0 });
  });

  it('a new connector is reconciled at once, not when the reconciler next wakes on its own', async () => {
    // A pass that has finished leaves the reconciler asleep for its idle bound (30 s here).
    const statusOf = async () => (await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id: connectorId })).status!;
    const before = (await statusOf()).lastSyncAt?.getTime() ?? 0;
    await stack.grpc.runSync({ organizationId: stack.organizationId, id: connectorId });
    await waitFor(async () => ((await statusOf()).lastSyncAt?.getTime() ?? 0) > before, { what: 'the pass asked for' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const created = await stack.grpc.createConnector({
      organizationId: stack.organizationId, kind: 'amocrm', name: 'Second',
      amocrm: { baseUrl: amo.url, longLivedToken: amo.issueLongLivedToken(), clientId: '', clientSecret: '', redirectUri: '', accessToken: '', refreshToken: '' },
      bitrix24: undefined, wonStages: [], locationId: stack.locationId, locationMapping: undefined, flowId: '', writeBack: undefined,
    });
    const id = created.connector!.id;
    try {
      await waitFor(async () => (await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id })).status!.lastSyncAt !== undefined, {
        what: "the new connector's first pass",
        timeoutMs: 10_000,
      });
    } finally {
      await stack.grpc.deleteConnector({ organizationId: stack.organizationId, id });
    }
  });

  it('429 from amoCRM is waited out and retried; the pace stays at 7 requests a second', async () => {
    const { lead } = wonLead('Dina');
    amo.failNext(2, 429);
    expect((await stack.hook(inboundUrl, amo.moveLead(lead.id, 142))).status).toBe(200);
    await waitFor(async () => (await dealRow(lead.id)).length === 1, { what: 'the lead started after the 429s', timeoutMs: 20_000 });
    expect(amo.requests.filter((r) => r.status === 429).length).toBeGreaterThanOrEqual(2);

    // A burst of won leads: every lookup waits its turn, so the account's own limit is never hit.
    const before = amo.requests.length;
    const burst = Array.from({ length: 12 }, (_, i) => wonLead(`Burst${i}`).lead);
    await Promise.all(burst.map((l) => stack.hook(inboundUrl, amo.moveLead(l.id, 142))));
    await waitFor(async () => {
      const { rows } = await stack.pool.query('SELECT count(*)::int AS n FROM deal_cascades WHERE connector_id = $1 AND deal_id = ANY($2::text[])', [connectorId, burst.map((l) => String(l.id))]);
      return rows[0].n === burst.length;
    }, { what: 'every lead of the burst started', timeoutMs: 30_000 });
    const burstRequests = amo.requests.slice(before);
    expect(burstRequests.filter((r) => r.status === 429)).toEqual([]);
    expect(burstRequests.length).toBeGreaterThanOrEqual(burst.length * 2);
    expect(amo.maxRequestsInAnySecond()).toBeLessThanOrEqual(7);
  });
});

describe('amoCRM connector with OAuth 2.0', () => {
  let stack: ConnectorStack;
  let amo: FakeAmoCrm;

  beforeAll(async () => {
    stack = await startConnectorStack({ policy: { maxAttempts: 3 } });
    amo = await FakeAmoCrm.start();
  });
  afterAll(async () => {
    await stack?.close();
    await amo?.close();
  });

  const createOAuthConnector = async () => {
    const tokens = amo.issueOAuthTokens();
    const c = amo.oauthClient;
    const r = await stack.grpc.createConnector({
      organizationId: stack.organizationId, kind: 'amocrm', name: 'OAuth',
      amocrm: { baseUrl: amo.url, longLivedToken: '', clientId: c.clientId, clientSecret: c.clientSecret, redirectUri: c.redirectUri, accessToken: tokens.accessToken, refreshToken: tokens.refreshToken },
      bitrix24: undefined, wonStages: [], locationId: stack.locationId, locationMapping: undefined, flowId: '', writeBack: undefined,
    });
    await stack.firstPass(r.connector!.id);
    return { id: r.connector!.id, url: r.inboundUrl, tokens };
  };
  const sealed = async (id: string) => (await stack.pool.query<{ credentials: string }>('SELECT credentials FROM connectors WHERE id = $1', [id])).rows[0].credentials;

  it('a 401 refreshes the tokens once, stores them sealed, and the deal goes on', async () => {
    const connector = await createOAuthConnector();
    await stack.settled(connector.id);
    amo.expireAccessTokens();
    const contact = amo.addContact({ name: 'Olga', email: 'olga@example.com' });
    const lead = amo.addLead({ contactId: contact.id });
    expect((await stack.hook(connector.url, amo.moveLead(lead.id, 142))).status).toBe(200);
    await waitFor(async () => (await stack.cascadesOf(`amocrm:lead:${lead.id}`)).length === 1, { what: 'the lead started with refreshed tokens', timeoutMs: 20_000 });
    expect(amo.refreshes).toBe(1);
    const stored = await sealed(connector.id);
    expect(stored).toMatch(/^sb1\./);
    expect(stored).not.toContain(connector.tokens.refreshToken);
    expect(stored).not.toContain('at_');
    const { status } = await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id: connector.id });
    expect(status!.lastError).toBe('');
  });

  it('a refresh token amoCRM refuses shows as crm_unauthorized in the status, and nothing is started', async () => {
    const connector = await createOAuthConnector();
    await stack.settled(connector.id);
    // Its first pass may have started the lead the test before won a moment ago (within the minute of slack).
    const { cascadesStarted } = (await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id: connector.id })).status!;
    amo.expireAccessTokens();
    amo.revokeRefreshToken();
    const contact = amo.addContact({ name: 'Petr', email: 'petr@example.com' });
    const lead = amo.addLead({ contactId: contact.id });
    expect((await stack.hook(connector.url, amo.moveLead(lead.id, 142))).status).toBe(200);
    const status = await waitFor(async () => {
      const { status: s } = await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id: connector.id });
      return s!.failedEvents === 1 ? s : undefined;
    }, { what: 'the event given up after its retries', timeoutMs: 20_000 });
    expect(status).toMatchObject({ lastErrorCode: 'crm_unauthorized', pendingEvents: 0, failedEvents: 1, cascadesStarted });
    expect(status!.lastError).toMatch(/refresh token/);
    expect(await stack.cascadesOf(`amocrm:lead:${lead.id}`)).toEqual([]);
  });
});
