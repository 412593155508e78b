import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Redis from 'ioredis';
import { ConfigError } from '@rrs/runtime';
import { createTestDatabase, startFakeSmsc, startSmtpSink, testContext, TEST_REDIS_URL, waitFor, type FakeSmsc, type SmtpSink, type TestDatabase } from '@rrs/testkit';
import { buildConfig } from '../src/config';
import { startAllInOne, type DevelopmentAllInOne } from '../src/launcher';

jest.mock('../src/embeddedPostgres', () => ({
  startEmbeddedPostgres: () => Promise.reject(new Error('embedded PostgreSQL is not used in this test')),
}));

/** The public API of an all-in-one, as its demo organization's key. */
const apiOf = (aio: DevelopmentAllInOne) => (path: string, init: RequestInit = {}) =>
  fetch(`${aio.url}/api/v1${path}`, { ...init, headers: { authorization: `Bearer ${aio.demo.apiKey}`, 'content-type': 'application/json', ...(init.headers ?? {}) } });

const errorOf = (env: Record<string, string>): ConfigError | undefined => {
  try {
    buildConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  return undefined;
};

/**
 * The all-in-one takes the senders' provider variables (issue 34, item 6): the senders' own config
 * functions read them, so the names, the validation and the failover order are theirs; the sink only
 * when none is set outside production; in production it refuses to start without them.
 */
describe('all-in-one providers: the senders\' variables', () => {
  it('reads them with the senders\' validation and order', () => {
    const config = buildConfig({ SMTP_URL: 'smtp://mail.example.com:587', POSTMARK_SERVER_TOKEN: 'pm-token', EMAIL_PROVIDERS: 'postmark,smtp', SMSRU_API_ID: 'id-1', SMSC_LOGIN: 'acme', SMSC_PASSWORD: 'pw', MAX_ID_INSTANCE: '1101000001', MAX_API_TOKEN: 'tok-123456789', PROVIDER_CIRCUIT_FAILURES: '3' });
    expect(config.senders?.email).toMatchObject({ providers: ['postmark', 'smtp'], smtpUrl: 'smtp://mail.example.com:587', postmark: { serverToken: 'pm-token' }, circuit: { failureThreshold: 3 } });
    expect(config.senders?.sms).toMatchObject({ providers: ['smsc', 'smsru'], smsc: { login: 'acme', password: 'pw' }, smsru: { apiId: 'id-1' } });
    expect(config.senders?.messenger).toMatchObject({ max: { idInstance: '1101000001' }, sink: ['TELEGRAM'] });
    // Nothing set outside production: the sinks, as before.
    expect(buildConfig({}).senders).toMatchObject({ email: { providers: ['sink'] }, sms: { providers: ['sink'] }, messenger: { sink: ['MAX', 'TELEGRAM'] } });
  });

  it.each([
    ['EMAIL_PROVIDERS', { EMAIL_PROVIDERS: 'postmark' }, /^EMAIL_PROVIDERS: lists postmark but POSTMARK_SERVER_TOKEN is not set/],
    ['SMTP_URL', { SMTP_URL: 'http://mail.example.com' }, /^SMTP_URL: /],
    ['SMSC_PASSWORD', { SMSC_LOGIN: 'acme' }, /^SMSC_PASSWORD: is required when SMSC_LOGIN is set/],
    ['MAX_API_TOKEN', { MAX_ID_INSTANCE: '1' }, /^MAX_API_TOKEN: /],
    ['SMTP_URL', { NODE_ENV: 'production', ADMIN_API: 'off' }, /^SMTP_URL: no provider is configured and NODE_ENV=production: set SMTP_URL or POSTMARK_SERVER_TOKEN \(or EMAIL_PROVIDERS=sink/],
    ['SMSC_LOGIN', { NODE_ENV: 'production', ADMIN_API: 'off', POSTMARK_SERVER_TOKEN: 't' }, /^SMSC_LOGIN: no provider is configured and NODE_ENV=production: set SMSC_LOGIN or SMSRU_API_ID/],
    ['MAX_ID_INSTANCE', { NODE_ENV: 'production', ADMIN_API: 'off', POSTMARK_SERVER_TOKEN: 't', SMSRU_API_ID: 'id' }, /^MAX_ID_INSTANCE: no messenger account is configured and NODE_ENV=production/],
  ])('refuses what the senders refuse, naming %s', (variable, env, message) => {
    const err = errorOf(env);
    expect(err?.variable).toBe(variable);
    expect(err?.message).toMatch(message);
  });

  it('carries PROVIDER_RATE_LIMITS, as the senders parse it, to every sender (sink=N limits the sink); a malformed value is refused, naming it', () => {
    const { senders } = buildConfig({ PROVIDER_RATE_LIMITS: 'smtp=5,sink=500' });
    for (const sender of [senders?.email, senders?.sms, senders?.messenger]) expect(sender?.providerRates).toEqual({ smtp: 5, sink: 500 });
    expect(buildConfig({}).senders?.email.providerRates).toEqual({});
    const err = errorOf({ PROVIDER_RATE_LIMITS: 'smtp=0' });
    expect(err?.variable).toBe('PROVIDER_RATE_LIMITS');
    expect(err?.message).toMatch(/^PROVIDER_RATE_LIMITS: must be name=perSecond pairs/);
  });

  it('in production takes the sink only when named', () => {
    expect(buildConfig({ NODE_ENV: 'production', ADMIN_API: 'off', EMAIL_PROVIDERS: 'sink', SMS_PROVIDERS: 'sink', MESSENGER_SINK: 'max,telegram' }).senders).toMatchObject({
      email: { providers: ['sink'] }, sms: { providers: ['sink'] }, messenger: { sink: ['MAX', 'TELEGRAM'] },
    });
  });
});

describe('all-in-one sending through real providers (SMTP, SMSC)', () => {
  let db: TestDatabase;
  let dir: string;
  let aio: DevelopmentAllInOne;
  let smtp: SmtpSink;
  let smsc: FakeSmsc;
  const ctx = testContext('aio-providers');

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'rrs-aio-providers-'));
    smtp = await startSmtpSink();
    smsc = await startFakeSmsc({ login: 'acme', password: 'smsc-password' });
    const config = buildConfig({
      DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, LOG_LEVEL: 'warn', METRICS_PORT: '0',
      SMTP_URL: smtp.url, EMAIL_FROM: 'Reviews <reviews@example.com>',
      SMSC_URL: smsc.url, SMSC_LOGIN: 'acme', SMSC_PASSWORD: 'smsc-password', SMSC_INBOX_POLL_MS: '0', SMS_RECEIPTS_HOST: '127.0.0.1', SMS_RECEIPTS_PORT: '0',
    });
    aio = (await startAllInOne({ ...config, production: false }, ctx)) as DevelopmentAllInOne;
    ctx.health.setReady(true);
  });
  afterAll(async () => {
    await ctx.stop();
    await smtp?.close();
    await smsc?.close();
    await db?.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const api = (path: string, init?: RequestInit) => apiOf(aio)(path, init);

  it('sends email over SMTP and SMS through SMSC, not into the dev inbox, and the catalog names them', async () => {
    const { locations } = (await (await api('/locations')).json()) as { locations: Array<{ id: string }> };
    for (const [slug, recipient] of [['email', { name: 'Vera', email: 'vera@example.com' }], ['sms', { name: 'Анна', phone: '+7 916 123-45-67' }]] as const) {
      const res = await api(`/channels/${slug}/send`, { method: 'POST', body: JSON.stringify({ locationId: locations[0].id, recipients: [recipient] }) });
      expect(res.status).toBe(202);
    }
    await waitFor(() => smtp.messages.some((m) => m.to.includes('vera@example.com')) || undefined, { what: 'the email at the SMTP server' });
    await waitFor(() => smsc.acceptedAtOf('79161234567') ?? smsc.acceptedAtOf('+79161234567'), { what: 'the SMS at SMSC' });
    const inbox = (await (await fetch(`${aio.url}/dev/messages`)).json()) as { messages: Array<{ channel: string }> };
    expect(inbox.messages.filter((m) => m.channel === 'EMAIL' || m.channel === 'SMS')).toEqual([]);
    const { channels } = (await (await api('/channels')).json()) as { channels: Array<{ key: string; delivers: boolean; providers: Array<{ name: string; state: string }> }> };
    expect(channels.find((c) => c.key === 'EMAIL')).toMatchObject({ delivers: true, providers: [{ name: 'smtp', state: 'ok' }] });
    expect(channels.find((c) => c.key === 'SMS')).toMatchObject({ delivers: true, providers: [{ name: 'smsc', state: 'ok' }] });
    // The messengers have no account: outside production, the sink, said so.
    expect(channels.find((c) => c.key === 'MAX')).toMatchObject({ delivers: false, providers: [{ name: 'sink' }] });
  });
});

