import type { Response } from 'express';
import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { RateLimitedError, counter, type Logger } from '@rrs/runtime';
import { chunkedQuota, chunkPoints, type ChunkedQuota, type QuotaAnswer } from './quotaChunks';

/** Requests a key may make per window, by the organization's plan. */
export interface RateLimitConfig {
  windowSeconds: number;
  perPlan: { trial: number; standard: number; pro: number };
}

export const DEFAULT_RATE_LIMITS: RateLimitConfig = { windowSeconds: 60, perPlan: { trial: 60, standard: 600, pro: 3000 } };

export interface RateLimitDecision {
  allowed: boolean;
  /** The policy name, i.e. the plan: `trial`, `standard` or `pro`. */
  policy: string;
  limit: number;
  windowSeconds: number;
  remaining: number;
  /** Seconds until the quota is whole again (at least 1 while anything is used). */
  resetSeconds: number;
}

/** Who a quota is counted for: one API key, with the plan of its organization. */
export interface QuotaHolder {
  keyId: string;
  organization: { plan: string };
}

export interface RateLimiter {
  consume(principal: QuotaHolder): Promise<RateLimitDecision>;
  /**
   * The decision when this replica can make it from memory (a point of its held chunk, or a window used
   * up), counted exactly as `consume` counts it; undefined when only `consume` can answer. Lets a request
   * be admitted without waiting on anything (nearly every request: one reservation serves a chunk).
   */
  consumeHeld?(principal: QuotaHolder): RateLimitDecision | undefined;
}

const storeFailures = counter({ name: 'gateway_rate_limit_store_errors_total', help: 'Rate-limit store (Redis) calls that failed: answered by the in-memory insurance limiter (or, if that failed too, let through).' });
const refusals = counter({ name: 'gateway_rate_limited_total', help: 'Requests refused with 429, by plan.', labelNames: ['plan'] });

type Plan = keyof RateLimitConfig['perPlan'];

function planOf(principal: QuotaHolder): Plan {
  const p = principal.organization.plan;
  // A plan the gateway does not know yet (added in contacts first) gets the standard quota.
  return p === 'trial' || p === 'pro' ? p : 'standard';
}

/** The rule of one rate-limiter-flexible limiter. */
export interface LimiterRule {
  points: number;
  duration: number;
  keyPrefix: string;
  blockDuration?: number;
}

/**
 * The in-memory insurance limiter of a Redis one. rate-limiter-flexible hands it the call that failed on
 * Redis and answers with its result, so the failure itself never reaches the caller: `answered` is
 * how the gateway counts it (the calls its limits make: consume, penalty, get, delete).
 */
class InsuranceLimiter extends RateLimiterMemory {
  constructor(
    rule: LimiterRule,
    private readonly answered: () => void,
  ) {
    super(rule);
  }

  override consume(...args: Parameters<RateLimiterMemory['consume']>) {
    this.answered();
    return super.consume(...args);
  }

  override penalty(...args: Parameters<RateLimiterMemory['penalty']>) {
    this.answered();
    return super.penalty(...args);
  }

  override get(...args: Parameters<RateLimiterMemory['get']>) {
    this.answered();
    return super.get(...args);
  }

  override delete(...args: Parameters<RateLimiterMemory['delete']>) {
    this.answered();
    return super.delete(...args);
  }
}

/**
 * One rate-limiter-flexible limiter as every gateway limit keeps it: in Redis when the gateway has it
 * (shared by every replica), answered by an in-memory limiter with the same rule while Redis fails (per
 * replica, so an outage never removes the limit; `onInsurance` is told each time), and in memory
 * without Redis.
 */
export function sharedLimiter(rule: LimiterRule, redis?: Redis, onInsurance: () => void = () => undefined): RateLimiterAbstract {
  return redis
    ? new RateLimiterRedis({ ...rule, storeClient: redis, rejectIfRedisNotReady: true, insuranceLimiter: new InsuranceLimiter(rule, onInsurance) })
    : new RateLimiterMemory(rule);
}

