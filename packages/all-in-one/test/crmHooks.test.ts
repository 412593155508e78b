import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestDatabase, FakeAmoCrm, testContext, waitFor, type TestDatabase } from '@rrs/testkit';
import { CONNECTOR_KEY_FILE } from '../src/connectorKeys';
import { startAllInOne, type DevelopmentAllInOne } from '../src/launcher';

// The test gives a DATABASE_URL, so embedded PostgreSQL (an ES module jest cannot load) is never started.
jest.mock('../src/embeddedPostgres', () => ({
  startEmbeddedPostgres: () => Promise.reject(new Error('embedded PostgreSQL is not used in this test')),
}));

/**
 * The connectors in the all-in-one: the CRMs' webhooks are served on the one HTTP port at `/hooks/crm/*`
 * and reach the connectors service (docs/connectors.md, "What is verified at the inbound URL"), which
 * turns a won deal into a review request like any other.
 */
describe('all-in-one: CRM webhooks on the main port', () => {
  const PUBLIC_BASE = 'http://localhost:8080';
  let db: TestDatabase;
  let dir: string;
  let aio: DevelopmentAllInOne;
  let amo: FakeAmoCrm;
  let pool: Pool;
  const ctx = testContext('aio-crm');

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'rrs-aio-crm-'));
    amo = await FakeAmoCrm.start();
    // No CONNECTOR_SECRET_KEYS: the all-in-one makes its key in the data folder. Plain-http CRMs (the fake) as outside production.
    aio = await startAllInOne({ host: '127.0.0.1', port: 0, dataDir: dir, databaseUrl: db.url, embeddedPostgresPort: 0, publicBaseUrl: PUBLIC_BASE, minuteMs: 60_000, allowHttpCrm: true, production: false, adminTokens: 'generate', opsHost: '127.0.0.1', opsPort: 0, logLevel: 'warn' }, ctx);
    ctx.health.setReady(true);
    pool = createPool({ url: db.url, schema: 'connectors' });
  });
  afterAll(async () => {
    await pool?.end();
    await ctx.stop();
    await amo?.close();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const storedEvents = async () => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM crm_events')).rows[0].n;
  const post = (path: string, body: string) => fetch(`${aio.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });

  it('answers a webhook for an unknown connector 404 not_found, from the connectors service, and keeps nothing', async () => {
    const path = `/hooks/crm/${randomUUID()}/${randomBytes(32).toString('base64url')}`;
    const res = await post(path, 'leads[status][0][id]=1&leads[status][0][status_id]=142');
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(await res.json()).toEqual({ code: 'not_found', detail: 'no such hook' });
    const get = await fetch(`${aio.url}${path}`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    expect(await get.json()).toMatchObject({ code: 'method_not_allowed' });
    expect(await storedEvents()).toBe(0);
  });

  it('leaves every other path to the gateway', async () => {
    const res = await fetch(`${aio.url}/hooks/other`);
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  });

  it('turns a won amoCRM lead posted to the inbound URL into a review request whose email reaches the dev inbox; the rating is written back to the lead', async () => {
    const { locations } = (await (await fetch(`${aio.url}/api/v1/locations`, { headers: { authorization: `Bearer ${aio.demo.apiKey}` } })).json()) as { locations: Array<{ id: string }> };
    // Created the way an operator does: the gateway's admin API, reaching the in-process connectors over loopback gRPC.
    const created = await fetch(`${aio.url}/admin/v1/organizations/${aio.demo.organizationId}/connectors`, {
      method: 'POST',
      headers: { authorization: `Bearer ${aio.demo.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'amocrm', name: 'Sales', amocrm: { baseUrl: amo.url, longLivedToken: amo.issueLongLivedToken() }, locationId: locations[0].id }),
    });
    expect(created.status).toBe(201);
    const { connector, inboundUrl } = (await created.json()) as { connector: { id: string }; inboundUrl: string };
    // The inbound URL handed to the CRM is on the all-in-one's public base, where this test's server stands in.
    expect(inboundUrl.startsWith(`${PUBLIC_BASE}/hooks/crm/${connector.id}/`)).toBe(true);
    const inboundPath = inboundUrl.slice(PUBLIC_BASE.length);
    // The connector's first reconciliation runs at creation: let it end, or it may find the lead below as well.
    await waitFor(async () => {
      const res = await fetch(`${aio.url}/admin/v1/organizations/${aio.demo.organizationId}/connectors/${connector.id}/status`, { headers: { authorization: `Bearer ${aio.demo.adminToken}` } });
      return ((await res.json()) as { status: { lastSyncAt: string | null } }).status.lastSyncAt !== null;
    }, { what: "the connector's first reconciliation" });

    const contact = amo.addContact({ name: 'Ivan', email: 'ivan.crm@example.com', phone: '+7 916 555-01-02' });
    const lead = amo.addLead({ contactId: contact.id });
    const res = await post(inboundPath, amo.moveLead(lead.id, 142));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ accepted: 1 });

    const email = await waitFor(
      async () => {
        const body = (await (await fetch(`${aio.url}/dev/messages?to=ivan.crm@example.com`)).json()) as { messages: Array<{ channel: string; to: string; link: string }> };
        return body.messages[0];
      },
      { what: 'the email of the CRM deal in the dev inbox', timeoutMs: 30_000 },
    );
    expect(email).toMatchObject({ channel: 'EMAIL', to: 'ivan.crm@example.com', link: expect.stringMatching(/^http:\/\/localhost:8080\/r\/\w+$/) });
    expect(await storedEvents()).toBe(1);

    // The customer rates on the form, as a browser does (the page's CSRF cookie and field), and the
    // rating goes back to the lead as a note: the whole way from a won deal to the CRM.
    const formPath = email.link.slice(PUBLIC_BASE.length);
    const page = await fetch(`${aio.url}${formPath}`);
    const cookie = page.headers.get('set-cookie')!.split(';')[0];
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(await page.text())![1];
    const rated = await fetch(`${aio.url}${formPath}/rating`, {
      method: 'POST', redirect: 'manual', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ csrf, rating: '5' }),
    });
    expect(rated.status).toBe(303);
    const [note] = await waitFor(() => (amo.notesOf(lead.id).length ? amo.notesOf(lead.id) : undefined), { what: 'the rating written back to the lead', timeoutMs: 30_000 });
    expect(note.params.text).toContain('5');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(amo.notesOf(lead.id)).toHaveLength(1);
  });

  it('keeps the key it generated in the data folder, readable by its owner only', () => {
    expect(statSync(join(dir, CONNECTOR_KEY_FILE)).mode & 0o777).toBe(0o600);
  });
});
