import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@rrs/runtime';
import { createTestDatabase, startFakeSmsc, startSmtpSink, testContext, waitFor, type FakeSmsc, type SmtpSink, type TestDatabase } from '@rrs/testkit';
import { buildConfig } from '../src/config';
import { startAllInOne, type DevelopmentAllInOne } from '../src/launcher';

jest.mock('../src/embeddedPostgres', () => ({
  startEmbeddedPostgres: () => Promise.reject(new Error('embedded PostgreSQL is not used in this test')),
}));

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

  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${aio.url}/api/v1${path}`, { ...init, headers: { authorization: `Bearer ${aio.demo.apiKey}`, 'content-type': 'application/json', ...(init.headers ?? {}) } });

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
