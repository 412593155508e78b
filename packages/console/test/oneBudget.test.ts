import { FakeAmoCrm, FakeBitrix24, waitFor } from '@rrs/testkit';
import { addMember, startConsoleStack, type ConsoleStack, type Signed } from './consoleStack';

/**
 * One budget for every entry point (issue 28): on the real all-in-one with a small recipient budget
 * (RECIPIENT_QUOTA_STANDARD=1000/10: the day binds), the public API's four routes, the console by hand
 * and by CSV, an amoCRM won deal, a Bitrix24 won deal and the admin API's "reconcile now" all draw from
 * the organization's one budget — each success leaves the next one less — and once it is spent every one
 * of them is refused the same way (429 `recipient_quota_exceeded`, `Retry-After` and the RateLimit fields
 * on HTTP; a won deal waits in the inbox, not dropped), with nothing created.
 */
const DAY_BUDGET = 10;

describe('one recipient budget for every entry point', () => {
  let stack: ConsoleStack;
  let amo: FakeAmoCrm;
  let b24: FakeBitrix24;
  let owner: Signed;
  let orgId: string;
  let apiKey: string;
  let locationId: string;
  let amoConnector: { id: string; inboundUrl: string };
  let b24Connector: { id: string; inboundUrl: string };

  beforeAll(async () => {
    [amo, b24] = await Promise.all([FakeAmoCrm.start(), FakeBitrix24.start()]);
    stack = await startConsoleStack('one-budget', {
      allowHttpCrm: true,
      recipientQuotas: { trial: { perMinute: 20, perDay: 100 }, standard: { perMinute: 1000, perDay: DAY_BUDGET }, pro: { perMinute: 5000, perDay: 200_000 } },
    });
    const org = await stack.admin('POST', '/organizations', { name: 'Budget Coffee', plan: 'standard', emailConfirmed: true, defaultRegion: 'RU', timeZone: 'UTC', locale: 'en' });
    orgId = org.body.organization.id;
    apiKey = (await stack.admin('POST', `/organizations/${orgId}/api-keys`, { name: 'CRM' })).body.secret;
    locationId = (await stack.admin('POST', `/organizations/${orgId}/locations`, { name: 'Arbat', address: 'Arbat 1', city: 'Moscow', timeZone: 'UTC', reviewLinks: [] })).body.location.id;
    expect((await stack.admin('POST', `/organizations/${orgId}/flows`, { name: 'Email', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] })).status).toBe(201);
    expect((await stack.admin('PUT', `/organizations/${orgId}/channels/EMAIL`, { configured: true })).status).toBe(200);
    owner = await addMember(stack, orgId, 'budget-owner@example.com', 'owner');
    const connect = async (body: unknown) => {
      const r = await stack.admin('POST', `/organizations/${orgId}/connectors`, body);
      expect(r.status).toBe(201);
      // The inbound URL is on the all-in-one's port (PUBLIC_BASE_URL names another in tests).
      return { id: r.body.connector.id as string, inboundUrl: `${stack.aio.url}${new URL(r.body.inboundUrl).pathname}` };
    };
    amoConnector = await connect({ kind: 'amocrm', name: 'Sales', amocrm: { baseUrl: amo.url, longLivedToken: amo.issueLongLivedToken() }, locationId });
    b24Connector = await connect({ kind: 'bitrix24', name: 'Portal', bitrix24: { webhookUrl: b24.webhookUrl, applicationToken: b24.applicationToken }, locationId });
    // Each connector's first reconciliation runs at creation; let it end before deals are won.
    for (const c of [amoConnector, b24Connector]) await waitFor(async () => (await stack.admin('GET', `/organizations/${orgId}/connectors/${c.id}/status`)).body.status?.lastSyncAt != null, { what: 'the first pass', timeoutMs: 20_000 });
  }, 120_000);
  afterAll(async () => {
    await stack?.close();
    await Promise.all([amo?.close(), b24?.close()]);
  });

  const api = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
    const res = await fetch(`${stack.aio.url}/api/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as any, headers: res.headers };
  };
  const dayLeft = (headers: Headers) => Number(/"recipients-day";r=(\d+)/.exec(headers.get('ratelimit') ?? '')?.[1]);
  const counts = async () => {
    const [s] = await stack.schedulerSql(
      `SELECT (SELECT count(*)::int FROM cascades WHERE organization_id = $1) AS cascades, (SELECT count(*)::int FROM recipients r JOIN cascades c ON c.id = r.cascade_id WHERE c.organization_id = $1) AS recipients,
              (SELECT count(*)::int FROM review_requests WHERE organization_id = $1 AND recipient_id IS NULL) AS links`,
      [orgId],
    );
    const [c] = await stack.contactsSql('SELECT count(*)::int AS contacts FROM contacts WHERE organization_id = $1', [orgId]);
    return { ...s, ...c } as { cascades: number; recipients: number; links: number; contacts: number };
  };
  const crmEvents = (connectorId: string, dealId: string | number) =>
    stack.schedulerSql('SELECT status, outcome, last_error FROM connectors.crm_events WHERE connector_id = $1 AND deal_id = $2 ORDER BY id', [connectorId, String(dealId)]);
  const cascadesOf = async (externalId: string) => (await stack.schedulerSql('SELECT id FROM cascades WHERE organization_id = $1 AND external_id = $2', [orgId, externalId])).length;
  const person = (tag: string) => ({ name: tag, email: `${tag}@example.com` });

  const amoWon = (name: string, { hook }: { hook: boolean }) => {
    const contact = amo.addContact({ name, email: `${name.toLowerCase()}@example.com` });
    const lead = amo.addLead({ contactId: contact.id });
    const body = amo.moveLead(lead.id, 142);
    return { lead, send: hook ? () => fetch(amoConnector.inboundUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body }) : async () => undefined };
  };
  const b24Won = (name: string) => {
    const contact = b24.addContact({ name, email: `${name.toLowerCase()}@example.com` });
    const deal = b24.addDeal({ contactId: String(contact.ID) });
    b24.moveDeal(deal.ID, 'WON');
    return { deal, send: () => fetch(b24Connector.inboundUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: b24.eventBody('ONCRMDEALUPDATE', deal.ID) }) };
  };

  it('every entry point takes from the same budget: each success leaves the next one less', async () => {
    let left = DAY_BUDGET;
    const took = (n: number, headers?: Headers) => {
      left -= n;
      if (headers) expect(dayLeft(headers)).toBe(left);
    };
    // Public API ×4.
    const cascade = await api('/cascades', { locationId, recipients: [person('api-1')] });
    expect(cascade.status).toBe(202);
    took(1, cascade.headers);
    const contact = await api('/contacts', { externalId: 'c-1', ...person('api-2'), locationId, startCascade: true }, { 'idempotency-key': 'contact-1' });
    expect(contact.status).toBe(200);
    took(1, contact.headers);
    const send = await api('/channels/email/send', { locationId, recipients: [person('api-3')] });
    expect(send.status).toBe(202);
    took(1, send.headers);
    const link = await api('/review-requests', { locationId, customerName: 'Link' });
    expect(link.status).toBe(201);
    took(1, link.headers);
    // The console by hand.
    const byHand = await owner.call('POST', '/cascades', { body: { locationId, recipients: [person('console-1')] } });
    expect(byHand.status).toBe(202);
    took(1, byHand.headers);
    // The console's CSV upload: each part checked, then sent (packages/console/src/pages/CsvUpload.tsx).
    const part = { locationId, recipients: [person('csv-1'), person('csv-2')] };
    expect((await owner.call('POST', '/cascades/check', { body: part })).status).toBe(200);
    const csv = await owner.call('POST', '/cascades', { body: part, headers: { 'idempotency-key': 'csv-part-1' } });
    expect(csv.status).toBe(202);
    took(2, csv.headers);
    // An amoCRM won deal and a Bitrix24 won deal.
    const a = amoWon('Amo', { hook: true });
    expect((await a.send())!.status).toBe(200);
    await waitFor(async () => (await cascadesOf(`amocrm:lead:${a.lead.id}`)) === 1, { what: 'the amoCRM cascade', timeoutMs: 20_000 });
    took(1);
    const b = b24Won('Bitrix');
    expect((await b.send()).status).toBe(200);
    await waitFor(async () => (await cascadesOf(`bitrix24:deal:${b.deal.ID}`)) === 1, { what: 'the Bitrix24 cascade', timeoutMs: 20_000 });
    took(1);
    // The admin API's "reconcile now" finds a won lead whose webhook never came.
    const missed = amoWon('Missed', { hook: false });
    expect((await stack.admin('POST', `/organizations/${orgId}/connectors/${amoConnector.id}/sync`)).status).toBe(202);
    await waitFor(async () => (await cascadesOf(`amocrm:lead:${missed.lead.id}`)) === 1, { what: 'the reconciled cascade', timeoutMs: 20_000 });
    took(1);
    expect(left).toBe(0);
    // The budget's own record: every one of them counted in the organization's day.
    expect(await stack.schedulerSql('SELECT used FROM recipient_budgets WHERE organization_id = $1 AND window_seconds = 86400', [orgId])).toEqual([{ used: DAY_BUDGET }]);
  });

  it('once it is spent, every entry point is refused the same way and nothing is created', async () => {
    const before = await counts();
    const refused = (res: { status: number; body: any; headers: Headers }) => {
      expect(res.status).toBe(429);
      expect(res.body).toMatchObject({ code: 'recipient_quota_exceeded', quota: 'recipients-day', limit: DAY_BUDGET, remaining: 0 });
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(60);
      expect(dayLeft(res.headers)).toBe(0);
      expect(res.headers.get('ratelimit-policy')).toContain(`"recipients-day";q=${DAY_BUDGET};w=86400`);
      expect(res.body.windows).toBeUndefined();
    };
    refused(await api('/cascades', { locationId, recipients: [person('over-1')] }));
    refused(await api('/contacts', { externalId: 'c-over', ...person('over-2'), locationId, startCascade: true }));
    refused(await api('/channels/email/send', { locationId, recipients: [person('over-3')] }));
    refused(await api('/review-requests', { locationId, customerName: 'Over' }));
    refused(await owner.call('POST', '/cascades', { body: { locationId, recipients: [person('over-4')] } }));
    // The CSV page's check says it before a part is sent, and the send itself is refused.
    refused(await owner.call('POST', '/cascades/check', { body: { locationId, recipients: [person('over-5')] } }));
    refused(await owner.call('POST', '/cascades', { body: { locationId, recipients: [person('over-5')] }, headers: { 'idempotency-key': 'csv-part-2' } }));
    expect(await counts()).toEqual(before);

    // A replay is answered from its Idempotency-Key, not refused by the budget it already took (the dry run
    // of POST /contacts admits a start already saved under its key), and takes nothing.
    const replayed = await api('/contacts', { externalId: 'c-1', ...person('api-2'), locationId, startCascade: true }, { 'idempotency-key': 'contact-1' });
    expect([replayed.status, replayed.headers.get('idempotent-replayed')]).toEqual([200, 'true']);
    const csvAgain = await owner.call('POST', '/cascades', { body: { locationId, recipients: [person('csv-1'), person('csv-2')] }, headers: { 'idempotency-key': 'csv-part-1' } });
    expect([csvAgain.status, csvAgain.headers.get('idempotent-replayed')]).toEqual([202, 'true']);
    expect(await counts()).toEqual(before);

    // Won deals wait in the inbox with the reason (retried when the window ends, never given up), and start nothing.
    const a = amoWon('AmoOver', { hook: true });
    expect((await a.send())!.status).toBe(200);
    const b = b24Won('BitrixOver');
    expect((await b.send()).status).toBe(200);
    const missed = amoWon('MissedOver', { hook: false });
    expect((await stack.admin('POST', `/organizations/${orgId}/connectors/${amoConnector.id}/sync`)).status).toBe(202);
    for (const [connectorId, dealId] of [[amoConnector.id, a.lead.id], [b24Connector.id, b.deal.ID], [amoConnector.id, missed.lead.id]] as const) {
      const events = await waitFor(async () => {
        const rows = await crmEvents(connectorId, dealId);
        return rows.length > 0 && rows.every((e) => String(e.last_error).startsWith('recipient_quota_exceeded')) ? rows : undefined;
      }, { what: `the refused deal ${dealId}`, timeoutMs: 20_000 });
      expect(events.every((e) => e.status === 'pending')).toBe(true);
    }
    expect(await cascadesOf(`amocrm:lead:${a.lead.id}`)).toBe(0);
    expect(await cascadesOf(`bitrix24:deal:${b.deal.ID}`)).toBe(0);
    expect(await cascadesOf(`amocrm:lead:${missed.lead.id}`)).toBe(0);
    expect(await counts()).toEqual(before);
    // The console says why.
    const status = (await owner.call('GET', '/connectors')).body.connectors.find((c: { id: string }) => c.id === amoConnector.id).status;
    expect(status.lastError).toMatch(/recipients per day/);
  });
});