/**
 * Per-key fixed windows (rate-limiter-flexible). With Redis the quota is shared by every gateway
 * replica; if Redis fails, an in-memory limiter with the same quota answers instead (per replica), so a
 * Redis outage neither stops the API nor removes the limit. Each replica reserves a key's points in
 * chunks (quotaChunks.ts: one store call per chunk, never over the limit, a chunk ends with its window).
 */
export function createRateLimiter(options: { config: RateLimitConfig; redis?: Redis; keyPrefix: string; logger?: Logger }): RateLimiter {
  const { config } = options;
  const quotas = {} as Record<Plan, ChunkedQuota>;
  for (const plan of Object.keys(config.perPlan) as Plan[]) {
    const limit = config.perPlan[plan];
    const store = sharedLimiter({ points: limit, duration: config.windowSeconds, keyPrefix: `${options.keyPrefix}rl:${plan}` }, options.redis, () => storeFailures.inc());
    quotas[plan] = chunkedQuota({ store, limit, chunk: chunkPoints(limit) });
  }
  // The decision is written out field by field: on Node 20 `{ ...decision, more }` costs microseconds.
  const decisionOf = (plan: Plan, answer: QuotaAnswer): RateLimitDecision => ({
    allowed: answer.allowed,
    policy: plan,
    limit: config.perPlan[plan],
    windowSeconds: config.windowSeconds,
    remaining: answer.remaining,
    resetSeconds: Math.max(1, Math.ceil(answer.msBeforeReset / 1000)),
  });
  return {
    consumeHeld(principal) {
      const plan = planOf(principal);
      const answer = quotas[plan].takeHeld(principal.keyId);
      return answer && decisionOf(plan, answer);
    },
    async consume(principal) {
      const plan = planOf(principal);
      const limit = config.perPlan[plan];
      try {
        return decisionOf(plan, await quotas[plan].take(principal.keyId));
      } catch (err) {
        storeFailures.inc();
        options.logger?.error({ err }, 'rate limiter failed; request let through');
        return { allowed: true, policy: plan, limit, windowSeconds: config.windowSeconds, remaining: limit, resetSeconds: config.windowSeconds };
      }
    },
  };
}

/**
 * Counts the request against the key's quota and sets the IETF draft-ietf-httpapi-ratelimit-headers
 * fields (structured-field form): `RateLimit-Policy: "standard";q=600;w=60` and
 * `RateLimit: "standard";r=599;t=42`. Over quota: 429 `rate_limited` with `Retry-After`.
 */
export async function applyRateLimit(limiter: RateLimiter, principal: QuotaHolder, res: Response): Promise<void> {
  answerRateLimit(await limiter.consume(principal), res);
}

/** Sets the RateLimit fields of a decision; throws the 429 when it refuses (see applyRateLimit). */
export function answerRateLimit(d: RateLimitDecision, res: Response): void {
  res.setHeader('RateLimit-Policy', policyField(d));
  res.setHeader('RateLimit', `"${d.policy}";r=${d.remaining};t=${d.resetSeconds}`);
  if (!d.allowed) {
    refusals.inc({ plan: d.policy });
    res.setHeader('Retry-After', String(d.resetSeconds));
    throw new RateLimitedError('rate_limited', `the key's quota of ${d.limit} requests per ${d.windowSeconds} s is used up; retry in ${d.resetSeconds} s`, d.resetSeconds);
  }
}

/** The RateLimit-Policy field by policy: the same few strings on every request, written once each. */
const policyFields = new Map<string, { limit: number; windowSeconds: number; field: string }>();

function policyField(d: RateLimitDecision): string {
  const known = policyFields.get(d.policy);
  if (known && known.limit === d.limit && known.windowSeconds === d.windowSeconds) return known.field;
  const field = `"${d.policy}";q=${d.limit};w=${d.windowSeconds}`;
  // Policies are plan names (a handful); a limit changed by configuration replaces its entry.
  policyFields.set(d.policy, { limit: d.limit, windowSeconds: d.windowSeconds, field });
  return field;
}
