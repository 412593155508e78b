import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestDatabase, FakeAmoCrm, testContext, waitFor, type TestDatabase } from '@rrs/testkit';
import { startAllInOne, type DevelopmentAllInOne } from '../src/launcher';

// The test gives a DATABASE_URL, so embedded PostgreSQL (an ES module jest cannot load) is never started.
jest.mock('../src/embeddedPostgres', () => ({
  startEmbeddedPostgres: () => Promise.reject(new Error('embedded PostgreSQL is not used in this test')),
}));

const PUBLIC_BASE = 'http://localhost:8080';
/** One flow minute: the demo flow's "SMS an hour later" comes 1.2 s after the email. */
const MINUTE_MS = 20;

/**
 * Issue 35, "Done when": a person goes through everything the service does with people (a won CRM deal,
 * the email, the SMS an hour later, a low rating with feedback, the webhook to the integrator, the
 * write-back to the CRM, a linked Telegram bot and its /stop opt-out), is erased through the public API,
 * and afterwards their email, phone and name are in no text, varchar, jsonb, bytea or array column of
 * any table of any schema of the database every service shares here, while the organization's counts
 * and ratings are the same and the opt-out still holds (docs/customer-respect.md, "Erasure in every
 * service").
 */
describe('all-in-one: erasing a person reaches every service', () => {
  let db: TestDatabase;
  let dir: string;
  let aio: DevelopmentAllInOne;
  let amo: FakeAmoCrm;
  let pool: Pool;
  let receiver: Server;
  const received: string[] = [];
  const ctx = testContext('aio-erasure');

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'rrs-aio-erase-'));
    amo = await FakeAmoCrm.start();
    receiver = createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        received.push(body);
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    aio = await startAllInOne({ host: '127.0.0.1', port: 0, dataDir: dir, databaseUrl: db.url, embeddedPostgresPort: 0, publicBaseUrl: PUBLIC_BASE, minuteMs: MINUTE_MS, allowHttpCrm: true, production: false, adminTokens: 'generate', opsHost: '127.0.0.1', opsPort: 0, logLevel: 'warn' }, ctx);
    ctx.health.setReady(true);
    pool = createPool({ url: db.url, schema: 'public' });
  });
  afterAll(async () => {
    await pool?.end();
    await ctx.stop();
    await amo?.close();
    await new Promise((resolve) => receiver?.close(resolve));
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${aio.url}/api/v1${path}`, { ...init, headers: { authorization: `Bearer ${aio.demo.apiKey}`, 'content-type': 'application/json', ...(init.headers ?? {}) } });
  const admin = (path: string, init: RequestInit = {}) =>
    fetch(`${aio.url}/admin/v1/organizations/${aio.demo.organizationId}${path}`, { ...init, headers: { authorization: `Bearer ${aio.demo.adminToken}`, 'content-type': 'application/json', ...(init.headers ?? {}) } });
  const inbox = async () => ((await (await fetch(`${aio.url}/dev/messages`)).json()) as { messages: Array<{ channel: string; to: string; text: string; link: string }> }).messages;
  const localPath = (link: string) => new URL(link).pathname + new URL(link).search;

  /** Every schema's text, varchar, jsonb, bytea and array columns holding `needle` (case-insensitive), as `schema.table.column`. */
  async function whereFound(needle: string): Promise<string[]> {
    const { rows: columns } = await pool.query<{ table_schema: string; table_name: string; column_name: string; data_type: string }>(
      `SELECT c.table_schema, c.table_name, c.column_name, c.data_type FROM information_schema.columns c JOIN information_schema.tables t USING (table_schema, table_name)
        WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema') AND t.table_type = 'BASE TABLE'
          AND c.data_type IN ('text', 'character varying', 'character', 'jsonb', 'json', 'bytea', 'ARRAY')`,
    );
    const found: string[] = [];
    for (const { table_schema: schema, table_name: table, column_name: column, data_type: type } of columns) {
      const asText = type === 'bytea' ? `encode("${column}", 'escape')` : `"${column}"::text`;
      const { rows } = await pool.query(`SELECT count(*)::int AS n FROM "${schema}"."${table}" WHERE position(lower($1) IN lower(${asText})) > 0`, [needle]);
      if (rows[0].n > 0) found.push(`${schema}.${table}.${column}`);
    }
    return found;
  }

  /** The organization's numbers: what the console and the API count. */
  async function statistics() {
    const { rows } = await pool.query(
      `SELECT (SELECT count(*)::int FROM scheduler.recipients) AS recipients, (SELECT count(*)::int FROM scheduler.ratings) AS ratings,
              (SELECT avg(rating)::float8 FROM scheduler.ratings) AS average, (SELECT count(*)::int FROM scheduler.feedback) AS feedback,
              (SELECT count(*)::int FROM scheduler.recipient_steps WHERE status = 'sent') AS sent,
              (SELECT count(*)::int FROM scheduler.review_requests) AS review_requests`,
    );
    return rows[0];
  }

  it('a person through a full cascade, erased, is in no column of any schema; the numbers stay and the opt-out holds', async () => {
    const person = { name: 'Zinaida Stiraemova', email: 'zinaida.stiraemova@example.com', phone: '+7 916 555-71-93' };
    const e164 = '+79165557193';
    const { locations } = (await (await api('/locations')).json()) as { locations: Array<{ id: string }> };

    // The integrator's endpoint, on this test's receiver (loopback http outside production).
    const hook = await api('/webhooks', { method: 'POST', headers: { 'idempotency-key': 'erase-hook' }, body: JSON.stringify({ url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`, events: ['cascade.recipient.finished', 'cascade.recipient.rated'] }) });
    expect(hook.status).toBe(201);

    // The CRM: a connector, and the person's deal won in amoCRM.
    const created = await admin('/connectors', { method: 'POST', body: JSON.stringify({ kind: 'amocrm', name: 'Sales', amocrm: { baseUrl: amo.url, longLivedToken: amo.issueLongLivedToken() }, locationId: locations[0].id }) });
    expect(created.status).toBe(201);
    const { connector, inboundUrl } = (await created.json()) as { connector: { id: string }; inboundUrl: string };
    await waitFor(async () => ((await (await admin(`/connectors/${connector.id}/status`)).json()) as { status: { lastSyncAt: string | null } }).status.lastSyncAt !== null, { what: "the connector's first reconciliation" });
    const contact = amo.addContact(person);
    const lead = amo.addLead({ contactId: contact.id });
    const hooked = await fetch(`${aio.url}${inboundUrl.slice(PUBLIC_BASE.length)}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: amo.moveLead(lead.id, 142) });
    expect(hooked.status).toBe(200);

    // The email, then the SMS an hour (of the fast clock) later, both in the dev inbox.
    const email = await waitFor(async () => (await inbox()).find((m) => m.channel === 'EMAIL' && m.to === person.email), { what: 'the email', timeoutMs: 30_000 });
    await waitFor(async () => (await inbox()).find((m) => m.channel === 'SMS' && m.to === e164), { what: 'the SMS', timeoutMs: 30_000 });

    // A low rating with feedback, on the form as a browser sends it.
    const formPath = localPath(email.link);
    const page = await fetch(`${aio.url}${formPath}`);
    const cookie = page.headers.get('set-cookie')!.split(';')[0];
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(await page.text())![1];
    const form = (path: string, fields: Record<string, string>) =>
      fetch(`${aio.url}${path}`, { method: 'POST', redirect: 'manual', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ csrf, ...fields }) });
    expect((await form(`${formPath}/rating`, { rating: '2' })).status).toBe(303);
    expect((await form(`${formPath}/feedback`, { text: 'Zinaida found the coffee cold' })).status).toBe(303);

    // The Telegram bot linked from the thank-you page, then /stop: the opt-out.
    const thanks = await (await fetch(`${aio.url}${formPath}`, { headers: { cookie } })).text();
    const botLink = /href="(http:\/\/localhost:8080\/dev\/bots\/telegram\?start=[A-Za-z0-9_-]{22})"/.exec(thanks)![1];
    const code = new URL(botLink).searchParams.get('start')!;
    expect((await fetch(`${aio.url}/dev/bots/telegram/start`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ code }) })).status).toBe(303);
    expect((await fetch(`${aio.url}/dev/bots/telegram/stop`, { method: 'POST', redirect: 'manual' })).status).toBe(303);

    // The finish event with the feedback reached the integrator and the CRM.
    await waitFor(() => received.some((body) => body.includes(person.email) && body.includes('coffee cold')), { what: 'the webhook delivered', timeoutMs: 30_000 });
    await waitFor(() => amo.notesOf(lead.id).some((note) => String(note.params.text).includes('coffee cold')), { what: 'the write-back to the lead', timeoutMs: 30_000 });
    await waitFor(async () => (await pool.query(`SELECT count(*)::int AS n FROM connectors.write_backs WHERE status = 'pending'`)).rows[0].n === 0, { what: 'the write-back settled' });
    await waitFor(async () => (await pool.query(`SELECT count(*)::int AS n FROM webhooks.deliveries WHERE status = 'pending'`)).rows[0].n === 0, { what: 'the delivery settled' });

    // Before: the person is in every service's tables (so the search below can find them).
    const before = await whereFound(person.email);
    for (const where of ['scheduler.recipients.email', 'contacts.contacts.email', 'webhooks.events.payload', 'webhooks.events.body']) expect(before).toContain(where);
    expect(await whereFound(e164)).toEqual(expect.arrayContaining(['channel_sms.send_log.address', 'channel_messenger.bot_chats.phone']));
    expect(await whereFound('coffee cold')).toEqual(expect.arrayContaining(['connectors.write_backs.feedback', 'scheduler.feedback.text']));
    const numbers = await statistics();

    const erase = await api('/people/erase', { method: 'POST', headers: { 'idempotency-key': 'erasure-1' }, body: JSON.stringify({ email: person.email, phone: person.phone }) });
    expect(erase.status).toBe(202);
    const { id } = (await erase.json()) as { id: string };
    const status = (await (await api(`/people/erasures/${id}`)).json()) as { status: string };
    expect(status.status).toBe('done');

    // The other services follow through the bus within seconds of `done`.
    const needles = [person.email, e164, e164.slice(1), person.phone, 'Zinaida', 'Stiraemova', 'coffee cold'];
    await waitFor(async () => {
      for (const needle of needles) if ((await whereFound(needle)).length > 0) return undefined;
      return true;
    }, { what: 'the person gone from every schema', timeoutMs: 30_000, intervalMs: 500 }).catch(() => undefined);
    for (const needle of needles) expect({ needle, found: await whereFound(needle) }).toEqual({ needle, found: [] });
    expect((await inbox()).filter((m) => m.to === person.email || m.to === e164 || m.text.includes('Zinaida'))).toEqual([]);

    // The numbers are the same; the opt-out holds: a new request to her phone is skipped, nothing sent.
    expect(await statistics()).toEqual(numbers);
    const again = await api('/channels/telegram/send', { method: 'POST', body: JSON.stringify({ locationId: locations[0].id, recipients: [{ name: 'Z', phone: person.phone }] }) });
    expect(again.status).toBe(202);
    const againId = ((await again.json()) as { id: string }).id;
    const skipped = await waitFor(async () => {
      const body = (await (await api(`/cascades/${againId}`)).json()) as { recipients: Array<{ steps: Array<{ status: string; reason: string | null }> }> };
      return body.recipients[0].steps[0].status === 'skipped' ? body.recipients[0].steps[0] : undefined;
    }, { what: 'the new request skipped' });
    expect(skipped.reason).toBe('opted_out');
  });
});
