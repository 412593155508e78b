import { ConfigError } from '@rrs/runtime';
import { buildConfig } from '../src';

const base = { DATABASE_URL: 'postgres://u@localhost/db' };

describe('channel-sms config', () => {
  it('reads the SMSC account; without a login the sink provider is used', () => {
    expect(buildConfig({ ...base, SMSC_LOGIN: 'acme', SMSC_PASSWORD: 'pw', SMSC_SENDER: 'Acme', SMSC_URL: 'https://www2.smsc.ru' })).toMatchObject({
      smsc: { baseUrl: 'https://www2.smsc.ru', login: 'acme', password: 'pw', sender: 'Acme', timeoutMs: 10_000 },
      contactsAddress: '127.0.0.1:50051',
      receiptsPort: 9470,
      opsPort: 9467,
    });
    expect(buildConfig(base).smsc).toBeUndefined();
  });

  it.each([
    ['SMSC_PASSWORD', { ...base, SMSC_LOGIN: 'acme' }],
    ['SMSC_SENDER', { ...base, SMSC_LOGIN: 'acme', SMSC_PASSWORD: 'pw', SMSC_SENDER: 'TwelveChars!' }],
    ['SMSC_URL', { ...base, SMSC_URL: 'ftp://smsc.ru' }],
    ['CONTACTS_ADDR', { ...base, CONTACTS_ADDR: 'nohost' }],
  ])('names %s when it is wrong', (variable, env) => {
    expect(() => buildConfig(env)).toThrow(ConfigError);
    expect(() => buildConfig(env)).toThrow(new RegExp(`^${variable}`));
  });
});
