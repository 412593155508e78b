import type { Response } from 'express';
import { Redis } from 'ioredis';
import { DomainError } from '@rrs/runtime';
import { TEST_REDIS_URL, uniqueName } from '@rrs/testkit';
import { chunkPoints, MAX_CHUNK_POINTS } from '../src/quotaChunks';
import { applyRateLimit, createRateLimiter, type RateLimitConfig, type RateLimiter } from '../src/rateLimit';
import { principal } from './support';

/** A Redis connection that counts the rate limiter's increments (its Lua script, sent as EVALSHA/EVAL). */
function countingRedis(): Redis & { increments: number } {
  const redis = new Redis(TEST_REDIS_URL) as Redis & { increments: number };
  redis.increments = 0;
  const send = redis.sendCommand.bind(redis);
  redis.sendCommand = ((command: { name: string }) => {
    if (command.name === 'evalsha' || command.name === 'eval') redis.increments++;
    return send(command as Parameters<typeof send>[0]);
  }) as typeof redis.sendCommand;
  return redis;
}

/** The response fields applyRateLimit sets. */
function headerRecorder(): { res: Response; headers: Record<string, string> } {
  const headers: Record<string, string> = {};
  return { res: { setHeader: (name: string, value: string) => (headers[name.toLowerCase()] = value) } as unknown as Response, headers };
}

