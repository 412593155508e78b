import type { Redis } from 'ioredis';
import { RateLimiterRes } from 'rate-limiter-flexible';
import { counter, type Logger } from '@rrs/runtime';
import { sharedLimiter } from './rateLimit';

/**
 * How many failures one client address may make before it is refused for a while: `failures` within
 * `windowSeconds`, then every request of that kind from the address is answered 429 for `blockSeconds`
 * (the right credential too, so guessing on after the limit learns nothing). docs/security.md, "Per-address limits".
 */
export interface FailureRule {
  failures: number;
  windowSeconds: number;
  blockSeconds: number;
}

/** The per-address failure limits, by what fails. */
export const ADDRESS_FAILURE_RULES = {
  /** Wrong admin tokens (the admin API). */
  adminAuth: { failures: 10, windowSeconds: 600, blockSeconds: 900 },
  /** Malformed, unknown or revoked API keys (the public API). */
  apiKeyAuth: { failures: 30, windowSeconds: 60, blockSeconds: 300 },
  /** Review and unsubscribe links whose token does not exist (`/r/…`, `/u/…`). */
  linkToken: { failures: 30, windowSeconds: 60, blockSeconds: 300 },
  /** Console invitation and password-reset links that are unknown, expired or used (`/account/v1/invitations/accept`, `/password-reset`). */
  accountToken: { failures: 10, windowSeconds: 600, blockSeconds: 900 },
} as const satisfies Record<string, FailureRule>;

export type FailureKind = keyof typeof ADDRESS_FAILURE_RULES;

/** Failures counted per client address; with Redis shared by every gateway replica. */
export interface FailureLimiter {
  readonly kind: FailureKind;
  /** Seconds the address is still refused for; 0 = it may try. */
  blockedFor(address: string): Promise<number>;
  /** True when this replica found the address not blocked within CLEAN_ADDRESS_CACHE_MS: `blockedFor` answers 0 without the store. */
  isClean(address: string): boolean;
  /** Counts one failure; returns the seconds the address is now refused for (0 = still under the limit). */
  fail(address: string): Promise<number>;
}

export type FailureLimiters = Record<FailureKind, FailureLimiter>;

const storeErrors = counter({ name: 'gateway_address_limit_store_errors_total', help: 'Per-address limit store (Redis) failures answered by the in-memory insurance limiter.' });
const blocked = counter({ name: 'gateway_address_blocked_total', help: 'Requests refused because their client address failed too often, by kind.', labelNames: ['kind'] });

const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

/**
 * How long a replica takes an address found not blocked at its word, without asking Redis again. Every
 * authenticated request asks; asking the store each time cost the public API a third of its throughput.
 * A block counted on another replica is seen here at most this late; a failure counted here is seen at once.
 */
export const CLEAN_ADDRESS_CACHE_MS = 1_000;
/** Addresses remembered as clean, at most; past it the memory starts over. */
const CLEAN_ADDRESS_CACHE_SIZE = 10_000;

/**
 * One limiter per kind (rate-limiter-flexible): failures are consumed points, over the limit the key is
 * blocked for `blockSeconds`. With Redis the count is shared across replicas; if Redis fails, an
 * in-memory limiter with the same rule answers (per replica), so an outage does not remove the limit.
 */
export function createFailureLimiters(options: { redis?: Redis; keyPrefix: string; logger?: Logger; rules?: Partial<Record<FailureKind, FailureRule>> }): FailureLimiters {
  const out = {} as FailureLimiters;
  for (const kind of Object.keys(ADDRESS_FAILURE_RULES) as FailureKind[]) {
    const rule = options.rules?.[kind] ?? ADDRESS_FAILURE_RULES[kind];
    const base = { points: rule.failures, duration: rule.windowSeconds, blockDuration: rule.blockSeconds, keyPrefix: `${options.keyPrefix}fail:${kind}` };
    const limiter = sharedLimiter(base, options.redis, () => storeErrors.inc());
    const cleanUntil = new Map<string, number>();
    // One store lookup per address at a time: when the 1-s view ends, the requests in flight share it.
    const checking = new Map<string, Promise<number>>();
    const lookUp = async (address: string): Promise<number> => {
      const asked = Date.now();
      try {
        const res = await limiter.get(address);
        if (!res || res.consumedPoints <= rule.failures) {
          if (cleanUntil.size >= CLEAN_ADDRESS_CACHE_SIZE) cleanUntil.clear();
          cleanUntil.set(address, asked + CLEAN_ADDRESS_CACHE_MS);
          return 0;
        }
        return seconds(res.msBeforeNext);
      } catch (err) {
        storeErrors.inc();
        options.logger?.error({ err, kind }, 'per-address limit store failed; request let through');
        return 0;
      }
    };
    const isClean = (address: string) => (cleanUntil.get(address) ?? 0) > Date.now();
    out[kind] = {
      kind,
      isClean,
      async blockedFor(address) {
        if (isClean(address)) return 0;
        let check = checking.get(address);
        if (!check) {
          check = lookUp(address).finally(() => checking.delete(address));
          checking.set(address, check);
        }
        const blockedSeconds = await check;
        if (blockedSeconds > 0) blocked.inc({ kind });
        return blockedSeconds;
      },
      async fail(address) {
        cleanUntil.delete(address);
        try {
          await limiter.consume(address, 1);
          return 0;
        } catch (err) {
          if (err instanceof RateLimiterRes) {
            blocked.inc({ kind });
            return seconds(err.msBeforeNext);
          }
          storeErrors.inc();
          options.logger?.error({ err, kind }, 'per-address limit store failed; failure not counted');
          return 0;
        }
      },
    };
  }
  return out;
}
