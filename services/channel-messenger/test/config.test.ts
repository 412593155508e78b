import { ConfigError } from '@rrs/runtime';
import { buildConfig } from '../src';

const base = { DATABASE_URL: 'postgres://u@localhost/db' };

describe('channel-messenger config', () => {
  it('reads one gateway account per messenger; a messenger without one uses the sink provider', () => {
    const config = buildConfig({ ...base, MAX_ID_INSTANCE: '3100000001', MAX_API_TOKEN: 'tok-123456789', REDIS_URL: 'redis://127.0.0.1:6379' });
    expect(config.max).toEqual({ apiUrl: 'https://api.green-api.com/v3', idInstance: '3100000001', apiToken: 'tok-123456789', timeoutMs: 10_000, perAccountPerSecond: 20, perChatPerSecond: 1, healthIntervalMs: 60_000, accountCacheMs: 86_400_000 });
    expect(config.telegram).toBeUndefined();
    expect(config.redisUrl).toBe('redis://127.0.0.1:6379');
    expect(buildConfig({ ...base, TELEGRAM_ID_INSTANCE: '7', TELEGRAM_API_TOKEN: 'tok-123456789' }).telegram?.perAccountPerSecond).toBe(30);
    expect(buildConfig({ ...base, MAX_ID_INSTANCE: '1', MAX_API_TOKEN: 'tok-123456789', MESSENGER_HEALTH_INTERVAL_MS: '30000', MESSENGER_ACCOUNT_CACHE_MS: '0' }).max).toMatchObject({ healthIntervalMs: 30_000, accountCacheMs: 0 });
    expect(() => buildConfig({ ...base, MESSENGER_HEALTH_INTERVAL_MS: '1000' })).toThrow(/^MESSENGER_HEALTH_INTERVAL_MS/);
  });

  it("takes a working account's webhook token (its delivery receipts on), only beside the account", () => {
    const config = buildConfig({ ...base, MAX_ID_INSTANCE: '1', MAX_API_TOKEN: 'tok-123456789', MAX_WEBHOOK_TOKEN: 'receipts-token-0123456789' });
    expect(config.max?.webhookToken).toBe('receipts-token-0123456789');
    expect(buildConfig({ ...base, MAX_ID_INSTANCE: '1', MAX_API_TOKEN: 'tok-123456789' }).max?.webhookToken).toBeUndefined();
  });

  it('uses the sink for a messenger without an account only outside production, or when MESSENGER_SINK names it', () => {
    const max = { MAX_ID_INSTANCE: '1', MAX_API_TOKEN: 'tok-123456789' };
    expect(buildConfig(base).sink).toEqual(['MAX', 'TELEGRAM']);
    expect(buildConfig({ ...base, ...max }).sink).toEqual(['TELEGRAM']);
    // Production: the messenger without an account is unavailable, never a silent sink.
    expect(buildConfig({ ...base, ...max, NODE_ENV: 'production' }).sink).toEqual([]);
    expect(buildConfig({ ...base, NODE_ENV: 'production', MESSENGER_SINK: 'max,telegram' }).sink).toEqual(['MAX', 'TELEGRAM']);
    expect(buildConfig({ ...base, ...max, NODE_ENV: 'production', MESSENGER_SINK: 'telegram' }).sink).toEqual(['TELEGRAM']);
    expect(() => buildConfig({ ...base, NODE_ENV: 'production' })).toThrow(/^MAX_ID_INSTANCE: no messenger account is configured and NODE_ENV=production: set MAX_ID_INSTANCE and MAX_API_TOKEN, or TELEGRAM_ID_INSTANCE and TELEGRAM_API_TOKEN \(or MESSENGER_SINK=max,telegram/);
  });

  it.each([
    ['MAX_ID_INSTANCE', { ...base, NODE_ENV: 'production' }],
    ['MESSENGER_SINK', { ...base, MESSENGER_SINK: 'whatsapp' }],
    ['MESSENGER_SINK', { ...base, MESSENGER_SINK: 'max,max' }],
    ['MESSENGER_SINK', { ...base, MAX_ID_INSTANCE: '1', MAX_API_TOKEN: 'tok-123456789', MESSENGER_SINK: 'max' }],
    ['MAX_API_TOKEN', { ...base, MAX_ID_INSTANCE: '1' }],
    ['TELEGRAM_ID_INSTANCE', { ...base, TELEGRAM_API_TOKEN: 'tok-123456789' }],
    ['MAX_ID_INSTANCE', { ...base, MAX_ID_INSTANCE: 'abc', MAX_API_TOKEN: 'tok-123456789' }],
    ['REDIS_URL', { ...base, REDIS_URL: 'http://x' }],
    ['TELEGRAM_WEBHOOK_TOKEN', { ...base, TELEGRAM_WEBHOOK_TOKEN: 'receipts-token-0123456789' }],
    ['MAX_WEBHOOK_TOKEN', { ...base, MAX_ID_INSTANCE: '1', MAX_API_TOKEN: 'tok-123456789', MAX_WEBHOOK_TOKEN: 'short' }],
  ])('names %s when it is wrong', (variable, env) => {
    expect(() => buildConfig(env)).toThrow(ConfigError);
    expect(() => buildConfig(env)).toThrow(new RegExp(`^${variable}`));
  });
});
