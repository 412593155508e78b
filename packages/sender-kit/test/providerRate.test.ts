import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { TEST_REDIS_URL } from '@rrs/testkit';
import { busV1 } from '@rrs/proto';
import { createProviderRate, parseProviderRates, rateLimitedSend, RetryableSendError, senderBaseConfig, senderEnvShape, StepOutcome, type SendStep } from '../src';
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
    const step = (i: number) => busV1.StepDue.fromPartial({ stepId: `s${i}` });
    const ctx = { idempotencyKey: 'k', resumed: false, maybeWith: [] };
    // One window: 12 through one replica, 8 through the other, then neither may call the provider.
    for (let i = 0; i < 12; i++) await sendA(step(i), ctx);
    for (let i = 12; i < 20; i++) await sendB(step(i), ctx);
    const refused = await refusal(sendB(step(20), ctx));
    expect(refused.reason).toBe('rate_limited');
    expect(refused.maybeDelivered).toBe(false);
    expect(refused.retryAfterMs).toBeGreaterThan(0);
    expect(refused.retryAfterMs).toBeLessThanOrEqual(1_000);
    expect((await refusal(sendA(step(21), ctx))).reason).toBe('rate_limited');
    expect(calls).toHaveLength(20);
    // Without Redis each process keeps its own window: another provider name, a fresh one.
    const own = createProviderRate({ provider: 'smtp', perSecond: 20, keyPrefix, maxWaitMs: 0 });
    await own.acquire();
  });

  it('waits for the next window within maxWaitMs instead of refusing', async () => {
    const rate = createProviderRate({ provider: 'smsc', perSecond: 2, redis: redis(), keyPrefix: `rrs:test-${randomBytes(4).toString('hex')}:provider-rate:`, maxWaitMs: 3_000 });
    await rate.acquire();
    await rate.acquire();
    const before = Date.now();
    await rate.acquire();
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
