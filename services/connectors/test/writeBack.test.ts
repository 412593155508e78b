import { eventsV1 } from '@rrs/proto';
import { FakeAmoCrm, FakeBitrix24, waitFor } from '@rrs/testkit';
import { recipientOutcomeOf } from '../src/writeBack';
import { reviewTokenOf, startConnectorStack, type ConnectorStack } from './support/stack';

/**
 * A won deal all the way to its rating on the deal: CRM webhook → cascade → the customer rates on the
 * review form (the scheduler's own Reviews) → `events.cascade.recipient.finished` on the real bus → the
 * connectors' consumer → a note and custom fields on the fake CRM's deal, once per event.
 */
describe('write-back of ratings to the deal', () => {
  let stack: ConnectorStack;
  let amo: FakeAmoCrm;
  let b24: FakeBitrix24;
  let amoConnector: { id: string; url: string };
  let b24Connector: { id: string; url: string };

  beforeAll(async () => {
    stack = await startConnectorStack();
    [amo, b24] = await Promise.all([FakeAmoCrm.start(), FakeBitrix24.start()]);
    const common = { organizationId: stack.organizationId, wonStages: [], locationId: stack.locationId, locationMapping: undefined, flowId: '' };
    const a = await stack.grpc.createConnector({
      ...common, kind: 'amocrm', name: 'amo',
      amocrm: { baseUrl: amo.url, longLivedToken: amo.issueLongLivedToken(), clientId: '', clientSecret: '', redirectUri: '', accessToken: '', refreshToken: '' }, bitrix24: undefined,
      writeBack: { note: true, ratingField: '777001', feedbackField: '777002', reasonField: '777003' },
    });
    const b = await stack.grpc.createConnector({
      ...common, kind: 'bitrix24', name: 'b24', amocrm: undefined, bitrix24: { webhookUrl: b24.webhookUrl, applicationToken: b24.applicationToken },
      writeBack: { note: true, ratingField: 'UF_CRM_RATING', feedbackField: '', reasonField: '' },
    });
    amoConnector = { id: a.connector!.id, url: a.inboundUrl };
    b24Connector = { id: b.connector!.id, url: b.inboundUrl };
    await Promise.all([stack.firstPass(amoConnector.id), stack.firstPass(b24Connector.id)]);
  });
  afterAll(async () => {
    await stack?.close();
    await Promise.all([amo?.close(), b24?.close()]);
  });

  const cascadeOfDeal = (connectorId: string, dealId: string) =>
    waitFor(async () => (await stack.pool.query<{ cascade_id: string }>('SELECT cascade_id FROM deal_cascades WHERE connector_id = $1 AND deal_id = $2', [connectorId, dealId])).rows[0]?.cascade_id, {
      what: `the cascade of deal ${dealId}`,
      timeoutMs: 20_000,
    });
  const finishedEvent = (cascadeId: string) =>
    waitFor(() => stack.events.find((e) => e.event.payload?.$case === 'cascadeRecipientFinished' && e.event.payload.cascadeRecipientFinished.cascadeId === cascadeId), {
      what: 'the finish event',
      timeoutMs: 20_000,
    });
  const writeBacks = async (connectorId: string) =>
    (await stack.pool.query('SELECT event_id, event_type, status, note_done, fields_done FROM write_backs WHERE connector_id = $1 ORDER BY created_at', [connectorId])).rows;
  const consumerDone = () => waitFor(async () => (await stack.tb.bus.pending('EVENTS', 'connectors')) === 0, { what: 'the connectors consumer to catch up' });
  const fieldsOf = (leadId: number) => Object.fromEntries((amo.leads.get(leadId)!.custom_fields_values ?? []).map((f) => [f.field_id, f.values[0].value]));

  let lead: { id: number };
  let cascadeId: string;
  let finished: { event: eventsV1.Event; data: Uint8Array };

  it('amoCRM: the rating, the private feedback and the finish reason land on the lead as a note and custom fields', async () => {
    const contact = amo.addContact({ name: 'Anna', email: 'anna@example.com' });
    lead = amo.addLead({ contactId: contact.id });
    expect((await stack.hook(amoConnector.url, amo.moveLead(lead.id, 142))).status).toBe(200);
    cascadeId = await cascadeOfDeal(amoConnector.id, String(lead.id));
    const token = await reviewTokenOf(stack, cascadeId);
    await stack.scheduler.reviews.submitRating(token, 2);
    await stack.scheduler.reviews.submitFeedback(token, 'Coffee was cold');
    finished = await finishedEvent(cascadeId);
    await waitFor(async () => (await writeBacks(amoConnector.id))[0]?.status === 'done', { what: 'the write-back', timeoutMs: 20_000 });
    const notes = amo.notesOf(lead.id);
    expect(notes).toHaveLength(1);
    expect(notes[0].params.text).toBe(`Review request\nRating: 2/5 ★★☆☆☆\nPrivate feedback: Coffee was cold\nOutcome: the customer rated\n[rrs:${finished.event.id}]`);
    expect(fieldsOf(lead.id)).toEqual({ 777001: 2, 777002: 'Coffee was cold', 777003: 'rated' });
    const { status } = await stack.grpc.getConnectorStatus({ organizationId: stack.organizationId, id: amoConnector.id });
    expect(status).toMatchObject({ writeBacksDone: 1, writeBacksPending: 0, writeBacksFailed: 0, cascadesStarted: 1 });
  });

  it('a redelivered event writes nothing twice', async () => {
    const notesBefore = amo.notesOf(lead.id).length;
    const requestsBefore = amo.requests.length;
    // The same event again on the bus (as after a consumer crash before its ack), past JetStream's duplicate window id.
    await stack.tb.bus.publish('events.cascade.recipient.finished', finished.data, { msgId: `${finished.event.id}:again` });
    await consumerDone();
    await new Promise((r) => setTimeout(r, 300));
    expect(amo.notesOf(lead.id)).toHaveLength(notesBefore);
    expect(amo.requests.length).toBe(requestsBefore);
    expect(await writeBacks(amoConnector.id)).toEqual([{ event_id: finished.event.id, event_type: 'cascade.recipient.finished', status: 'done', note_done: true, fields_done: true }]);
  });

  it('a retry after the CRM took the note but the log did not record it finds the note instead of adding another', async () => {
    const eventId = `crash-${Date.now()}`;
    // The log after a first attempt (attempts = 1) that died between the CRM's answer and its mark.
    await stack.pool.query(
      `INSERT INTO write_backs (event_id, connector_id, deal_id, event_type, cascade_id, rating, feedback, reason, occurred_at, attempts)
       VALUES ($1, $2, $3, 'cascade.recipient.finished', $4, 4, '', 'rated', now(), 1)`,
      [eventId, amoConnector.id, String(lead.id), cascadeId],
    );
    // The note of that attempt is already on the lead.
    amo.notes.push({ id: 1, entity_id: lead.id, note_type: 'common', params: { text: `Review request\nRating: 4/5\n[rrs:${eventId}]` }, created_at: 0 });
    const count = amo.notesOf(lead.id).length;
    await stack.pool.query(`SELECT pg_notify('connectors_write_back', '')`);
    await waitFor(async () => (await stack.pool.query('SELECT status FROM write_backs WHERE event_id = $1', [eventId])).rows[0].status === 'done', { what: 'the retried write-back' });
    expect(amo.notesOf(lead.id)).toHaveLength(count);
    expect(fieldsOf(lead.id)[777001]).toBe(4);
  });

  it('a late rating (cascade.recipient.rated) is written too', async () => {
    const bytes = eventsV1.Event.encode({
      id: `late-${Date.now()}`, type: 'cascade.recipient.rated', organizationId: stack.organizationId, occurredAt: new Date(),
      payload: { $case: 'cascadeRecipientFinished', cascadeRecipientFinished: { ...eventsV1.CascadeRecipientFinished.fromPartial({}), cascadeId, rating: 5, reason: 'exhausted', feedback: '' } },
    }).finish();
    const decoded = eventsV1.Event.decode(bytes);
    expect(recipientOutcomeOf(decoded)).toMatchObject({ cascadeId, rating: 5 });
    const count = amo.notesOf(lead.id).length;
    await stack.tb.bus.publish('events.cascade.recipient.rated', bytes, { msgId: decoded.id });
    await waitFor(() => amo.notesOf(lead.id).length === count + 1, { what: 'the late-rating note', timeoutMs: 20_000 });
    expect(amo.notesOf(lead.id)[count].params.text).toBe(`Review request: rated after it finished\nRating: 5/5 ★★★★★\nOutcome: no answer after the last message\n[rrs:${decoded.id}]`);
    await waitFor(() => fieldsOf(lead.id)[777001] === 5, { what: 'the rating field of the late rating' });
  });

  it('events of cascades no connector started are acked and not kept', async () => {
    const before = (await stack.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM write_backs')).rows[0].n;
    const other = eventsV1.Event.encode({
      id: `foreign-${Date.now()}`, type: 'cascade.recipient.finished', organizationId: stack.organizationId, occurredAt: new Date(),
      payload: { $case: 'cascadeRecipientFinished', cascadeRecipientFinished: { ...eventsV1.CascadeRecipientFinished.fromPartial({}), cascadeId: '0190e0e0-0000-7000-8000-00000000ffff', rating: 5, reason: 'rated' } },
    }).finish();
    await stack.tb.bus.publish('events.cascade.recipient.finished', other, { msgId: `foreign-${Date.now()}` });
    await consumerDone();
    expect((await stack.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM write_backs')).rows[0].n).toBe(before);
  });

  it('Bitrix24: the rating lands as a timeline comment and the rating field', async () => {
    const contact = b24.addContact({ name: 'Irina', email: 'irina@example.com' });
    const deal = b24.addDeal({ contactId: String(contact.ID) });
    b24.moveDeal(deal.ID, 'WON');
    expect((await stack.hook(b24Connector.url, b24.eventBody('ONCRMDEALUPDATE', deal.ID))).status).toBe(200);
    const id = await cascadeOfDeal(b24Connector.id, deal.ID);
    await stack.scheduler.reviews.submitRating(await reviewTokenOf(stack, id), 5);
    const event = await finishedEvent(id);
    await waitFor(() => b24.commentsOf(deal.ID).length === 1, { what: 'the comment', timeoutMs: 20_000 });
    expect(b24.commentsOf(deal.ID)[0].COMMENT).toBe(`Review request\nRating: 5/5 ★★★★★\nOutcome: the customer rated\n[rrs:${event.event.id}]`);
    await waitFor(() => b24.deals.get(deal.ID)!.UF_CRM_RATING === 5, { what: 'the rating field' });
    expect(b24.calls.filter((c) => c.method === 'crm.deal.update')).toHaveLength(1);
  });
});
