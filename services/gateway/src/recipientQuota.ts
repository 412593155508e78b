import type { Redis } from 'ioredis';
import { PLAN_RECIPIENT_QUOTAS, PLANS, type Plan } from '@rrs/proto';
import { counter, RateLimitedError, type Logger } from '@rrs/runtime';

/** Recipients a plan may create per minute and per day (PLAN_RECIPIENT_QUOTAS of @rrs/proto unless a deployment overrides them). */
export type RecipientQuotaConfig = Record<Plan, { perMinute: number; perDay: number }>;

/** The two windows of a recipient budget, as they are named in the RateLimit fields. */
export const RECIPIENT_WINDOWS = [
  { name: 'recipients-minute', seconds: 60, budget: 'perMinute' },
  { name: 'recipients-day', seconds: 86_400, budget: 'perDay' },
] as const;

export interface RecipientWindowState {
  /** `recipients-minute` or `recipients-day`. */
  name: string;
  limit: number;
  windowSeconds: number;
  remaining: number;
  resetSeconds: number;
}

export interface RecipientQuotaDecision {
  allowed: boolean;
  plan: Plan;
  windows: RecipientWindowState[];
}

/** Who recipients are counted for: the organization, on its plan. */
export interface RecipientHolder {
  organization: { id: string; plan: string };
}

export interface RecipientQuota {
  /** Takes `recipients` from both windows at once, or from neither when either has too few left. */
  consume(holder: RecipientHolder, recipients: number): Promise<RecipientQuotaDecision>;
  /** Gives back what a request took when it created nothing (refused downstream, or an idempotent replay). */
  refund(holder: RecipientHolder, recipients: number): Promise<void>;
}

const storeFailures = counter({ name: 'gateway_recipient_quota_store_errors_total', help: 'Recipient quota store (Redis) failures answered by the in-memory insurance counter.' });
const refusals = counter({ name: 'gateway_recipient_quota_exceeded_total', help: 'Requests refused with 429 recipient_quota_exceeded, by plan.', labelNames: ['plan'] });

function planOf(holder: RecipientHolder): Plan {
  // A plan the gateway does not know yet (added in contacts first) gets the standard budget.
  return (PLANS as readonly string[]).includes(holder.organization.plan) ? (holder.organization.plan as Plan) : 'standard';
}

interface Counts {
  allowed: boolean;
  used: [number, number];
  msLeft: [number, number];
}

interface Store {
  take(keys: [string, string], n: number, limits: [number, number], windowsMs: [number, number]): Promise<Counts>;
  give(keys: [string, string], n: number): Promise<void>;
}

/** One process (the all-in-one, or a replica while Redis is away): fixed windows in a Map; JavaScript runs it without interleaving. */
function memoryStore(): Store {
  const windows = new Map<string, { used: number; resetAt: number }>();
  const current = (key: string, windowMs: number, now: number) => {
    let w = windows.get(key);
    if (!w || w.resetAt <= now) {
      w = { used: 0, resetAt: now + windowMs };
      windows.set(key, w);
    }
    return w;
  };
  return {
    async take(keys, n, limits, windowsMs) {
      const now = Date.now();
      const ws = [current(keys[0], windowsMs[0], now), current(keys[1], windowsMs[1], now)];
      const allowed = ws.every((w, i) => w.used + n <= limits[i]);
      if (allowed) for (const w of ws) w.used += n;
      return { allowed, used: [ws[0].used, ws[1].used], msLeft: [ws[0].resetAt - now, ws[1].resetAt - now] };
    },
    async give(keys, n) {
      for (const key of keys) {
        const w = windows.get(key);
        if (w) w.used = Math.max(0, w.used - n);
      }
    },
  };
}

/**
 * Both windows checked and taken in one Lua script, so concurrent requests on any replica never pass
 * a budget together. A window starts with its first recipient and expires `windowMs` later.
 */
const TAKE = `
local n = tonumber(ARGV[1])
local used = {}
local left = {}
for i = 1, 2 do
  used[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
  left[i] = redis.call('PTTL', KEYS[i])
  if left[i] < 0 then left[i] = tonumber(ARGV[3 + i]) end
end
if used[1] + n > tonumber(ARGV[2]) or used[2] + n > tonumber(ARGV[3]) then
  return {0, used[1], used[2], left[1], left[2]}
end
for i = 1, 2 do
  used[i] = redis.call('INCRBY', KEYS[i], n)
  if redis.call('PTTL', KEYS[i]) < 0 then redis.call('PEXPIRE', KEYS[i], ARGV[3 + i]) end
end
return {1, used[1], used[2], left[1], left[2]}
`;

const GIVE = `
for i = 1, 2 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    if redis.call('DECRBY', KEYS[i], ARGV[1]) < 0 then redis.call('SET', KEYS[i], 0, 'KEEPTTL') end
  end
end
return 1
`;

