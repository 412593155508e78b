import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { RetryableSendError } from './errors';
import type { SendStep } from './sender';

/**
 * A provider account's send rate (docs/operations.md, "Fair share"): N calls a second, in windows of one
 * second. With Redis the window is shared by every replica of the sender (one key per provider), so the
 * account's rate holds whatever the replicas; without, each process keeps its own.
 *
 * It is shared between organizations the fair way because of what reaches it: the scheduler dispatches
 * in fair order and keeps at most DISPATCH_IN_FLIGHT_PER_CHANNEL steps of a channel in flight, so the
 * steps waiting here are a short queue already in fair order; they take the tokens as they come.
 */
export interface ProviderRate {
  /** Waits for a token; past `maxWaitMs`, fails retryable (`rate_limited`) with a Retry-After. */
  acquire(): Promise<void>;
}

export function createProviderRate(options: { provider: string; perSecond: number; redis?: Redis; keyPrefix?: string; maxWaitMs?: number }): ProviderRate {
  const keyPrefix = `${options.keyPrefix ?? 'rrs:provider-rate:'}${options.provider}`;
  const limiter: RateLimiterAbstract = options.redis
    ? new RateLimiterRedis({ storeClient: options.redis, keyPrefix, points: options.perSecond, duration: 1 })
    : new RateLimiterMemory({ keyPrefix, points: options.perSecond, duration: 1 });
  const maxWaitMs = options.maxWaitMs ?? 5_000;
  const take = async (deadline: number): Promise<void> => {
    // Each round waits for the window to roll over: at most maxWaitMs / 1 s + 1 rounds.
    for (;;) {
      try {
        await limiter.consume('calls', 1);
        return;
      } catch (err) {
        if (!(err instanceof RateLimiterRes)) throw new RetryableSendError('rate_limiter_unavailable', 'the provider-rate store (Redis) failed', { cause: err });
        const wait = Math.max(1, err.msBeforeNext);
        if (Date.now() + wait > deadline) throw new RetryableSendError('rate_limited', `${options.provider}: send rate of ${options.perSecond}/s reached`, { retryAfterMs: wait });
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  };
  // The process's calls take tokens one at a time, in the order they asked: a step that came first is
  // not overtaken by later ones racing for the next window (they arrive in fair order; they leave in it).
  let line: Promise<void> = Promise.resolve();
  return {
    acquire() {
      const deadline = Date.now() + maxWaitMs;
      const turn = line.then(() => take(deadline));
      line = turn.catch(() => undefined);
      return turn;
    },
  };
}

/** The send step, each call after a token of the provider's rate. */
export function rateLimitedSend(send: SendStep, rate: ProviderRate): SendStep {
  return async (step, ctx) => {
    await rate.acquire();
    return send(step, ctx);
  };
}

/**
 * `PROVIDER_RATE_LIMITS`: `name=perSecond` pairs, comma-separated (`smtp=500,smsc=30`); a channel's
 * limit is its primary provider's (the first of its chain).
 */
export function parseProviderRates(value: string | undefined): Record<string, number> {
  const rates: Record<string, number> = {};
  if (!value) return rates;
  for (const pair of value.split(',').map((s) => s.trim())) {
    const m = /^([a-z0-9_-]+)=(\d+)$/.exec(pair);
    if (!m || Number(m[2]) < 1) throw new Error(`PROVIDER_RATE_LIMITS: "${pair}" is not name=perSecond (a whole number ≥ 1)`);
    rates[m[1]] = Number(m[2]);
  }
  return rates;
}
