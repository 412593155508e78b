import { ConfigError } from '@rrs/runtime';
import { buildConfig } from '../src';

const base = { DATABASE_URL: 'postgres://u@localhost/db' };

describe('channel-sms config', () => {
  it('reads the SMSC account; without a login the sink provider is used', () => {
    expect(buildConfig({ ...base, SMSC_LOGIN: 'acme', SMSC_PASSWORD: 'pw', SMSC_SENDER: 'Acme', SMSC_URL: 'https://www2.smsc.ru' })).toMatchObject({
      smsc: { baseUrl: 'https://www2.smsc.ru', login: 'acme', password: 'pw', sender: 'Acme', timeoutMs: 10_000, maxConnections: 14 },
      contactsAddress: '127.0.0.1:50051',
      receiptsPort: 9470,
      opsPort: 9467,
    });
    expect(buildConfig(base).smsc).toBeUndefined();
  });

  it('keeps under SMSC\'s 15 requests at once per login: 14 by default, SMSC_MAX_CONNECTIONS for several replicas', () => {
    const smsc = { ...base, SMSC_LOGIN: 'acme', SMSC_PASSWORD: 'pw' };
    expect(buildConfig({ ...smsc, SMSC_MAX_CONNECTIONS: '7' }).smsc?.maxConnections).toBe(7);
    expect(() => buildConfig({ ...smsc, SMSC_MAX_CONNECTIONS: '0' })).toThrow(ConfigError);
  });

  it('reads the SMSC inbox every minute by default for STOP replies; 0 turns it off', () => {
    expect(buildConfig(base).smscInboxPollMs).toBe(60_000);
    expect(buildConfig({ ...base, SMSC_INBOX_POLL_MS: '0' }).smscInboxPollMs).toBe(0);
  });

  it('orders the SMS providers: every configured one (SMSC first) by default, or as SMS_PROVIDERS lists them', () => {
    const both = { ...base, SMSC_LOGIN: 'acme', SMSC_PASSWORD: 'pw', SMSRU_API_ID: 'id-1' };
    expect(buildConfig(both).providers).toEqual(['smsc', 'smsru']);
    expect(buildConfig({ ...both, SMS_PROVIDERS: 'smsru,smsc' }).providers).toEqual(['smsru', 'smsc']);
    expect(buildConfig({ ...base, SMSRU_API_ID: 'id-1', SMSRU_TEST: 'true' })).toMatchObject({ providers: ['smsru'], smsru: { baseUrl: 'https://sms.ru', apiId: 'id-1', test: true, timeoutMs: 10_000 } });
    expect(buildConfig(base).providers).toEqual(['sink']);
    expect(buildConfig({ ...base, PROVIDER_CIRCUIT_FAILURES: '3', PROVIDER_CIRCUIT_OPEN_MS: '5000' }).circuit).toEqual({ failureThreshold: 3, openMs: 5_000 });
  });

  it('takes the sink only when none is configured outside production, or when SMS_PROVIDERS names it (alone)', () => {
    expect(buildConfig({ ...base, NODE_ENV: 'test' }).providers).toEqual(['sink']);
    expect(buildConfig({ ...base, NODE_ENV: 'production', SMS_PROVIDERS: 'sink' }).providers).toEqual(['sink']);
    expect(buildConfig({ ...base, NODE_ENV: 'production', SMSRU_API_ID: 'id-1' }).providers).toEqual(['smsru']);
    expect(() => buildConfig({ ...base, NODE_ENV: 'production' })).toThrow(/^SMSC_LOGIN: no provider is configured and NODE_ENV=production: set SMSC_LOGIN or SMSRU_API_ID \(or SMS_PROVIDERS=sink/);
  });

  it.each([
    ['SMSC_LOGIN', { ...base, NODE_ENV: 'production' }],
    ['SMS_PROVIDERS', { ...base, SMS_PROVIDERS: 'sink,smsc', SMSC_LOGIN: 'acme', SMSC_PASSWORD: 'pw' }],
    ['SMS_PROVIDERS', { ...base, SMS_PROVIDERS: 'smsc,nexmo', SMSC_LOGIN: 'acme', SMSC_PASSWORD: 'pw' }],
    ['SMS_PROVIDERS', { ...base, SMS_PROVIDERS: 'smsc,smsc', SMSC_LOGIN: 'acme', SMSC_PASSWORD: 'pw' }],
    ['SMS_PROVIDERS', { ...base, SMS_PROVIDERS: 'smsru' }],
    ['SMS_PROVIDERS', { ...base, SMS_PROVIDERS: 'smsc' }],
    ['SMS_PROVIDERS', { ...base, SMS_PROVIDERS: 'SMSC' }],
    ['SMSRU_CALLBACK_SECRET', { ...base, SMSRU_API_ID: 'id', SMSRU_CALLBACK_SECRET: 'short' }],
    ['SMSRU_URL', { ...base, SMSRU_URL: 'ftp://sms.ru' }],
    ['SMSC_PASSWORD', { ...base, SMSC_LOGIN: 'acme' }],
    ['SMSC_SENDER', { ...base, SMSC_LOGIN: 'acme', SMSC_PASSWORD: 'pw', SMSC_SENDER: 'TwelveChars!' }],
    ['SMSC_URL', { ...base, SMSC_URL: 'ftp://smsc.ru' }],
    ['CONTACTS_ADDR', { ...base, CONTACTS_ADDR: 'nohost' }],
    ['SMSC_INBOX_POLL_MS', { ...base, SMSC_INBOX_POLL_MS: 'soon' }],
    ['SMSC_INBOX_POLL_MS', { ...base, SMSC_INBOX_POLL_MS: '-1' }],
  ])('names %s when it is wrong', (variable, env) => {
    expect(() => buildConfig(env)).toThrow(ConfigError);
    expect(() => buildConfig(env)).toThrow(new RegExp(`^${variable}`));
  });
});