function redisStore(redis: Redis): Store {
  return {
    async take(keys, n, limits, windowsMs) {
      const r = (await redis.eval(TAKE, 2, keys[0], keys[1], n, limits[0], limits[1], windowsMs[0], windowsMs[1])) as number[];
      return { allowed: r[0] === 1, used: [Number(r[1]), Number(r[2])], msLeft: [Number(r[3]), Number(r[4])] };
    },
    async give(keys, n) {
      await redis.eval(GIVE, 2, keys[0], keys[1], n);
    },
  };
}

/**
 * Per-organization recipient budgets by plan. With Redis they are shared by every replica; if Redis
 * fails, an in-memory counter with the same budget answers (per replica), so an outage neither stops
 * sending nor removes the budget.
 */
export function createRecipientQuota(options: { config?: RecipientQuotaConfig; redis?: Redis; keyPrefix: string; logger?: Logger }): RecipientQuota {
  const config = options.config ?? PLAN_RECIPIENT_QUOTAS;
  const memory = memoryStore();
  const shared = options.redis ? redisStore(options.redis) : undefined;
  const windowsMs: [number, number] = [RECIPIENT_WINDOWS[0].seconds * 1000, RECIPIENT_WINDOWS[1].seconds * 1000];
  const keysOf = (holder: RecipientHolder): [string, string] => [
    `${options.keyPrefix}rq:m:${holder.organization.id}`,
    `${options.keyPrefix}rq:d:${holder.organization.id}`,
  ];
  return {
    async consume(holder, recipients) {
      const plan = planOf(holder);
      const limits: [number, number] = [config[plan].perMinute, config[plan].perDay];
      const keys = keysOf(holder);
      let counts: Counts;
      try {
        counts = await (shared ?? memory).take(keys, recipients, limits, windowsMs);
      } catch (err) {
        storeFailures.inc();
        options.logger?.error({ err }, 'recipient quota store failed; counted in memory');
        counts = await memory.take(keys, recipients, limits, windowsMs);
      }
      return {
        allowed: counts.allowed,
        plan,
        windows: RECIPIENT_WINDOWS.map((w, i) => ({
          name: w.name,
          limit: limits[i],
          windowSeconds: w.seconds,
          remaining: Math.max(0, limits[i] - counts.used[i]),
          resetSeconds: Math.max(1, Math.ceil(counts.msLeft[i] / 1000)),
        })),
      };
    },
    async refund(holder, recipients) {
      const keys = keysOf(holder);
      try {
        await (shared ?? memory).give(keys, recipients);
      } catch (err) {
        storeFailures.inc();
        options.logger?.error({ err }, 'recipient quota store failed; refund lost');
      }
    },
  };
}

/** Adds the recipient windows to the request's RateLimit fields (after the key's request policy, when the route has one). */
export function setRecipientHeaders(res: { getHeader(name: string): unknown; setHeader(name: string, value: string): unknown }, d: RecipientQuotaDecision): void {
  const join = (name: string, items: string[]) => {
    const before = res.getHeader(name);
    res.setHeader(name, [...(before ? [String(before)] : []), ...items].join(', '));
  };
  join('RateLimit-Policy', d.windows.map((w) => `"${w.name}";q=${w.limit};w=${w.windowSeconds}`));
  join('RateLimit', d.windows.map((w) => `"${w.name}";r=${w.remaining};t=${w.resetSeconds}`));
}

/**
 * Takes the request's recipients from the organization's budgets and sets the RateLimit fields in
 * recipients. Over either budget: 429 `recipient_quota_exceeded` with `Retry-After`, nothing taken.
 */
export async function applyRecipientQuota(
  quota: RecipientQuota,
  holder: RecipientHolder,
  recipients: number,
  res: { getHeader(name: string): unknown; setHeader(name: string, value: string): unknown },
): Promise<void> {
  const d = await quota.consume(holder, recipients);
  setRecipientHeaders(res, d);
  if (d.allowed) return;
  refusals.inc({ plan: d.plan });
  // The window that refused: the first one without room for the request; it is retried when that one resets.
  const blocking = d.windows.find((w) => w.remaining < recipients) ?? d.windows[0];
  const whole = recipients > blocking.limit;
  throw new RateLimitedError(
    'recipient_quota_exceeded',
    whole
      ? `the request has ${recipients} recipients, more than the ${d.plan} plan's whole budget of ${blocking.limit} per ${blocking.windowSeconds === 60 ? 'minute' : 'day'}; split it`
      : `the organization's budget of ${blocking.limit} recipients per ${blocking.windowSeconds === 60 ? 'minute' : 'day'} has ${blocking.remaining} left, fewer than the ${recipients} of this request; retry in ${blocking.resetSeconds} s`,
    blocking.resetSeconds,
    { details: { recipients, quota: blocking.name, limit: blocking.limit, remaining: blocking.remaining } },
  );
}
