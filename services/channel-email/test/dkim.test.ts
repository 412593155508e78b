import { generateKeyPairSync } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import { busV1 } from '@rrs/proto';
import { ConfigError, createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, startFakeDnsServer, startSmtpSink, testContext, waitFor, type FakeDnsServer, type SmtpSink, type TestBus, type TestDatabase } from '@rrs/testkit';
import { collectResults, dueStep, publishStep } from '../../../packages/sender-kit/test/support/steps';
import { buildConfig, startEmailSender } from '../src';
import { dkimRecord } from '../src/dkim';

// mailauth (by nodemailer's authors) verifies DKIM, SPF and DMARC as a receiving server does.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { authenticate } = require('mailauth') as {
  authenticate(message: Buffer, options: { ip: string; helo: string; sender: string; mta: string; resolver: (name: string, type: string) => Promise<unknown>; disableArc?: boolean; disableBimi?: boolean }): Promise<{
    dkim: { results: Array<{ signingDomain: string; selector: string; status: { result: string } }> };
    spf: { status: { result: string } };
    dmarc: { status: { result: string } };
  }>;
};

const rsaPem = (bits = 2048) => generateKeyPairSync('rsa', { modulusLength: bits }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;

/**
 * DKIM signing of every SMTP message (issue 29): the message a real SMTP server receives carries a
 * signature per selector that a receiving server's checks (mailauth) verify against the keys published
 * in DNS (a local DNS server), and with SPF and DMARC records it passes DMARC, as Gmail and Microsoft ask.
 */
describe('channel-email signs every SMTP message with DKIM', () => {
  const current = rsaPem();
  const previous = rsaPem();
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let smtp: SmtpSink;
  let dns: FakeDnsServer;
  let resolver: Resolver;
  const ctx = testContext('email-dkim');
  let results: busV1.StepResult[];
  const env = (extra: Record<string, string> = {}) => ({
    NODE_ENV: 'production', DATABASE_URL: 'postgres://u@localhost/db', SMTP_URL: smtp.url, EMAIL_FROM: 'Acme Reviews <reviews@acme.example>',
    DKIM_SELECTORS: 'rrs2026,rrs2025', DKIM_PRIVATE_KEYS: `${current}${previous}`, ...extra,
  });

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: 'channel_email' });
    smtp = await startSmtpSink();
    const config = buildConfig({ ...env(), DATABASE_URL: db.url });
    const [currentKey, previousKey] = config.authentication.dkim!.keys;
    dns = await startFakeDnsServer({
      'rrs2026._domainkey.acme.example': { TXT: [dkimRecord(currentKey.publicKey)] },
      'rrs2025._domainkey.acme.example': { TXT: [dkimRecord(previousKey.publicKey)] },
      'acme.example': { TXT: ['v=spf1 ip4:127.0.0.1 -all'] },
      '_dmarc.acme.example': { TXT: ['v=DMARC1; p=reject'] },
    });
    resolver = new Resolver({ timeout: 2_000, tries: 2 });
    resolver.setServers([dns.address]);
    results = (await collectResults(tb.bus)).results;
    await startEmailSender({ ...config, concurrency: 4, ackWaitMs: 5_000 }, ctx, { bus: tb.bus, pool });
  });
  afterAll(async () => {
    await ctx.stop();
    await pool.end();
    await smtp.close();
    await dns.close();
    await tb.cleanup();
    await db.drop();
  });

  const receive = async (to: string) => {
    const step = dueStep('EMAIL', { recipient: { name: 'Anna', email: to, phone: '' } });
    await publishStep(tb.bus, step);
    await waitFor(() => results.find((r) => r.stepId === step.stepId), { what: 'the step result' });
    return smtp.messages.find((m) => m.to.includes(to))!;
  };
  const check = (raw: Buffer) => authenticate(raw, { ip: '127.0.0.1', helo: 'mail.acme.example', sender: 'reviews@acme.example', mta: 'mx.receiver.example', resolver: (name, type) => resolver.resolve(name, type), disableArc: true, disableBimi: true });

  it('signs with each listed selector; a receiver verifies both against DNS, and SPF and DMARC pass', async () => {
    const message = await receive('dkim-anna@example.com');
    const raw = message.raw!;
    expect(raw.toString('latin1').startsWith('DKIM-Signature:')).toBe(true);
    const verdict = await check(raw);
    expect(verdict.dkim.results.map((r) => [r.signingDomain, r.selector, r.status.result])).toEqual([
      ['acme.example', 'rrs2026', 'pass'],
      ['acme.example', 'rrs2025', 'pass'],
    ]);
    expect(verdict.spf.status.result).toBe('pass');
    expect(verdict.dmarc.status.result).toBe('pass');
    // The one-click unsubscribe headers are under the signature (Gmail asks for it).
    expect(raw.toString('latin1')).toMatch(/h=[^;]*list-unsubscribe:list-unsubscribe-post/i);
  });

  it('fails verification when a signed header is changed on the way (the test can fail)', async () => {
    const raw = (await receive('dkim-boris@example.com')).raw!.toString('latin1');
    const tampered = Buffer.from(raw.replace(/^Subject: .*$/m, 'Subject: You won a prize'), 'latin1');
    const verdict = await check(tampered);
    expect(verdict.dkim.results.map((r) => r.status.result)).toEqual(['fail', 'fail']);
  });

  it('keeps verifying with one selector once the old key is gone from DNS (rotation)', async () => {
    dns.set('rrs2025._domainkey.acme.example', undefined);
    try {
      const verdict = await check((await receive('dkim-vera@example.com')).raw!);
      expect(verdict.dkim.results.map((r) => [r.selector, r.status.result])).toEqual([['rrs2026', 'pass'], ['rrs2025', 'neutral']]);
      expect(verdict.dmarc.status.result).toBe('pass');
    } finally {
      const config = buildConfig(env());
      dns.set('rrs2025._domainkey.acme.example', { TXT: [dkimRecord(config.authentication.dkim!.keys[1].publicKey)] });
    }
  });
});

