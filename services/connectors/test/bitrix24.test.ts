import { bitrixTime, FakeBitrix24, waitFor } from '@rrs/testkit';
import { startConnectorStack, type ConnectorStack } from './support/stack';

/**
 * Bitrix24 connector end to end: the fake portal's outbound webhook (ONCRMDEALUPDATE / ADD) → the
 * inbound URL (secret and application token checked) → inbox → crm.deal.get / crm.contact.get through the
 * fake's inbound webhook → contacts + cascade-scheduler → a cascade.
 */
describe('Bitrix24 connector', () => {
  let stack: ConnectorStack;
  let b24: FakeBitrix24;
  let connectorId: string;
  let inboundUrl: string;

  beforeAll(async () => {
    stack = await startConnectorStack();
    b24 = await FakeBitrix24.start();
    const r = await stack.grpc.createConnector({
      organizationId: stack.organizationId,
      kind: 'bitrix24',
      name: 'Portal',
      amocrm: undefined,
      bitrix24: { webhookUrl: b24.webhookUrl, applicationToken: b24.applicationToken },
      wonStages: [],
      locationId: stack.locationId,
      locationMapping: { field: 'UF_CRM_SHOP', values: { arbat: stack.otherLocationId } },
      flowId: '',
      writeBack: undefined,
    });
    connectorId = r.connector!.id;
    inboundUrl = r.inboundUrl;
    await stack.firstPass(connectorId);
    await stack.settled(connectorId);
  });
  afterAll(async () => {
    await stack?.close();
    await b24?.close();
  });

  const eventCount = async () => (await stack.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM crm_events WHERE connector_id = $1', [connectorId])).rows[0].n;
  const outcomes = async (dealId: string) => (await stack.pool.query('SELECT status, outcome FROM crm_events WHERE connector_id = $1 AND deal_id = $2 ORDER BY id', [connectorId, dealId])).rows;
  const started = async (dealId: string) => (await stack.pool.query('SELECT cascade_id, won_key FROM deal_cascades WHERE connector_id = $1 AND deal_id = $2', [connectorId, dealId])).rows;
  const customer = (name: string) => b24.addContact({ name, lastName: 'Ivanova', phone: '+7 (916) 765-43-21', email: `${name.toLowerCase()}@example.com` });

  it('a deal moved to WON starts one cascade, at the location its field maps to', async () => {
    const contact = customer('Irina');
    const deal = b24.addDeal({ contactId: String(contact.ID), fields: { UF_CRM_SHOP: 'arbat' } });
    b24.moveDeal(deal.ID, 'WON');
    const res = await stack.hook(inboundUrl, b24.eventBody('ONCRMDEALUPDATE', deal.ID));
    expect(res).toEqual({ status: 200, body: { accepted: 1 } });
    const [row] = await waitFor(async () => ((await started(deal.ID)).length ? started(deal.ID) : undefined), { what: 'the cascade of the deal', timeoutMs: 20_000 });
    expect(row.won_key).toBe('WON');
    const { rows } = await stack.schedulerPool.query('SELECT location_id FROM cascades WHERE id = $1', [row.cascade_id]);
    expect(rows[0].location_id).toBe(stack.otherLocationId);
    const step = await waitFor(() => stack.sender.received.find((s) => s.cascadeId === row.cascade_id), { what: 'the first email', timeoutMs: 20_000 });
    expect(step.recipient).toMatchObject({ name: 'Irina Ivanova', email: 'irina@example.com', phone: '+79167654321' });
    // What is kept of the event: no credentials.
    const stored = await stack.pool.query<{ payload: { body: Record<string, string> } }>('SELECT payload FROM crm_events WHERE connector_id = $1 AND deal_id = $2', [connectorId, deal.ID]);
    expect(Object.keys(stored.rows[0].payload.body).some((k) => k.startsWith('auth['))).toBe(false);
  });

  it('the same event three times, and a won deal in another pipeline (C1:WON), each start one cascade', async () => {
    const deal = b24.addDeal({ categoryId: 1, contactId: String(customer('Kira').ID) });
    b24.moveDeal(deal.ID, 'C1:WON');
    const body = b24.eventBody('ONCRMDEALUPDATE', deal.ID);
    for (let i = 0; i < 3; i++) expect((await stack.hook(inboundUrl, body)).status).toBe(200);
    await stack.settled(connectorId);
    expect(await started(deal.ID)).toEqual([{ cascade_id: expect.any(String), won_key: 'C1:WON' }]);
    expect(await stack.cascadesOf(`bitrix24:deal:${deal.ID}`)).toHaveLength(1);
    expect((await outcomes(deal.ID)).every((o) => o.status === 'done')).toBe(true);
  });

  it('refuses an event with a wrong application token: 401, nothing stored, nothing asked, nothing started', async () => {
    const deal = b24.addDeal({ contactId: String(customer('Lev').ID) });
    b24.moveDeal(deal.ID, 'WON');
    const [events, calls] = [await eventCount(), b24.calls.length];
    for (const token of ['0'.repeat(32), '', b24.applicationToken.slice(1)]) {
      const res = await stack.hook(inboundUrl, b24.eventBody('ONCRMDEALUPDATE', deal.ID, token));
      expect(res).toEqual({ status: 401, body: { code: 'invalid_application_token', detail: expect.any(String) } });
    }
    // A wrong secret in the URL, or another connector's id: 404, the same as an unknown hook.
    const wrongSecret = inboundUrl.replace(/[^/]{43}$/, 'A'.repeat(43));
    expect(await stack.hook(wrongSecret, b24.eventBody('ONCRMDEALUPDATE', deal.ID))).toEqual({ status: 404, body: { code: 'not_found', detail: 'no such hook' } });
    await new Promise((r) => setTimeout(r, 300));
    expect(await eventCount()).toBe(events);
    expect(b24.calls.length).toBe(calls);
    expect(await stack.cascadesOf(`bitrix24:deal:${deal.ID}`)).toEqual([]);
    const { status } = await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id: connectorId });
    expect(status!.pendingEvents).toBe(0);
  });

  it('a deal that is not won, or was won before the connector existed, starts nothing', async () => {
    const open = b24.addDeal({ contactId: String(customer('Mila').ID) });
    b24.moveDeal(open.ID, 'PREPARATION');
    const lost = b24.addDeal({ contactId: String(customer('Nina').ID) });
    b24.moveDeal(lost.ID, 'LOSE');
    const old = b24.addDeal({ stageId: 'WON', contactId: String(customer('Oleg').ID), fields: { MOVED_TIME: bitrixTime(new Date(Date.now() - 86_400_000)) } });
    for (const d of [open, lost, old]) expect((await stack.hook(inboundUrl, b24.eventBody('ONCRMDEALUPDATE', d.ID))).status).toBe(200);
    // Other events of the portal are answered and not kept.
    expect(await stack.hook(inboundUrl, b24.eventBody('ONCRMCONTACTUPDATE', '1'))).toEqual({ status: 200, body: { accepted: 0 } });
    await stack.settled(connectorId);
    expect(await outcomes(open.ID)).toEqual([{ status: 'ignored', outcome: 'not_won' }]);
    expect(await outcomes(lost.ID)).toEqual([{ status: 'ignored', outcome: 'not_won' }]);
    expect(await outcomes(old.ID)).toEqual([{ status: 'ignored', outcome: 'won_before_connector' }]);
    for (const d of [open, lost, old]) expect(await stack.cascadesOf(`bitrix24:deal:${d.ID}`)).toEqual([]);
  });

  it('a won deal whose event never came is started by reconciliation (crm.deal.list), exactly once', async () => {
    const deal = b24.addDeal({ contactId: String(customer('Pavel').ID) });
    b24.moveDeal(deal.ID, 'WON');
    await stack.grpc.runSync({ organizationId: stack.organizationId, id: connectorId });
    await waitFor(async () => (await started(deal.ID)).length === 1, { what: 'reconciliation to start the deal', timeoutMs: 20_000 });
    await stack.grpc.runSync({ organizationId: stack.organizationId, id: connectorId });
    expect((await stack.hook(inboundUrl, b24.eventBody('ONCRMDEALUPDATE', deal.ID))).status).toBe(200);
    await stack.settled(connectorId);
    await new Promise((r) => setTimeout(r, 300));
    expect(await stack.cascadesOf(`bitrix24:deal:${deal.ID}`)).toHaveLength(1);
    expect(b24.calls.some((c) => c.method === 'crm.deal.list')).toBe(true);
  });

  it('QUERY_LIMIT_EXCEEDED (503) is backed off and retried; a deal without a contact shows in the status', async () => {
    const deal = b24.addDeal({ contactId: String(customer('Rita').ID) });
    b24.moveDeal(deal.ID, 'WON');
    b24.failNext(2);
    expect((await stack.hook(inboundUrl, b24.eventBody('ONCRMDEALUPDATE', deal.ID))).status).toBe(200);
    await waitFor(async () => (await started(deal.ID)).length === 1, { what: 'the deal started after QUERY_LIMIT_EXCEEDED', timeoutMs: 20_000 });
    expect(b24.calls.filter((c) => c.status === 503)).toHaveLength(2);

    const orphan = b24.addDeal({});
    b24.moveDeal(orphan.ID, 'WON');
    expect((await stack.hook(inboundUrl, b24.eventBody('ONCRMDEALADD', orphan.ID))).status).toBe(200);
    await stack.settled(connectorId);
    expect(await outcomes(orphan.ID)).toEqual([{ status: 'failed', outcome: 'deal_without_contact' }]);
    const { status } = await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id: connectorId });
    expect(status).toMatchObject({ lastErrorCode: 'deal_without_contact', failedEvents: 1 });
    expect(status!.lastError).toContain(`Bitrix24 deal ${orphan.ID}`);
  });

  it('a deal of an organization that may not send (trial plan) is refused by the scheduler: nothing started, the reason in the status', async () => {
    await stack.contacts.directory.updateOrganization(stack.organizationId, { plan: 'trial' });
    try {
      const deal = b24.addDeal({ contactId: String(customer('Sofia').ID) });
      b24.moveDeal(deal.ID, 'WON');
      expect((await stack.hook(inboundUrl, b24.eventBody('ONCRMDEALUPDATE', deal.ID))).status).toBe(200);
      await stack.settled(connectorId);
      expect(await outcomes(deal.ID)).toEqual([{ status: 'failed', outcome: 'refused:plan_required' }]);
      expect(await started(deal.ID)).toEqual([]);
      expect(await stack.cascadesOf(`bitrix24:deal:${deal.ID}`)).toEqual([]);
      const { status } = await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id: connectorId });
      expect(status!.lastErrorCode).toBe('plan_required');
    } finally {
      await stack.contacts.directory.updateOrganization(stack.organizationId, { plan: 'standard' });
    }
  });
});
