import { FakeAmoCrm, FakeBitrix24, waitFor } from '@rrs/testkit';
import { reviewTokenOf, startConnectorStack, type ConnectorStack } from './support/stack';

/**
 * CRM connectors stop what a lost or refunded deal started, and ask the right person, against the fake
 * amoCRM and Bitrix24 speaking their documented payloads, with the real contacts and cascade-scheduler
 * services: a lead moved to "closed – lost" (143) or back out of won, a deal whose stage becomes a
 * failure stage (`F`) or leaves `S` — by hook, or by the reconciliation when the hook was missed — has its
 * cascade canceled and the write-back says so on the deal; amoCRM `leads[update]` hooks start won leads;
 * Bitrix24 deals ask their primary contact (crm.deal.contact.items.get), deals with only a company ask
 * the company.
 */
describe('connectors: lost deals, lead updates, the right person', () => {
  let stack: ConnectorStack;
  let amo: FakeAmoCrm;
  let b24: FakeBitrix24;
  let amoConnector: { id: string; url: string };
  let b24Connector: { id: string; url: string };

  beforeAll(async () => {
    stack = await startConnectorStack();
    [amo, b24] = await Promise.all([FakeAmoCrm.start(), FakeBitrix24.start()]);
    const common = { organizationId: stack.organizationId, wonStages: [], locationId: stack.locationId, locationMapping: undefined, flowId: '', writeBack: undefined };
    const a = await stack.grpc.createConnector({
      ...common, kind: 'amocrm', name: 'amo', bitrix24: undefined,
      amocrm: { baseUrl: amo.url, longLivedToken: amo.issueLongLivedToken(), clientId: '', clientSecret: '', redirectUri: '', accessToken: '', refreshToken: '' },
    });
    const b = await stack.grpc.createConnector({ ...common, kind: 'bitrix24', name: 'b24', amocrm: undefined, bitrix24: { webhookUrl: b24.webhookUrl, applicationToken: b24.applicationToken } });
    amoConnector = { id: a.connector!.id, url: a.inboundUrl };
    b24Connector = { id: b.connector!.id, url: b.inboundUrl };
    await Promise.all([stack.firstPass(amoConnector.id), stack.firstPass(b24Connector.id)]);
  });
  afterAll(async () => {
    await stack?.close();
    await Promise.all([amo?.close(), b24?.close()]);
  });

  const dealRow = async (connectorId: string, dealId: string | number) =>
    (await stack.pool.query('SELECT cascade_id, crm_contact_id, stop_reason, stopped_at IS NOT NULL AS stopped, finished_at IS NOT NULL AS finished FROM deal_cascades WHERE connector_id = $1 AND deal_id = $2', [connectorId, String(dealId)])).rows;
  const startedCascade = async (connectorId: string, dealId: string | number): Promise<string> =>
    waitFor(async () => (await dealRow(connectorId, dealId))[0]?.cascade_id as string | undefined, { what: `the cascade of deal ${dealId}`, timeoutMs: 20_000 });
  const recipientOf = async (cascadeId: string) => (await stack.scheduler.cascades.get(stack.organizationId, cascadeId)).recipients[0];
  const outcomes = async (connectorId: string, dealId: string | number) =>
    (await stack.pool.query('SELECT status, outcome FROM crm_events WHERE connector_id = $1 AND deal_id = $2 ORDER BY id', [connectorId, String(dealId)])).rows.map((r) => `${r.status}:${r.outcome}`);
  const canceled = (cascadeId: string) => waitFor(async () => (await recipientOf(cascadeId)).finishReason === 'canceled', { what: `cascade ${cascadeId} canceled`, timeoutMs: 20_000 });
  /** The write-back of the cancel's finish event: its note on the deal. */
  const writtenBack = (connectorId: string, cascadeId: string) =>
    waitFor(async () => {
      const { rows } = await stack.pool.query(`SELECT status, reason, stop_reason FROM write_backs WHERE connector_id = $1 AND cascade_id = $2`, [connectorId, cascadeId]);
      return rows[0]?.status === 'done' ? rows[0] : undefined;
    }, { what: 'the write-back of the cancel', timeoutMs: 20_000 });
  const amoCustomer = (name: string) => amo.addContact({ name, phone: '+7 916 100-00-01', email: `${name.toLowerCase()}@example.com` });
  const b24Customer = (name: string) => b24.addContact({ name, phone: '+7 916 200-00-01', email: `${name.toLowerCase()}@example.com` });

  describe('amoCRM', () => {
    it('a won lead moved to "closed – lost" (143): its cascade is canceled and the note on the lead says so', async () => {
      const lead = amo.addLead({ contactId: amoCustomer('Anna').id });
      expect((await stack.hook(amoConnector.url, amo.moveLead(lead.id, 142))).status).toBe(200);
      const cascadeId = await startedCascade(amoConnector.id, lead.id);
      await reviewTokenOf(stack, cascadeId);
      expect((await stack.hook(amoConnector.url, amo.moveLead(lead.id, 143))).status).toBe(200);
      await canceled(cascadeId);
      expect((await recipientOf(cascadeId)).steps.map((s) => s.status)).toEqual(['sent', 'canceled']);
      await stack.settled(amoConnector.id);
      expect(await outcomes(amoConnector.id, lead.id)).toEqual(['done:started', 'done:stopped']);
      expect(await dealRow(amoConnector.id, lead.id)).toEqual([expect.objectContaining({ stop_reason: 'lost', stopped: true })]);
      expect(await writtenBack(amoConnector.id, cascadeId)).toEqual({ status: 'done', reason: 'canceled', stop_reason: 'lost' });
      expect(amo.notesOf(lead.id).map((n) => n.params.text)).toEqual([expect.stringContaining('Outcome: the review request was canceled: the deal was lost')]);
      // A copy of the hook later changes nothing.
      expect((await stack.hook(amoConnector.url, amo.statusWebhookBody(lead, { status: 142, pipeline: lead.pipeline_id }))).status).toBe(200);
      await stack.settled(amoConnector.id);
      expect(amo.notesOf(lead.id)).toHaveLength(1);
    });

    it('a lead moved back out of won by a "lead changed" hook (leads[update]): canceled, the note says it left won', async () => {
      const lead = amo.addLead({ contactId: amoCustomer('Boris').id });
      expect((await stack.hook(amoConnector.url, amo.moveLead(lead.id, 142))).status).toBe(200);
      const cascadeId = await startedCascade(amoConnector.id, lead.id);
      expect((await stack.hook(amoConnector.url, amo.moveLeadUpdate(lead.id, 200))).status).toBe(200);
      await canceled(cascadeId);
      expect(await writtenBack(amoConnector.id, cascadeId)).toMatchObject({ reason: 'canceled', stop_reason: 'left_won' });
      expect(amo.notesOf(lead.id)[0].params.text).toContain('the deal left its won stage');
    });

    it('leads[update] of a lead that becomes won starts its cascade at once; of a lead that is not won, nothing (no API call)', async () => {
      const won = amo.addLead({ contactId: amoCustomer('Vera').id });
      expect(await stack.hook(amoConnector.url, amo.moveLeadUpdate(won.id, 142))).toEqual({ status: 200, body: { accepted: 1 } });
      await startedCascade(amoConnector.id, won.id);
      await stack.settled(amoConnector.id);
      expect(await outcomes(amoConnector.id, won.id)).toEqual(['done:started']);
      // An edit of the won lead (another leads[update]) is a duplicate, without asking amoCRM again.
      const calls = amo.requests.filter((r) => r.path.startsWith(`/api/v4/leads/${won.id}`)).length;
      expect((await stack.hook(amoConnector.url, amo.updateWebhookBody(won))).status).toBe(200);
      await stack.settled(amoConnector.id);
      expect(await outcomes(amoConnector.id, won.id)).toEqual(['done:started', 'done:duplicate']);
      expect(amo.requests.filter((r) => r.path.startsWith(`/api/v4/leads/${won.id}`)).length).toBe(calls);

      const open = amo.addLead({ contactId: amoCustomer('Gleb').id, statusId: 200 });
      expect((await stack.hook(amoConnector.url, amo.updateWebhookBody(open))).status).toBe(200);
      await stack.settled(amoConnector.id);
      expect(await outcomes(amoConnector.id, open.id)).toEqual(['ignored:not_won']);
      expect(amo.requests.some((r) => r.path.startsWith(`/api/v4/leads/${open.id}`))).toBe(false);
    });

    it('a lead lost while its hook was missed is stopped by the reconciliation', async () => {
      const lead = amo.addLead({ contactId: amoCustomer('Dina').id });
      expect((await stack.hook(amoConnector.url, amo.moveLead(lead.id, 142))).status).toBe(200);
      const cascadeId = await startedCascade(amoConnector.id, lead.id);
      amo.moveLead(lead.id, 143); // the hook never arrives
      await stack.grpc.runSync({ organizationId: stack.organizationId, id: amoConnector.id });
      await canceled(cascadeId);
      await stack.settled(amoConnector.id);
      expect((await stack.pool.query(`SELECT source, outcome FROM crm_events WHERE connector_id = $1 AND deal_id = $2 ORDER BY id`, [amoConnector.id, String(lead.id)])).rows.at(-1)).toEqual({ source: 'reconcile', outcome: 'stopped' });
    });

    it('a lead lost after its customer rated: nothing to cancel, the rating stands', async () => {
      const lead = amo.addLead({ contactId: amoCustomer('Egor').id });
      expect((await stack.hook(amoConnector.url, amo.moveLead(lead.id, 142))).status).toBe(200);
      const cascadeId = await startedCascade(amoConnector.id, lead.id);
      await stack.scheduler.reviews.submitRating(await reviewTokenOf(stack, cascadeId), 5);
      await waitFor(async () => (await dealRow(amoConnector.id, lead.id))[0]?.finished === true, { what: 'the finish recorded on the deal', timeoutMs: 20_000 });
      expect((await stack.hook(amoConnector.url, amo.moveLead(lead.id, 143))).status).toBe(200);
      await stack.settled(amoConnector.id);
      expect((await recipientOf(cascadeId)).finishReason).toBe('rated');
      expect(await outcomes(amoConnector.id, lead.id)).toEqual(['done:started', 'ignored:not_won']);
    });

    it('a lead with only a company asks the company, by its phone and email', async () => {
      const company = amo.addCompany({ name: 'Acme LLC', phone: '+7 916 300-00-01', email: 'office@acme.example' });
      const lead = amo.addLead({ companyId: company.id });
      expect((await stack.hook(amoConnector.url, amo.moveLead(lead.id, 142))).status).toBe(200);
      const cascadeId = await startedCascade(amoConnector.id, lead.id);
      const step = await waitFor(() => stack.sender.received.find((s) => s.cascadeId === cascadeId), { what: 'the email to the company', timeoutMs: 20_000 });
      expect(step.recipient).toMatchObject({ name: 'Acme LLC', email: 'office@acme.example', phone: '+79163000001' });
      expect((await recipientOf(cascadeId)).contactExternalId).toBe(`amocrm:company:${company.id}`);
      expect((await dealRow(amoConnector.id, lead.id))[0].crm_contact_id).toBe(`company:${company.id}`);
      // A lead with a contact and a company asks the (main) contact.
      const both = amo.addLead({ contactIds: [amoCustomer('Galina').id, amoCustomer('Fedor').id], mainContactId: undefined, companyId: company.id });
      both.mainContact = both.contacts[1];
      expect((await stack.hook(amoConnector.url, amo.moveLead(both.id, 142))).status).toBe(200);
      const bothStep = await waitFor(async () => {
        const id = (await dealRow(amoConnector.id, both.id))[0]?.cascade_id;
        return id ? stack.sender.received.find((s) => s.cascadeId === id) : undefined;
      }, { what: 'the email to the main contact', timeoutMs: 20_000 });
      expect(bothStep.recipient?.email).toBe('fedor@example.com');
    });
  });

  describe('Bitrix24', () => {
    const hook = (dealId: string) => stack.hook(b24Connector.url, b24.eventBody('ONCRMDEALUPDATE', dealId));

    it('a won deal whose stage becomes a failure stage (STAGE_SEMANTIC_ID F): canceled, the comment says so', async () => {
      const deal = b24.addDeal({ contactId: String(b24Customer('Irina').ID) });
      b24.moveDeal(deal.ID, 'WON');
      expect((await hook(deal.ID)).status).toBe(200);
      const cascadeId = await startedCascade(b24Connector.id, deal.ID);
      b24.moveDeal(deal.ID, 'LOSE');
      expect((await hook(deal.ID)).status).toBe(200);
      await canceled(cascadeId);
      expect(await writtenBack(b24Connector.id, cascadeId)).toMatchObject({ reason: 'canceled', stop_reason: 'lost' });
      expect(b24.commentsOf(deal.ID).map((c) => c.COMMENT)).toEqual([expect.stringContaining('canceled: the deal was lost')]);
      await stack.settled(b24Connector.id);
      expect(await outcomes(b24Connector.id, deal.ID)).toEqual(['done:started', 'done:stopped']);
    });

    it('a deal that leaves S for an in-progress stage is canceled too; an edit of a still-won deal cancels nothing', async () => {
      const kept = b24.addDeal({ contactId: String(b24Customer('Kira').ID) });
      b24.moveDeal(kept.ID, 'WON');
      expect((await hook(kept.ID)).status).toBe(200);
      const keptCascade = await startedCascade(b24Connector.id, kept.ID);
      expect((await hook(kept.ID)).status).toBe(200);
      await stack.settled(b24Connector.id);
      expect(await outcomes(b24Connector.id, kept.ID)).toEqual(['done:started', 'done:duplicate']);
      expect((await recipientOf(keptCascade)).status).not.toBe('finished');

      const back = b24.addDeal({ contactId: String(b24Customer('Lev').ID) });
      b24.moveDeal(back.ID, 'WON');
      expect((await hook(back.ID)).status).toBe(200);
      const cascadeId = await startedCascade(b24Connector.id, back.ID);
      b24.moveDeal(back.ID, 'PREPARATION');
      expect((await hook(back.ID)).status).toBe(200);
      await canceled(cascadeId);
      expect(await writtenBack(b24Connector.id, cascadeId)).toMatchObject({ stop_reason: 'left_won' });
    });

    it('a deal lost while its event was missed is stopped by the reconciliation (crm.deal.list by @ID)', async () => {
      const deal = b24.addDeal({ contactId: String(b24Customer('Mila').ID) });
      b24.moveDeal(deal.ID, 'WON');
      expect((await hook(deal.ID)).status).toBe(200);
      const cascadeId = await startedCascade(b24Connector.id, deal.ID);
      b24.moveDeal(deal.ID, 'APOLOGY');
      await stack.grpc.runSync({ organizationId: stack.organizationId, id: b24Connector.id });
      await canceled(cascadeId);
      expect(await writtenBack(b24Connector.id, cascadeId)).toMatchObject({ stop_reason: 'lost' });
    });

    it('a deal with several contacts asks its primary contact (crm.deal.contact.items.get IS_PRIMARY), not the deprecated CONTACT_ID', async () => {
      const first = b24Customer('Nina');
      const primary = b24Customer('Oleg');
      const deal = b24.addDeal({ contacts: [{ id: String(first.ID) }, { id: String(primary.ID), primary: true }] });
      expect(deal.CONTACT_ID).toBe(String(first.ID));
      b24.moveDeal(deal.ID, 'WON');
      expect((await hook(deal.ID)).status).toBe(200);
      const cascadeId = await startedCascade(b24Connector.id, deal.ID);
      const step = await waitFor(() => stack.sender.received.find((s) => s.cascadeId === cascadeId), { what: 'the email to the primary contact', timeoutMs: 20_000 });
      expect(step.recipient).toMatchObject({ name: 'Oleg', email: 'oleg@example.com' });
      expect((await dealRow(b24Connector.id, deal.ID))[0].crm_contact_id).toBe(String(primary.ID));
      expect(b24.calls.some((c) => c.method === 'crm.deal.contact.items.get')).toBe(true);
    });

    it('a deal with only a company asks the company (crm.company.get), by its phone and email', async () => {
      const company = b24.addCompany({ title: 'Cafe Rassvet', phone: '+7 916 400-00-01', email: 'hello@rassvet.example' });
      const deal = b24.addDeal({ companyId: String(company.ID) });
      b24.moveDeal(deal.ID, 'WON');
      expect((await hook(deal.ID)).status).toBe(200);
      const cascadeId = await startedCascade(b24Connector.id, deal.ID);
      const step = await waitFor(() => stack.sender.received.find((s) => s.cascadeId === cascadeId), { what: 'the email to the company', timeoutMs: 20_000 });
      expect(step.recipient).toMatchObject({ name: 'Cafe Rassvet', email: 'hello@rassvet.example', phone: '+79164000001' });
      expect((await recipientOf(cascadeId)).contactExternalId).toBe(`bitrix24:company:${company.ID}`);
    });
  });
});