/** Resolves once the Redis window of `key` has ended (its counter is gone); bounded. */
async function windowEnded(redis: Redis, key: string, withinMs: number): Promise<void> {
  const deadline = Date.now() + withinMs;
  while ((await redis.exists(key)) === 1) {
    if (Date.now() > deadline) throw new Error(`${key} still counted after ${withinMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('chunk size', () => {
  it('is 1 % of the limit, at least 1 and at most MAX_CHUNK_POINTS', () => {
    expect([60, 600, 3000, 1e9].map(chunkPoints)).toEqual([1, 6, 30, MAX_CHUNK_POINTS]);
  });
});

/** Two gateway replicas (two limiters) spending one key's quota on the real Redis, in chunks. */
describe('rate limit in chunks on Redis', () => {
  const prefix = `${uniqueName('rlchunk')}:`;
  const admin = new Redis(TEST_REDIS_URL);
  const clients: Redis[] = [];
  // A replica's limiter answers from its in-memory insurance until its connection is ready.
  const replica = async (config: RateLimitConfig) => {
    const redis = countingRedis();
    clients.push(redis);
    await new Promise((resolve) => redis.once('ready', resolve));
    return { redis, limiter: createRateLimiter({ config, redis, keyPrefix: prefix }) };
  };
  const config: RateLimitConfig = { windowSeconds: 60, perPlan: { trial: 60, standard: 1000, pro: 3000 } };

  afterAll(async () => {
    const keys = await admin.keys(`${prefix}*`);
    if (keys.length > 0) await admin.del(...keys);
    await admin.quit();
    await Promise.all(clients.map((c) => c.quit()));
  });

  it('two replicas together never allow more than the limit in a window, and can spend all of it', async () => {
    const [a, b] = [await replica(config), await replica(config)];
    const key = principal({ plan: 'standard' });
    // A burst larger than the quota, on both replicas at once.
    const burst = await Promise.all(Array.from({ length: 1300 }, (_, i) => (i % 2 === 0 ? a : b).limiter.consume(key)));
    const allowedInBurst = burst.filter((d) => d.allowed).length;
    expect(allowedInBurst).toBeLessThanOrEqual(1000);
    // Refused early by at most (replicas − 1) × chunk: the points the other replica still holds.
    expect(allowedInBurst).toBeGreaterThanOrEqual(1000 - chunkPoints(1000));
    // Each replica then spends what it still holds; nothing is ever allowed past the limit.
    let drained = 0;
    for (const side of [a, b]) while ((await side.limiter.consume(key)).allowed) drained++;
    expect(allowedInBurst + drained).toBe(1000);
    expect((await a.limiter.consume(key)).allowed).toBe(false);
    expect((await b.limiter.consume(key)).allowed).toBe(false);
    // One Redis increment per chunk: 100 whole chunks, at most one split, one refusal per replica.
    expect(a.redis.increments + b.redis.increments).toBeLessThanOrEqual(1000 / chunkPoints(1000) + 3);
  });

  it('shares one reservation between the concurrent requests of a key on a replica', async () => {
    const { redis, limiter } = await replica(config);
    const decisions = await Promise.all(Array.from({ length: 30 }, () => limiter.consume(principal({ plan: 'pro' }))));
    expect(redis.increments).toBe(30);
    const key = principal({ plan: 'pro' });
    const before = redis.increments;
    const same = await Promise.all(Array.from({ length: 30 }, () => limiter.consume(key)));
    expect(redis.increments - before).toBe(1);
    expect(same.map((d) => d.remaining).sort((x, y) => y - x)).toEqual(Array.from({ length: 30 }, (_, i) => 2999 - i));
    expect(decisions.every((d) => d.allowed && d.remaining === 2999)).toBe(true);
  });

  it('takes what is left when Redis has less than a chunk, then refuses without asking Redis again', async () => {
    const { redis, limiter } = await replica(config);
    const key = principal({ plan: 'standard' });
    await admin.set(`${prefix}rl:standard:${key.keyId}`, 996, 'EX', 60);
    const decisions = [];
    for (let i = 0; i < 6; i++) decisions.push(await limiter.consume(key));
    expect(decisions.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 3],
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
      [false, 0],
    ]);
    // One increment took the last 4 points (the counter overshoots; its excess was never granted).
    expect(redis.increments).toBe(1);
    expect(Number(await admin.get(`${prefix}rl:standard:${key.keyId}`))).toBe(1006);
  });

  it('drops a chunk when the Redis window it was taken from ends', async () => {
    const { redis, limiter } = await replica({ windowSeconds: 1, perPlan: { trial: 60, standard: 1000, pro: 3000 } });
    const key = principal({ plan: 'standard' });
    const stored = `${prefix}rl:standard:${key.keyId}`;
    const first = await limiter.consume(key);
    expect([first.allowed, first.remaining]).toEqual([true, 999]);
    expect(first.resetSeconds).toBe(1);
    expect(Number(await admin.get(stored))).toBe(10);
    await windowEnded(admin, stored, 3_000);
    // The 9 points left of the old chunk are gone: the next request reserves in the new window.
    const next = await limiter.consume(key);
    expect([next.allowed, next.remaining]).toEqual([true, 999]);
    expect(redis.increments).toBe(2);
    expect(Number(await admin.get(stored))).toBe(10);
  });

  it('sets RateLimit from Redis at the last reservation plus what the replica holds, and answers 429 rate_limited the same way', async () => {
    const small = { windowSeconds: 60, perPlan: { trial: 60, standard: 200, pro: 3000 } };
    const [a, b] = [await replica(small), await replica(small)];
    const key = principal({ plan: 'standard' });
    const fields = async (limiter: RateLimiter) => {
      const { res, headers } = headerRecorder();
      await applyRateLimit(limiter, key, res);
      return headers;
    };
    // Chunks of 2: A takes points 1–2, B 3–4; each counts the other's chunk as spent from its reservation on.
    expect(await fields(a.limiter)).toEqual({ 'ratelimit-policy': '"standard";q=200;w=60', ratelimit: expect.stringMatching(/^"standard";r=199;t=(60|59)$/) });
    expect((await fields(b.limiter)).ratelimit).toMatch(/^"standard";r=197;t=\d+$/);
    expect((await fields(a.limiter)).ratelimit).toMatch(/^"standard";r=198;t=\d+$/);
    expect((await fields(a.limiter)).ratelimit).toMatch(/^"standard";r=195;t=\d+$/);
    expect((await fields(b.limiter)).ratelimit).toMatch(/^"standard";r=196;t=\d+$/);

    await admin.set(`${prefix}rl:standard:${key.keyId}`, 200, 'KEEPTTL');
    const { res, headers } = headerRecorder();
    const refusal = await applyRateLimit(b.limiter, key, res).catch((err: unknown) => err);
    expect(refusal).toBeInstanceOf(DomainError);
    expect(refusal).toMatchObject({ kind: 'rate_limited', code: 'rate_limited' });
    const retryAfter = Number(headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(headers.ratelimit).toBe(`"standard";r=0;t=${retryAfter}`);
    expect((refusal as DomainError).details).toMatchObject({ retryAfterSeconds: retryAfter });
  });

  it('keeps the chunked limit on the in-memory insurance limiter while Redis is down', async () => {
    const down = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
    down.on('error', () => undefined);
    try {
      const limiter = createRateLimiter({ config: { windowSeconds: 60, perPlan: { trial: 60, standard: 300, pro: 3000 } }, redis: down, keyPrefix: prefix });
      const key = principal({ plan: 'standard' });
      let allowed = 0;
      for (let i = 0; i < 310; i++) if ((await limiter.consume(key)).allowed) allowed++;
      expect(allowed).toBe(300);
    } finally {
      down.disconnect();
    }
  });
});
