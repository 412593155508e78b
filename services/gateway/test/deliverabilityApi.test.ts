import { generateKeyPairSync } from 'node:crypto';
import { buildConfig as buildEmailConfig, startEmailSender } from '@rrs/channel-email';
import { startContacts, type RunningContacts } from '@rrs/contacts';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, startFakeDnsServer, startSmtpSink, testContext, waitFor, type FakeDnsServer, type SmtpSink, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startChannelCatalog, startGateway, type RunningChannelCatalog } from '../src';

const TOKEN = 'adm_deliverability_test_token_0123';
const rsaPem = () => generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;

/**
 * The deliverability check over HTTP (issue 29): a real channel-email, signing with two DKIM selectors,
 * announces its sender domain in the catalog; the gateway looks it up in DNS (DNS_RESOLVER → a local DNS
 * server) for the admin API and for the console's Channels page (any signed-in member).
 */
describe('GET /admin/v1/deliverability and /account/v1/channels/email/deliverability', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let smtp: SmtpSink;
  let dns: FakeDnsServer;
  let contacts: RunningContacts;
  let catalog: RunningChannelCatalog;
  let base: string;
  let keys: Array<{ selector: string; publicKey: string }>;
  const ctx = testContext('gateway-deliverability');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: 'channel_email' });
    smtp = await startSmtpSink();
    const emailConfig = buildEmailConfig({
      NODE_ENV: 'production', DATABASE_URL: db.url, SMTP_URL: smtp.url, EMAIL_FROM: 'Shop Reviews <reviews@shop.example>',
      DKIM_SELECTORS: 'rrs2026,rrs2025', DKIM_PRIVATE_KEYS: rsaPem() + rsaPem(), EMAIL_SPF: 'include:_spf.mailer.example',
    });
    keys = emailConfig.authentication.dkim!.keys.map((k) => ({ selector: k.selector, publicKey: k.publicKey }));
    dns = await startFakeDnsServer({
      'shop.example': { TXT: ['v=spf1 include:_spf.mailer.example -all'] },
      'rrs2026._domainkey.shop.example': { TXT: [`v=DKIM1; k=rsa; p=${keys[0].publicKey}`] },
    });
    await startEmailSender({ ...emailConfig, concurrency: 2 }, ctx, { bus: tb.bus, pool });
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    catalog = await startChannelCatalog({ bus: tb.bus, logger: ctx.logger });
    ctx.lifecycle.onStop('catalog', () => catalog.stop());
    const gateway = await startGateway(
      { host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: '127.0.0.1:1', publicBaseUrl: 'http://localhost', adminTokens: [TOKEN], dnsServers: [dns.address] },
      ctx,
      { channelCatalog: catalog },
    );
    ctx.health.setReady(true);
    base = gateway.url;
    await waitFor(() => catalog.list().some((entry) => entry.key === 'EMAIL'), { what: 'the email sender in the catalog' });
  });
  afterAll(async () => {
    await ctx.stop();
    await pool.end();
    await smtp.close();
    await dns.close();
    await tb.cleanup();
    await db.drop();
  });

  const admin = async (path: string) => {
    const res = await fetch(`${base}/admin/v1${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    return { status: res.status, body: (await res.json()) as any };
  };

  it('checks the running sender domain in DNS now, each check with the record to publish', async () => {
    const first = await admin('/deliverability');
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ domain: 'shop.example', passed: false, checkedAt: expect.any(String) });
    expect(first.body.checks.map((c: any) => [c.check, c.selector, c.status, c.record])).toEqual([
      ['spf', null, 'pass', 'v=spf1 include:_spf.mailer.example -all'],
      ['dkim', 'rrs2026', 'pass', `v=DKIM1; k=rsa; p=${keys[0].publicKey}`],
      ['dkim', 'rrs2025', 'fail', `v=DKIM1; k=rsa; p=${keys[1].publicKey}`],
      ['dmarc', null, 'fail', 'v=DMARC1; p=none'],
    ]);

    // The operator publishes what it said: the next check passes (DNS is asked each time).
    dns.set('rrs2025._domainkey.shop.example', { TXT: [first.body.checks[2].record] });
    dns.set('_dmarc.shop.example', { TXT: [first.body.checks[3].record] });
    const again = await admin('/deliverability');
    expect(again.body.passed).toBe(true);
    expect(again.body.checks.map((c: any) => c.status)).toEqual(['pass', 'pass', 'pass', 'pass']);
  });

  it("shows the same check to any signed-in member on the console's Channels page, a viewer too", async () => {
    const organization = await contacts.directory.createOrganization({ name: 'Shop', plan: 'standard', emailConfirmed: true });
    await contacts.members.ensureMember({ organizationId: organization.id, email: 'viewer@shop.example', role: 'viewer', password: 'viewer-password-1' });
    const signIn = await fetch(`${base}/account/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'viewer@shop.example', password: 'viewer-password-1' }) });
    const cookie = signIn.headers.get('set-cookie')!.split(';')[0];
    const res = await fetch(`${base}/account/v1/channels/email/deliverability`, { headers: { cookie } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    expect(body).toMatchObject({ domain: 'shop.example' });
    expect(body.checks.map((c: any) => c.check)).toEqual(['spf', 'dkim', 'dkim', 'dmarc']);
    expect((await fetch(`${base}/account/v1/channels/email/deliverability`)).status).toBe(401);
  });

  it('needs the admin token, and answers 409 email_sender_not_running without a running email sender', async () => {
    expect((await fetch(`${base}/admin/v1/deliverability`)).status).toBe(401);
    const other = testContext('gateway-deliverability-empty');
    try {
      const lonely = await startGateway({ host: '127.0.0.1', port: 0, contactsAddress: '127.0.0.1:1', schedulerAddress: '127.0.0.1:1', publicBaseUrl: 'http://localhost', adminTokens: [TOKEN], dnsServers: [dns.address] }, other);
      const res = await fetch(`${lonely.url}/admin/v1/deliverability`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(409);
      expect(await res.json()).toMatchObject({ code: 'email_sender_not_running' });
    } finally {
      await other.stop();
    }
  });
});