describe('channel-email DKIM settings', () => {
  const key = rsaPem();
  const base = { DATABASE_URL: 'postgres://u@localhost/db', EMAIL_FROM: 'Reviews <reviews@shop.example>' };
  const refusal = (env: Record<string, string>): ConfigError | undefined => {
    try {
      buildConfig(env);
    } catch (err) {
      if (err instanceof ConfigError) return err;
      throw err;
    }
    return undefined;
  };

  it('refuses SMTP without DKIM in production, naming the variables; the relay opt-out or keys make it start', () => {
    const smtp = { ...base, NODE_ENV: 'production', SMTP_URL: 'smtp://mail.shop.example:587' };
    const refused = refusal(smtp);
    expect(refused).toMatchObject({ variable: 'DKIM_PRIVATE_KEYS' });
    expect(refused!.message).toMatch(/DKIM_SELECTORS.*DKIM_SIGNED_BY_RELAY=true/);
    expect(buildConfig({ ...smtp, DKIM_SIGNED_BY_RELAY: 'true' }).authentication).toMatchObject({ dkim: undefined, dkimSignedByRelay: true });
    expect(buildConfig({ ...smtp, DKIM_SELECTORS: 'rrs1', DKIM_PRIVATE_KEYS: key }).authentication.dkim).toMatchObject({ domain: 'shop.example', keys: [{ selector: 'rrs1' }] });
    // Outside production, or with Postmark only (it signs), nothing is required.
    expect(refusal({ ...smtp, NODE_ENV: 'development' })).toBeUndefined();
    expect(refusal({ ...base, NODE_ENV: 'production', POSTMARK_SERVER_TOKEN: 'token' })).toBeUndefined();
  });

  it('reads the d= domain from DKIM_DOMAIN, the From domain by default, and the SPF terms from EMAIL_SPF, `a:<SMTP host>` by default', () => {
    const smtp = { ...base, SMTP_URL: 'smtp://mail.shop.example:587', DKIM_SELECTORS: 'rrs1', DKIM_PRIVATE_KEYS: key };
    expect(buildConfig(smtp).authentication).toMatchObject({ domain: 'shop.example', dkim: { domain: 'shop.example' }, spfTerms: ['a:mail.shop.example'] });
    expect(buildConfig({ ...smtp, DKIM_DOMAIN: 'mail.shop.example', EMAIL_SPF: 'include:_spf.mail.ru ip4:203.0.113.7' }).authentication).toMatchObject({ dkim: { domain: 'mail.shop.example' }, spfTerms: ['include:_spf.mail.ru', 'ip4:203.0.113.7'] });
    // A PEM written with literal \n (an .env file) is read the same.
    expect(buildConfig({ ...smtp, DKIM_PRIVATE_KEYS: key.replace(/\n/g, '\\n') }).authentication.dkim!.keys[0].publicKey).toBe(buildConfig(smtp).authentication.dkim!.keys[0].publicKey);
  });

  it.each([
    ['DKIM_PRIVATE_KEYS', { DKIM_SELECTORS: 'rrs1' }],
    ['DKIM_SELECTORS', { DKIM_PRIVATE_KEYS: 'x' }],
    ['DKIM_SELECTORS', { DKIM_SELECTORS: 'a,b,c', DKIM_PRIVATE_KEYS: 'x' }],
    ['DKIM_SELECTORS', { DKIM_SELECTORS: 'bad selector', DKIM_PRIVATE_KEYS: 'x' }],
    ['DKIM_PRIVATE_KEYS', { DKIM_SELECTORS: 'new,old', DKIM_PRIVATE_KEYS: 'only one key' }],
    ['DKIM_PRIVATE_KEYS', { DKIM_SELECTORS: 'rrs1', DKIM_PRIVATE_KEYS: '-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----' }],
    ['DKIM_PRIVATE_KEYS', { DKIM_SELECTORS: 'rrs1', DKIM_PRIVATE_KEYS: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string }],
    ['DKIM_PRIVATE_KEYS', { DKIM_SELECTORS: 'rrs1', DKIM_PRIVATE_KEYS: rsaPem(512) }],
    ['DKIM_SIGNED_BY_RELAY', { DKIM_SELECTORS: 'rrs1', DKIM_PRIVATE_KEYS: key, DKIM_SIGNED_BY_RELAY: 'true' }],
    ['DKIM_DOMAIN', { DKIM_DOMAIN: 'shop.example' }],
    ['EMAIL_SPF', { EMAIL_SPF: 'include:_spf.mail.ru v=spf1' }],
  ])('names %s when it is wrong', (variable, extra) => {
    expect(refusal({ ...base, SMTP_URL: 'smtp://mail.shop.example:587', ...extra })).toMatchObject({ variable });
  });
});
