import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { TEST_REDIS_URL } from '@rrs/testkit';
import { busV1 } from '@rrs/proto';
import { createProviderRate, parseProviderRates, PROVIDER_RATE_WINDOW_MS, rateLimitedSend, RetryableSendError, senderBaseConfig, senderEnvShape, StepOutcome, type SendStep } from '../src';
import { z } from 'zod';

const refusal = async (call: Promise<unknown>): Promise<RetryableSendError> => {
  const err = await call.then(() => null, (e: unknown) => e);
  if (!(err instanceof RetryableSendError)) throw new Error(`expected a RetryableSendError, got ${String(err)}`);
  return err;
};

describe('provider send rates', () => {
  const clients: Redis[] = [];
  afterAll(async () => {
    for (const c of clients) await c.quit();
  });
  const redis = () => {
    const c = new Redis(TEST_REDIS_URL);
    clients.push(c);
    return c;
  };

  it("two replicas share one provider account's rate through Redis; past it a send is refused retryable and not made", async () => {
    const keyPrefix = `rrs:test-${randomBytes(4).toString('hex')}:provider-rate:`;
    const [a, b] = [redis(), redis()].map((client) => createProviderRate({ provider: 'smtp', perSecond: 20, redis: client, keyPrefix, maxWaitMs: 0 }));
    const calls: string[] = [];
    const send: SendStep = async (step) => {
      calls.push(step.stepId);
      return { outcome: StepOutcome.STEP_OUTCOME_SENT };
    };
    const [sendA, sendB] = [rateLimitedSend(send, a), rateLimitedSend(send, b)];
    const step = (i: number) => busV1.StepDue.fromPartial({ stepId: `s${i}`, organizationId: 'org-a' });
    const ctx = { idempotencyKey: 'k', resumed: false, maybeWith: [] };
    // Through both replicas in turn, without waiting: each 100 ms window lets 2 calls through (20/s), then
    // neither replica may call the provider until the next window.
    const started = Date.now();
    const refusals: RetryableSendError[] = [];
    for (let i = 0; i < 40; i++) {
      const sent = (i % 2 === 0 ? sendA : sendB)(step(i), ctx);
      await sent.catch(async () => void refusals.push(await refusal(sent)));
    }
    const windows = Math.floor(Date.now() / PROVIDER_RATE_WINDOW_MS) - Math.floor(started / PROVIDER_RATE_WINDOW_MS) + 1;
    expect(calls.length).toBeGreaterThanOrEqual(2);
    expect(calls.length).toBeLessThanOrEqual(2 * windows);
    expect(refusals).toHaveLength(40 - calls.length);
    for (const refused of refusals) {
      expect(refused.reason).toBe('rate_limited');
      expect(refused.maybeDelivered).toBe(false);
      expect(refused.retryAfterMs).toBeGreaterThan(0);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(PROVIDER_RATE_WINDOW_MS);
    }
    // Without Redis each process keeps its own windows.
    const own = createProviderRate({ provider: 'smtp', perSecond: 20, keyPrefix, maxWaitMs: 1_000 });
    await own.acquire('org-a');
  });

  it('spreads the rate over each second and holds it across replicas sharing Redis: at most N in any aligned second, ⌈N/10⌉ in any 100 ms window', async () => {
    const keyPrefix = `rrs:test-${randomBytes(4).toString('hex')}:provider-rate:`;
    const perSecond = 50;
    const [a, b] = [redis(), redis()].map((client) => createProviderRate({ provider: 'smtp', perSecond, redis: client, keyPrefix, maxWaitMs: 10_000 }));
    // 150 calls asked at once, alternately through the two replicas, from two organizations.
    const taken = await Promise.all(
      Array.from({ length: 150 }, async (_, i) => {
        const window = await (i % 2 === 0 ? a : b).acquire(i % 3 === 0 ? 'org-b' : 'org-a');
        return { window, at: Date.now() };
      }),
    );
    const countBy = (keys: number[]) => [...keys.reduce((m, k) => m.set(k, (m.get(k) ?? 0) + 1), new Map<number, number>()).values()];
    // Exact, by the window each call was counted in.
    expect(Math.max(...countBy(taken.map((t) => Math.floor(t.window / 1_000))))).toBeLessThanOrEqual(perSecond);
    expect(Math.max(...countBy(taken.map((t) => t.window)))).toBeLessThanOrEqual(perSecond / 10);
    // As the caller sees it: a call is given out in its window (allowing for the round trip and a busy
    // event loop), and no 100 ms of the clock sees more than two windows' worth (a window's last calls
    // may come back after the next has begun) — not 50 at once, as one-second windows gave.
    for (const t of taken) expect(t.at - t.window).toBeLessThan(PROVIDER_RATE_WINDOW_MS + 400);
    expect(Math.max(...countBy(taken.map((t) => Math.floor(t.at / PROVIDER_RATE_WINDOW_MS))))).toBeLessThanOrEqual((2 * perSecond) / 10);
    // 150 calls at 50/s span at least 29 windows (5 in each).
    const windows = taken.map((t) => t.window);
    expect(Math.max(...windows) - Math.min(...windows)).toBeGreaterThanOrEqual(29 * PROVIDER_RATE_WINDOW_MS);
  });

  it("gives the calls round-robin between organizations: with 200 of A's calls waiting, B's call is served within the next two calls, each organization's in the order asked", async () => {
    const rate = createProviderRate({ provider: 'smtp', perSecond: 200, keyPrefix: `rrs:test-${randomBytes(4).toString('hex')}:provider-rate:`, maxWaitMs: 10_000 });
    const served: string[] = [];
    const bulk = Array.from({ length: 200 }, (_, i) => rate.acquire('org-a').then(() => void served.push(`a${i}`)));
    const order = rate.acquire('org-b').then(() => void served.push('b'));
    await Promise.all([...bulk, order]);
    expect(served.indexOf('b')).toBeLessThanOrEqual(2);
    expect(served.filter((s) => s !== 'b')).toEqual(Array.from({ length: 200 }, (_, i) => `a${i}`));
  });

  it("refuses a call whose turn cannot come within maxWaitMs, wherever it waits in the line, and serves the others", async () => {
    const rate = createProviderRate({ provider: 'smsc', perSecond: 10, redis: redis(), keyPrefix: `rrs:test-${randomBytes(4).toString('hex')}:provider-rate:`, maxWaitMs: 350 });
    const asked = Date.now();
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        rate.acquire(i % 2 === 0 ? 'org-a' : 'org-b').then(
          () => ({ served: true, after: Date.now() - asked }),
          (err: unknown) => ({ served: false, after: Date.now() - asked, err }),
        ),
      ),
    );
    // 10/s is one call a window: at most 5 of the 10 within 350 ms (4 windows begin in it, and the one it
    // began in), the rest refused, none long after its deadline (a busy event loop allowed for).
    const served = outcomes.filter((o) => o.served);
    expect(served.length).toBeGreaterThanOrEqual(1);
    expect(served.length).toBeLessThanOrEqual(5);
    for (const o of outcomes) expect(o.after).toBeLessThan(350 + 400);
    for (const o of outcomes.filter((o) => !o.served)) {
      expect(o).toMatchObject({ err: expect.objectContaining({ reason: 'rate_limited' }) });
      expect((o as { err: RetryableSendError }).err.retryAfterMs).toBeGreaterThan(0);
    }
  });

  it('waits for the next window within maxWaitMs instead of refusing', async () => {
    const rate = createProviderRate({ provider: 'smsc', perSecond: 2, redis: redis(), keyPrefix: `rrs:test-${randomBytes(4).toString('hex')}:provider-rate:`, maxWaitMs: 3_000 });
    await rate.acquire('org-a');
    await rate.acquire('org-a');
    const before = Date.now();
    await rate.acquire('org-a');
    expect(Date.now() - before).toBeGreaterThan(0);
  });

  it('is configured per provider with PROVIDER_RATE_LIMITS; a malformed value is refused', () => {
    expect(parseProviderRates('smtp=500,smsc=30')).toEqual({ smtp: 500, smsc: 30 });
    expect(parseProviderRates(undefined)).toEqual({});
    const shape = z.object(senderEnvShape);
    const vars = shape.parse({ DATABASE_URL: 'postgres://x@127.0.0.1/db', PROVIDER_RATE_LIMITS: 'smtp=500', REDIS_URL: 'redis://127.0.0.1:6379' });
    expect(senderBaseConfig(vars)).toMatchObject({ providerRates: { smtp: 500 }, redisUrl: 'redis://127.0.0.1:6379' });
    for (const bad of ['smtp', 'smtp=0', 'smtp=fast', 'smtp=5,']) {
      const parsed = shape.safeParse({ DATABASE_URL: 'postgres://x@127.0.0.1/db', PROVIDER_RATE_LIMITS: bad });
      expect(parsed.success).toBe(false);
      expect(() => parseProviderRates(bad)).toThrow(/PROVIDER_RATE_LIMITS/);
    }
  });
});
