import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { RetryableSendError } from '@rrs/sender-kit';

/**
 * Send rates of one messenger account: a bucket of N tokens per second for the account and 1 per second
 * per chat, refilled each second (rate-limiter-flexible windows of one second). With Redis the buckets
 * are shared by every replica of the sender.
 */
export interface SendRateLimiter {
  /** Waits for a token of the account and of the chat; past `maxWaitMs`, fails retryable with Retry-After. */
  acquire(chat: string): Promise<void>;
}

export function createSendRateLimiter(options: { redis?: Redis; keyPrefix: string; perAccountPerSecond: number; perChatPerSecond: number; maxWaitMs?: number }): SendRateLimiter {
  const make = (points: number, keyPrefix: string): RateLimiterAbstract =>
    options.redis
      ? new RateLimiterRedis({ storeClient: options.redis, keyPrefix, points, duration: 1 })
      : new RateLimiterMemory({ keyPrefix, points, duration: 1 });
  const account = make(options.perAccountPerSecond, `${options.keyPrefix}:account`);
  const chat = make(options.perChatPerSecond, `${options.keyPrefix}:chat`);
  const maxWaitMs = options.maxWaitMs ?? 3_000;

  const take = async (limiter: RateLimiterAbstract, key: string, deadline: number) => {
    // Each round waits for the window to roll over, so the rounds are bounded by maxWaitMs / 1 s + 1.
    for (let round = 0; round < 10; round += 1) {
      try {
        await limiter.consume(key, 1);
        return;
      } catch (err) {
        if (!(err instanceof RateLimiterRes)) throw new RetryableSendError('rate_limiter_unavailable', 'the send-rate store (Redis) failed', { cause: err });
        const wait = Math.max(1, err.msBeforeNext);
        if (Date.now() + wait > deadline) throw new RetryableSendError('rate_limited', `send rate reached for ${key}`, { retryAfterMs: wait });
        await new Promise((r) => setTimeout(r, wait));
      }
    }
    throw new RetryableSendError('rate_limited', `send rate reached for ${key}`, { retryAfterMs: 1_000 });
  };

  return {
    async acquire(chatKey) {
      const deadline = Date.now() + maxWaitMs;
      await take(chat, chatKey, deadline);
      await take(account, 'all', deadline);
    },
  };
}
