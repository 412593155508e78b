import { Redis } from 'ioredis';
import { httpStatusOf, registry, UnauthenticatedError, UnavailableError, type DomainError } from '@rrs/runtime';
import { cachedAuthenticator } from '../src/authCache';
import { createRateLimiter } from '../src/rateLimit';
import { principal } from './support';

/** The in-memory backends (all-in-one mode) and the fallbacks used when Redis is unreachable. */
describe('rate limiter and auth cache without Redis', () => {
  const config = { windowSeconds: 30, perPlan: { trial: 2, standard: 3, pro: 4 } };

  it('counts per key with the quota of the plan; an unknown plan gets the standard quota', async () => {
    const limiter = createRateLimiter({ config, keyPrefix: 'mem:' });
    const trial = principal({ plan: 'trial' });
    const decisions = [];
    for (let i = 0; i < 3; i++) decisions.push(await limiter.consume(trial));
    expect(decisions.map((d) => [d.allowed, d.remaining, d.limit, d.policy])).toEqual([
      [true, 1, 2, 'trial'],
      [true, 0, 2, 'trial'],
      [false, 0, 2, 'trial'],
    ]);
    expect(decisions[2].resetSeconds).toBeGreaterThanOrEqual(1);
    expect(decisions[2].resetSeconds).toBeLessThanOrEqual(30);
    const enterprise = await limiter.consume(principal({ plan: 'enterprise' }));
    expect([enterprise.policy, enterprise.limit, enterprise.remaining]).toEqual(['standard', 3, 2]);
    // Another key of the same organization has its own quota.
    expect((await limiter.consume(principal({ plan: 'trial' }))).allowed).toBe(true);
  });

  it('falls back to an in-memory limiter with the same quota when Redis is down, and counts it for the alert', async () => {
    const down = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    down.on('error', () => undefined);
    const storeErrors = async () => (await registry.getSingleMetric('gateway_rate_limit_store_errors_total')!.get()).values.reduce((sum, v) => sum + v.value, 0);
    try {
      const limiter = createRateLimiter({ config, redis: down, keyPrefix: 'down:' });
      const p = principal({ plan: 'standard' });
      const before = await storeErrors();
      const allowed = [];
      for (let i = 0; i < 4; i++) allowed.push((await limiter.consume(p)).allowed);
      expect(allowed).toEqual([true, true, true, false]);
      // RrsRateLimitStoreDown fires on this counter: one per reservation the insurance limiter answered
      // (the fourth request is refused without asking: the window is used up).
      expect((await storeErrors()) - before).toBe(3);
    } finally {
      down.disconnect();
    }
  });

  it('asks the directory when the Redis cache is down, and caches in memory within the TTL', async () => {
    const down = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    down.on('error', () => undefined);
    let lookups = 0;
    const p = principal();
    const auth = cachedAuthenticator(
      async (key) => {
        lookups++;
        // As the directory's refusal arrives over gRPC: an error of its kind, with no HTTP status.
        if (key !== 'good') throw new UnauthenticatedError('invalid_api_key', 'unknown key');
        return p;
      },
      { ttlMs: 400, redis: down, keyPrefix: 'down:' },
    );
    try {
      expect(await auth('good')).toBe(p);
      expect(await auth('good')).toBe(p);
      expect(lookups).toBe(1);
      const refusal = (await auth('bad').catch((err: unknown) => err)) as DomainError;
      expect({ status: httpStatusOf(refusal), code: refusal.code }).toEqual({ status: 401, code: 'invalid_api_key' });
      await expect(auth('bad')).rejects.toMatchObject({ code: 'invalid_api_key' });
      expect(lookups).toBe(2);
      await new Promise((r) => setTimeout(r, 150));
      await auth('good');
      expect(lookups).toBe(3);
    } finally {
      down.disconnect();
    }
  });

  it('shares one directory lookup between concurrent misses, and does not cache other failures', async () => {
    let lookups = 0;
    let fail = true;
    const p = principal();
    const auth = cachedAuthenticator(
      async () => {
        lookups++;
        await new Promise((r) => setTimeout(r, 20));
        if (fail) throw new UnavailableError('directory down');
        return p;
      },
      { ttlMs: 4000, keyPrefix: 'mem:' },
    );
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => auth('k')));
    expect(lookups).toBe(1);
    expect(results.every((r) => r.status === 'rejected')).toBe(true);
    fail = false;
    expect(await auth('k')).toBe(p);
    expect(lookups).toBe(2);
  });
});
