import { Redis } from 'ioredis';
import { RateLimiterMemory } from 'rate-limiter-flexible';
import { registry } from '@rrs/runtime';
import { openApiChecker, TEST_REDIS_URL, uniqueName, waitFor, type OpenApiChecker } from '@rrs/testkit';
import { ADDRESS_FAILURE_RULES, createFailureLimiters } from '../src/addressLimits';
import { startCascadeStack, type CascadeStack } from './cascadeStack';

/**
 * Per-address limits shared by the replicas (Redis): floods of invalid API keys and of random review /
 * unsubscribe tokens from one client address are refused with 429 and Retry-After, on every replica,
 * the valid key or link too, while other addresses are untouched. The gateway trusts one proxy hop
 * (TRUST_PROXY=1), so each test speaks from an address of its own through X-Forwarded-For.
 */
describe('per-address limits in Redis', () => {
  let stack: CascadeStack;
  let redis: Redis;
  let api: OpenApiChecker;
  const prefix = `${uniqueName('gwaddr')}:`;

  beforeAll(async () => {
    stack = await startCascadeStack({ gateway: { redisUrl: TEST_REDIS_URL, redisKeyPrefix: prefix, trustProxy: 1 }, replicas: 2 });
    api = await openApiChecker(`${stack.base}/api/v1/openapi.json`);
    redis = new Redis(TEST_REDIS_URL);
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
    await stack.close();
  });

  const from = (address: string) => ({ 'x-forwarded-for': address });
  const ping = (base: string, key: string, address: string) => api.fetch(`${base}/api/v1/ping`, { headers: { authorization: `Bearer ${key}`, ...from(address) } });
  const randomKey = (i: number) => `rrs_${String(i).padStart(36, 'X')}`;
  const randomToken = (i: number) => `Zz${String(i).padStart(20, '0')}`;

  it('refuses an address after too many invalid API keys, on every replica and with a valid key too', async () => {
    const address = '203.0.113.10';
    const { failures, blockSeconds } = ADDRESS_FAILURE_RULES.apiKeyAuth;
    for (let i = 0; i < failures; i++) {
      const res = await ping(stack.bases[i % 2], randomKey(i), address);
      expect(res.status).toBe(401);
      expect(res.body).toMatchObject({ code: 'invalid_api_key' });
    }
    const over = await ping(stack.bases[0], randomKey(failures), address);
    expect(over.status).toBe(429);
    expect(over.body).toMatchObject({ code: 'too_many_auth_failures' });
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(blockSeconds - 5);
    for (const base of stack.bases) {
      const valid = await ping(base, stack.keys.paid, address);
      expect(valid.status).toBe(429);
      expect(valid.body).toMatchObject({ code: 'too_many_auth_failures' });
    }
    // Another address is not affected, and the count lives in Redis, under the gateway's prefix.
    expect((await ping(stack.bases[1], stack.keys.paid, '203.0.113.11')).status).toBe(200);
    expect(await redis.keys(`${prefix}fail:apiKeyAuth*`)).not.toHaveLength(0);
  });

  it('a replica that found an address clean sees a block counted on another replica within CLEAN_ADDRESS_CACHE_MS', async () => {
    const address = '203.0.113.30';
    expect((await ping(stack.bases[0], stack.keys.paid, address)).status).toBe(200);
    for (let i = 0; i <= ADDRESS_FAILURE_RULES.apiKeyAuth.failures; i++) await ping(stack.bases[1], randomKey(100 + i), address);
    const seen = await waitFor(async () => ((await ping(stack.bases[0], stack.keys.paid, address)).status === 429 ? Date.now() : undefined), { what: 'the block on the other replica', timeoutMs: 5_000 });
    expect(seen).toBeDefined();
  });

  it('does not count a missing key, nor valid ones', async () => {
    const address = '203.0.113.20';
    for (let i = 0; i < ADDRESS_FAILURE_RULES.apiKeyAuth.failures + 5; i++) {
      expect((await api.fetch(`${stack.base}/api/v1/ping`, { headers: from(address) })).status).toBe(401);
    }
    expect((await ping(stack.base, stack.keys.paid, address)).status).toBe(200);
  });

  it('refuses an address after too many unknown review and unsubscribe tokens, the real link too', async () => {
    const address = '198.51.100.7';
    const { failures } = ADDRESS_FAILURE_RULES.linkToken;
    for (let i = 0; i < failures; i++) {
      const path = i % 3 === 0 ? `/u/${randomToken(i)}` : i % 3 === 1 ? `/r/${randomToken(i)}` : '/r/not-a-token';
      const res = await fetch(`${stack.bases[i % 2]}${path}`, { headers: from(address) });
      expect(res.status).toBe(404);
    }
    const over = await fetch(`${stack.bases[1]}/r/${randomToken(999)}`, { headers: from(address) });
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(ADDRESS_FAILURE_RULES.linkToken.blockSeconds - 5);

    const res = await fetch(`${stack.base}/api/v1/review-requests`, {
      method: 'POST', headers: { authorization: `Bearer ${stack.keys.paid}`, 'content-type': 'application/json' }, body: JSON.stringify({ locationId: stack.locationId, customerName: 'Ivan' }),
    });
    const { token } = (await res.json()) as { token: string };
    expect((await fetch(`${stack.base}/r/${token}`, { headers: from(address) })).status).toBe(429);
    const elsewhere = await waitFor(async () => (await fetch(`${stack.bases[1]}/r/${token}`, { headers: from('198.51.100.8') })).status, { what: 'the link from another address' });
    expect(elsewhere).toBe(200);
    expect(await redis.keys(`${prefix}fail:linkToken*`)).not.toHaveLength(0);
  });
});

describe('per-address limits on one replica', () => {
  it('shares one store lookup between the concurrent checks of an address, then takes it as clean for a while', async () => {
    const limiters = createFailureLimiters({ keyPrefix: uniqueName('gwaddr') });
    const lookups = jest.spyOn(RateLimiterMemory.prototype, 'get');
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, () => limiters.apiKeyAuth.blockedFor('203.0.113.90')));
      expect(answers.every((seconds) => seconds === 0)).toBe(true);
      expect(await limiters.apiKeyAuth.blockedFor('203.0.113.90')).toBe(0);
      expect(lookups).toHaveBeenCalledTimes(1);
    } finally {
      lookups.mockRestore();
    }
  });

  it('keeps counting in memory while Redis is down, and counts each store call the insurance limiter answered', async () => {
    const down = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    down.on('error', () => undefined);
    const storeErrors = async () => (await registry.getSingleMetric('gateway_address_limit_store_errors_total')!.get()).values.reduce((sum, v) => sum + v.value, 0);
    try {
      const limiters = createFailureLimiters({ redis: down, keyPrefix: uniqueName('gwaddr'), rules: { apiKeyAuth: { failures: 2, windowSeconds: 60, blockSeconds: 60 } } });
      const before = await storeErrors();
      expect(await limiters.apiKeyAuth.blockedFor('203.0.113.91')).toBe(0);
      const blockedAfter = [];
      for (let i = 0; i < 3; i++) blockedAfter.push((await limiters.apiKeyAuth.fail('203.0.113.91')) > 0);
      expect(blockedAfter).toEqual([false, false, true]);
      expect((await storeErrors()) - before).toBe(4);
    } finally {
      down.disconnect();
    }
  });
});