/**
 * The all-in-one honours PROVIDER_RATE_LIMITS as the senders do (docs/operations.md, "Fair share"), and
 * with REDIS_URL shares the windows with every other process on the account: two all-in-ones on one
 * Redis, each told smtp=5, send 15 emails at once to one relay, which receives each once and no faster
 * than the limiter's rule allows (at most 5 calls in any aligned second, providerRate.ts). Unlimited, the
 * 15 arrive within a fraction of a second; limited per process only, up to 10 in a second.
 */
describe('all-in-one honours PROVIDER_RATE_LIMITS, shared through REDIS_URL', () => {
  const RATE = 5;
  const SENT_BY = [8, 7];
  let smtp: SmtpSink;
  const instances: Array<{ db: TestDatabase; dir: string; aio: DevelopmentAllInOne; ctx: ReturnType<typeof testContext> }> = [];
  const sendEmails = async (aio: DevelopmentAllInOne, emails: string[]) => {
    const api = apiOf(aio);
    const { locations } = (await (await api('/locations')).json()) as { locations: Array<{ id: string }> };
    const res = await api('/channels/email/send', { method: 'POST', body: JSON.stringify({ locationId: locations[0].id, recipients: emails.map((email) => ({ name: 'Vera', email })) }) });
    expect(res.status).toBe(202);
  };
  const received = (emails: string[]) => waitFor(() => emails.every((email) => smtp.acceptedAtOf(email) !== undefined) || undefined, { what: `${emails.length} emails at the SMTP server`, timeoutMs: 20_000 });

  beforeAll(async () => {
    smtp = await startSmtpSink();
    for (const name of ['a', 'b']) {
      const db = await createTestDatabase();
      const dir = mkdtempSync(join(tmpdir(), `rrs-aio-rate-${name}-`));
      const ctx = testContext(`aio-rate-${name}`);
      const config = buildConfig({
        DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, LOG_LEVEL: 'warn', METRICS_PORT: '0',
        SMTP_URL: smtp.url, EMAIL_FROM: 'Reviews <reviews@example.com>', PROVIDER_RATE_LIMITS: `smtp=${RATE}`, REDIS_URL: TEST_REDIS_URL,
      });
      const aio = (await startAllInOne({ ...config, production: false }, ctx)) as DevelopmentAllInOne;
      ctx.health.setReady(true);
      instances.push({ db, dir, aio, ctx });
    }
  });
  afterAll(async () => {
    for (const { ctx } of instances) await ctx.stop();
    await smtp?.close();
    for (const { db, dir } of instances) {
      await db.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('keeps its gateway\'s auth cache in that Redis too', async () => {
    const { aio } = instances[0];
    expect((await apiOf(aio)('/ping')).status).toBe(200);
    const redis = new Redis(TEST_REDIS_URL);
    try {
      const cached = await redis.get(`rrs:gw:auth:${createHash('sha256').update(aio.demo.apiKey).digest('base64url')}`);
      expect(JSON.parse(cached ?? 'null')).toMatchObject({ principal: { organization: { name: 'Demo Coffee' } } });
    } finally {
      await redis.quit();
    }
  });

  it(`sends 15 emails through two processes, at most ${RATE} a second between them, each once`, async () => {
    // Each process's first email opens its SMTP connection (100–200 ms on loopback): sent first, so the
    // receipts below follow their calls by a few ms.
    const warmUps = instances.map((_, i) => `warm-${i}@example.com`);
    await Promise.all(instances.map(({ aio }, i) => sendEmails(aio, [warmUps[i]])));
    await received(warmUps);
    const batches = SENT_BY.map((count, i) => Array.from({ length: count }, (_, n) => `rate-${i}-${n}@example.com`));
    await Promise.all(instances.map(({ aio }, i) => sendEmails(aio, batches[i])));
    const all = batches.flat();
    await received(all);
    for (const email of [...warmUps, ...all]) expect(smtp.timesAccepted(email)).toBe(1);
    expect(smtp.count).toBe(warmUps.length + all.length);
    // At most RATE calls in any ten consecutive 100 ms windows: any RATE + 1 calls in a row span more than
    // 900 ms (first at a window's end, last at the start of the tenth after). Checked on the receipts, so
    // less 100 ms for a receipt held up behind its call (an aligned second's count would have no such
    // margin at its edges). Per process only, two calls come in the same window: 6 in a row within ~0.5 s.
    const times = all.map((email) => smtp.acceptedAtOf(email)!).sort((a, b) => a - b);
    const spans = times.slice(RATE).map((t, i) => t - times[i]);
    expect(Math.min(...spans)).toBeGreaterThan(800);
  });
});
