import { ConfigError } from '@rrs/runtime';
import { buildConfig } from '../src';

const base = { DATABASE_URL: 'postgres://u@localhost/db' };

describe('channel-email config', () => {
  it('reads SMTP_URL and EMAIL_FROM; no SMTP_URL means the sink provider', () => {
    expect(buildConfig({ ...base, SMTP_URL: 'smtps://u:p@mail.example.com:465', EMAIL_FROM: 'Reviews <r@example.com>' })).toMatchObject({ smtpUrl: 'smtps://u:p@mail.example.com:465', emailFrom: 'Reviews <r@example.com>', databaseUrl: base.DATABASE_URL, channelTtlMs: 30_000 });
    expect(buildConfig(base).smtpUrl).toBeUndefined();
  });

  it('orders the providers: every configured one, SMTP first, unless EMAIL_PROVIDERS says otherwise', () => {
    const both = { ...base, SMTP_URL: 'smtp://mail.example.com', POSTMARK_SERVER_TOKEN: 'token' };
    expect(buildConfig(both)).toMatchObject({ providers: ['smtp', 'postmark'], postmark: { serverToken: 'token', baseUrl: 'https://api.postmarkapp.com', messageStream: 'outbound', timeoutMs: 10_000 }, receiptsPort: 9473 });
    expect(buildConfig({ ...both, EMAIL_PROVIDERS: 'postmark,smtp' }).providers).toEqual(['postmark', 'smtp']);
    expect(buildConfig(base)).toMatchObject({ providers: ['sink'], postmark: undefined });
  });

  it('takes the sink only when none is configured outside production, or when EMAIL_PROVIDERS names it (alone)', () => {
    expect(buildConfig({ ...base, NODE_ENV: 'development' }).providers).toEqual(['sink']);
    expect(buildConfig({ ...base, NODE_ENV: 'production', EMAIL_PROVIDERS: 'sink' }).providers).toEqual(['sink']);
    expect(buildConfig({ ...base, NODE_ENV: 'production', POSTMARK_SERVER_TOKEN: 't' }).providers).toEqual(['postmark']);
    expect(() => buildConfig({ ...base, NODE_ENV: 'production' })).toThrow(/^SMTP_URL: no provider is configured and NODE_ENV=production: set SMTP_URL or POSTMARK_SERVER_TOKEN \(or EMAIL_PROVIDERS=sink/);
  });

  it.each([
    ['DATABASE_URL', {}],
    ['SMTP_URL', { ...base, NODE_ENV: 'production' }],
    ['EMAIL_PROVIDERS', { ...base, POSTMARK_SERVER_TOKEN: 't', EMAIL_PROVIDERS: 'postmark,sink' }],
    ['SMTP_URL', { ...base, SMTP_URL: 'http://mail.example.com' }],
    ['EMAIL_FROM', { ...base, EMAIL_FROM: 'no address' }],
    ['CHANNEL_TTL_MS', { ...base, CHANNEL_TTL_MS: '10' }],
    ['EMAIL_PROVIDERS', { ...base, EMAIL_PROVIDERS: 'sendgrid' }],
    ['EMAIL_PROVIDERS', { ...base, EMAIL_PROVIDERS: 'postmark' }],
    ['EMAIL_PROVIDERS', { ...base, SMTP_URL: 'smtp://mail.example.com', EMAIL_PROVIDERS: 'smtp,smtp' }],
    ['POSTMARK_WEBHOOK_SECRET', { ...base, POSTMARK_SERVER_TOKEN: 't', POSTMARK_WEBHOOK_SECRET: 'short' }],
  ])('names %s when it is wrong', (variable, env) => {
    expect(() => buildConfig(env)).toThrow(ConfigError);
    expect(() => buildConfig(env)).toThrow(new RegExp(`^${variable}`));
  });
});
