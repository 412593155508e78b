import type { Redis } from 'ioredis';
import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { RateLimitedError, type Logger } from '@rrs/runtime';
import { sharedLimiter } from '../rateLimit';

/**
 * Failed sign-ins allowed before the account API refuses more with 429 `too_many_sign_in_attempts`:
 * per email from one address (someone guessing one person's password), and per address over all emails
 * (someone trying many people's). A success clears the email's count from that address.
 */
export interface SignInThrottleConfig {
  perEmailAndAddress: { failures: number; windowSeconds: number };
  perAddress: { failures: number; windowSeconds: number };
}

export const DEFAULT_SIGN_IN_THROTTLE: SignInThrottleConfig = {
  perEmailAndAddress: { failures: 5, windowSeconds: 15 * 60 },
  perAddress: { failures: 50, windowSeconds: 60 * 60 },
};

export interface SignInThrottle {
  /** Throws 429 `too_many_sign_in_attempts` (with Retry-After) while either count is used up. */
  check(email: string, address: string): Promise<void>;
  failed(email: string, address: string): Promise<void>;
  succeeded(email: string, address: string): Promise<void>;
}

/** rate-limiter-flexible on the gateway's Redis (shared by replicas; in memory when Redis fails or is not configured). */
export function createSignInThrottle(options: { config?: SignInThrottleConfig; redis?: Redis; keyPrefix: string; logger?: Logger }): SignInThrottle {
  const config = options.config ?? DEFAULT_SIGN_IN_THROTTLE;
  const limiter = (name: string, rule: { failures: number; windowSeconds: number }): RateLimiterAbstract => {
    const base = { points: rule.failures, duration: rule.windowSeconds, keyPrefix: `${options.keyPrefix}signin:${name}` };
    return sharedLimiter(base, options.redis);
  };
  const byEmail = limiter('email', config.perEmailAndAddress);
  const byAddress = limiter('address', config.perAddress);
  const emailKey = (email: string, address: string) => `${email.trim().toLowerCase()}|${address}`;

  const refuse = (res: RateLimiterRes) => {
    const seconds = Math.max(1, Math.ceil(res.msBeforeNext / 1000));
    return new RateLimitedError('too_many_sign_in_attempts', `too many failed sign-ins; try again in ${seconds} s`, seconds);
  };
  return {
    async check(email, address) {
      const [a, b] = await Promise.all([byEmail.get(emailKey(email, address)), byAddress.get(address)]).catch((err: unknown) => {
        options.logger?.error({ err }, 'sign-in throttle store failed; attempt let through');
        return [null, null];
      });
      if (a && a.consumedPoints >= config.perEmailAndAddress.failures) throw refuse(a);
      if (b && b.consumedPoints >= config.perAddress.failures) throw refuse(b);
    },
    async failed(email, address) {
      // A rejection only says the count is now over: the next check refuses.
      await Promise.allSettled([byEmail.consume(emailKey(email, address)), byAddress.consume(address)]);
    },
    async succeeded(email, address) {
      await byEmail.delete(emailKey(email, address)).catch(() => undefined);
    },
  };
}
