import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { startContacts, type RunningContacts } from '@rrs/contacts';
import { SCOPES } from '@rrs/proto';
import { ConfigError } from '@rrs/runtime';
import { createTestDatabase, openApiChecker, testContext, TEST_REDIS_URL, uniqueName, type OpenApiChecker, type TestDatabase } from '@rrs/testkit';
import { buildConfig, startGateway } from '../src';
import { cachedAuthenticator } from '../src/authCache';

/**
 * Distributed mode on the real Redis: per-key rate limits shared by gateway replicas, with the IETF
 * RateLimit fields and 429 `rate_limited`; and the key lookup cache, which lets a revoked key through for
 * at most its TTL (≤ 5 s) and never stores the key itself.
 */
describe('gateway on Redis', () => {
  let db: TestDatabase;
  const ctx = testContext('redis-test');
  let contacts: RunningContacts;
  let redis: Redis;
  const prefix = `${uniqueName('gwtest')}:`;
  let replicaA: string;
  let replicaB: string;
  let api: OpenApiChecker;
  let orgId: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    const config = {
      host: '127.0.0.1',
      port: 0,
      contactsAddress: `127.0.0.1:${contacts.grpcPort}`,
      schedulerAddress: '127.0.0.1:1',
      publicBaseUrl: 'http://localhost',
      redisUrl: TEST_REDIS_URL,
      redisKeyPrefix: prefix,
      authCacheTtlMs: 1500,
      rateLimits: { windowSeconds: 60, perPlan: { trial: 3, standard: 5, pro: 50 } },
    };
    replicaA = (await startGateway(config, ctx)).url;
    replicaB = (await startGateway(config, ctx)).url;
    api = await openApiChecker(`${replicaA}/api/v1/openapi.json`);
    redis = new Redis(TEST_REDIS_URL);
    orgId = (await contacts.directory.createOrganization({ name: 'Acme', plan: 'standard', emailConfirmed: true, sendWindow: null, cooldownDays: 0 })).id;
  });

  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await redis.quit();
    await ctx.stop();
    await db.drop();
  });

  const newKey = async (options: { plan?: string; scopes?: string[] } = {}) => {
    const org = options.plan ? (await contacts.directory.createOrganization({ name: 'Other', plan: options.plan, emailConfirmed: true, sendWindow: null, cooldownDays: 0 })).id : orgId;
    const issued = await contacts.directory.issueApiKey({ organizationId: org, scopes: options.scopes });
    return { secret: issued.secret, id: issued.apiKey.id, org };
  };
  const get = (base: string, path: string, key: string) => api.fetch(`${base}/api/v1${path}`, { headers: { authorization: `Bearer ${key}` } });

  it('counts requests per key across replicas and answers 429 with Retry-After after the quota', async () => {
    const { secret } = await newKey();
    const seen: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await get(i % 2 === 0 ? replicaA : replicaB, '/ping', secret);
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-policy')).toBe('"standard";q=5;w=60');
      seen.push(res.headers.get('ratelimit')!);
    }
    expect(seen.map((h) => /^"standard";r=(\d+);t=(\d+)$/.exec(h)![1])).toEqual(['4', '3', '2', '1', '0']);
    for (const h of seen) expect(Number(/t=(\d+)$/.exec(h)![1])).toBeGreaterThan(0);

    const refused = await get(replicaB, '/ping', secret);
    expect(refused.status).toBe(429);
    expect(refused.body).toMatchObject({ code: 'rate_limited', status: 429 });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.headers.get('ratelimit')).toBe(`"standard";r=0;t=${retryAfter}`);
    expect((refused.body as { retryAfterSeconds: number }).retryAfterSeconds).toBe(retryAfter);
  });

  it('keeps the quota in Redis under the configured prefix', async () => {
    const { secret, id } = await newKey();
    await get(replicaA, '/ping', secret);
    await get(replicaA, '/ping', secret);
    const stored = await redis.keys(`${prefix}rl:standard:*`);
    const own = stored.find((k) => k.endsWith(id));
    expect(own).toBeDefined();
    expect(Number(await redis.get(own!))).toBe(2);
  });

  it('gives each key its own quota, sized by its plan', async () => {
    const a = await newKey();
    const b = await newKey();
    for (let i = 0; i < 5; i++) await get(replicaA, '/ping', a.secret);
    expect((await get(replicaA, '/ping', a.secret)).status).toBe(429);
    expect((await get(replicaA, '/ping', b.secret)).status).toBe(200);

    const trial = await newKey({ plan: 'trial' });
    const statuses = [];
    for (let i = 0; i < 4; i++) statuses.push((await get(replicaA, '/ping', trial.secret)).status);
    expect(statuses).toEqual([200, 200, 200, 429]);
    const pro = await newKey({ plan: 'pro' });
    expect((await get(replicaA, '/ping', pro.secret)).headers.get('ratelimit-policy')).toBe('"pro";q=50;w=60');
  });

  it('puts the RateLimit fields on error responses of rate-limited routes too', async () => {
    const { secret } = await newKey({ scopes: SCOPES.filter((s) => s !== 'locations:read') });
    const res = await get(replicaA, '/locations', secret);
    expect(res.status).toBe(403);
    expect(res.headers.get('ratelimit-policy')).toBe('"standard";q=5;w=60');
    expect(res.headers.get('ratelimit')).toMatch(/^"standard";r=4;t=\d+$/);
  });

  it('caches the key lookup by hash only, and a revoked key stops within the cache TTL', async () => {
    const { secret, id, org } = await newKey({ plan: 'pro' });
    expect((await get(replicaA, '/ping', secret)).status).toBe(200);
    const cacheKey = `${prefix}auth:${createHash('sha256').update(secret).digest('base64url')}`;
    expect(await redis.exists(cacheKey)).toBe(1);
    const ttl = await redis.pttl(cacheKey);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1500);
    for (const k of await redis.keys(`${prefix}*`)) {
      expect(k).not.toContain(secret);
      const type = await redis.type(k);
      if (type === 'string') expect(await redis.get(k)).not.toContain(secret);
    }

    await contacts.directory.revokeApiKey(org, id);
    const revokedAt = Date.now();
    // Served from the cache right after revocation (so the cache really answers)...
    expect((await get(replicaB, '/ping', secret)).status).toBe(200);
    // ...and refused once the entry expires.
    let status = 200;
    while (status === 200 && Date.now() - revokedAt < 5_000) {
      await new Promise((r) => setTimeout(r, 100));
      status = (await get(replicaB, '/ping', secret)).status;
    }
    expect(status).toBe(401);
    expect(Date.now() - revokedAt).toBeLessThan(1500 + 500);
  });

  it('refuses a cache TTL over 5 s', () => {
    expect(() => buildConfig({ AUTH_CACHE_TTL_MS: '5001' })).toThrow(ConfigError);
    expect(buildConfig({}).authCacheTtlMs).toBeLessThanOrEqual(5000);
    expect(() => cachedAuthenticator(async () => Promise.reject(new Error('unused')), { ttlMs: 6000, keyPrefix: 'x' })).toThrow(RangeError);
  });
});
