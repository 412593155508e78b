import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { RetryableSendError } from './errors';
import type { SendStep } from './sender';

/** A provider rate's windows: a second is ten of them, aligned to the clock (window n is [100n, 100n + 100) ms since the epoch). */
export const PROVIDER_RATE_WINDOW_MS = 100;
const WINDOWS_PER_SECOND = 1_000 / PROVIDER_RATE_WINDOW_MS;

/**
 * The calls window `index` holds: perSecond spread over each second's ten windows, rounded down
 * cumulatively (⌊(i+1)·N/10⌋ − ⌊i·N/10⌋ for its place i in the second). Any ten consecutive windows —
 * an aligned second among them — hold exactly N, one window at most ⌈N/10⌉; below 10/s some windows
 * hold none (2/s: the 5th and the 10th of each second).
 */
export function providerRateWindowCalls(perSecond: number, index: number): number {
  const i = index % WINDOWS_PER_SECOND;
  return Math.floor(((i + 1) * perSecond) / WINDOWS_PER_SECOND) - Math.floor((i * perSecond) / WINDOWS_PER_SECOND);
}

/**
 * A provider account's send rate (docs/operations.md, "Fair share"): N calls a second, given out as
 * providerRateWindowCalls per 100 ms window, so a call comes about every 1/N s rather than N in a burst at
 * a second's start and then nothing for the rest of it. The rule, exact: at most N calls in any aligned
 * second (any ten consecutive windows), at most ⌈N/10⌉ in one window. With Redis each window's count is one
 * key per provider and window, shared by every replica of the sender, so the rule holds whatever the
 * replicas (windows follow each replica's clock: NTP-synced hosts agree to a few ms); without Redis each
 * process keeps its own. Between replicas a window's calls go to those that ask first (each asks for as many
 * as it has waiting, at most the window's).
 *
 * Shared between organizations round-robin: the calls waiting in this process form one line per
 * organization (first come, first served within it), and each call the account allows goes to the first
 * call of the organization whose turn it is, that organization then going to the back of the turns. The
 * sender holds a whole consumer window of steps (128+) at once, mostly a bulk's when one is running; in
 * arrival order another organization's step would wait behind all of them, here it waits for at most one
 * call of each organization waiting beside it.
 */
export interface ProviderRate {
  /**
   * Waits for a call of the account's rate, in the organization's turn; resolves with the start (ms since
   * the epoch) of the window the call was counted in. A call whose turn cannot come within `maxWaitMs`
   * fails retryable (`rate_limited`) with a Retry-After; nothing is sent.
   */
  acquire(organization: string): Promise<number>;
}

interface Waiter {
  organization: string;
  deadline: number;
  resolve: (windowStart: number) => void;
  reject: (err: Error) => void;
}

export function createProviderRate(options: { provider: string; perSecond: number; redis?: Redis; keyPrefix?: string; maxWaitMs?: number }): ProviderRate {
  const { provider, perSecond } = options;
  const keyPrefix = `${options.keyPrefix ?? 'rrs:provider-rate:'}${provider}`;
  // One key per window (`calls:<window>`); `points` is the most any window holds, and a window that holds
  // fewer is checked against its own count below. The key lives a second: longer than its window by far
  // more than replicas' clocks differ, and gone well before it could be reused.
  const mostInAWindow = Math.ceil(perSecond / WINDOWS_PER_SECOND);
  const limiter: RateLimiterAbstract = options.redis
    ? new RateLimiterRedis({ storeClient: options.redis, keyPrefix, points: mostInAWindow, duration: 1 })
    : new RateLimiterMemory({ keyPrefix, points: mostInAWindow, duration: 1 });
  const maxWaitMs = options.maxWaitMs ?? 5_000;

  // The waiting calls: one line per organization, and the organizations with calls waiting in turn order.
  const lines = new Map<string, Waiter[]>();
  let turns: string[] = [];
  let waiting = 0;
  let serving = false;

  const nextInTurn = (): Waiter => {
    const organization = turns.shift()!;
    const line = lines.get(organization)!;
    const waiter = line.shift()!;
    if (line.length > 0) turns.push(organization);
    else lines.delete(organization);
    waiting--;
    return waiter;
  };

  // At a full window: every call whose deadline comes before the account's next call is refused now
  // (it would wait past maxWaitMs anyway). Its Retry-After is when the calls still waiting would be served.
  const refuseThoseDueBefore = (nextCallAt: number) => {
    const refused: Waiter[] = [];
    for (const [organization, line] of lines) {
      const kept = line.filter((w) => (w.deadline < nextCallAt ? (refused.push(w), false) : true));
      if (kept.length > 0) lines.set(organization, kept);
      else lines.delete(organization);
    }
    if (refused.length === 0) return;
    waiting -= refused.length;
    turns = turns.filter((organization) => lines.has(organization));
    const retryAfterMs = Math.max(1, nextCallAt - Date.now()) + Math.ceil((1_000 * waiting) / perSecond);
    for (const w of refused) w.reject(new RetryableSendError('rate_limited', `${provider}: send rate of ${perSecond}/s reached`, { retryAfterMs }));
  };

  // One loop per process hands out the calls while calls wait: at each turn it asks the store for as many
  // of the window's calls as it has calls waiting (one round trip, however many: a busy event loop must
  // not leave a window's calls unused), and gets those the window still holds. The count is one atomic
  // increment, so replicas asking together get exactly the window's calls between them: the first to ask
  // is served first (replicas share the account by who asks first in each window; within the process the
  // calls go round-robin). They are given out in turn order as the answer comes back.
  const serve = async (): Promise<void> => {
    try {
      while (waiting > 0) {
        const window = Math.floor(Date.now() / PROVIDER_RATE_WINDOW_MS);
        const calls = providerRateWindowCalls(perSecond, window);
        const asked = Math.min(waiting, calls);
        let granted = 0;
        if (asked > 0) {
          let counted: RateLimiterRes;
          try {
            counted = await limiter.consume(`calls:${window}`, asked);
          } catch (err) {
            if (!(err instanceof RateLimiterRes)) {
              nextInTurn().reject(new RetryableSendError('rate_limiter_unavailable', 'the provider-rate store (Redis) failed', { cause: err }));
              continue;
            }
            counted = err;
          }
          // The window's count with ours added: of the `asked`, those within its calls are ours.
          granted = Math.max(0, Math.min(asked, calls - (counted.consumedPoints - asked)));
        }
        for (let i = 0; i < granted; i++) nextInTurn().resolve(window * PROVIDER_RATE_WINDOW_MS);
        // All asked for were granted and the window has more: ask again for calls that came meanwhile.
        if (asked > 0 && granted === asked && asked < calls) continue;
        // This window's calls are taken (here or by another replica): wait for the next window holding any.
        let next = window + 1;
        while (providerRateWindowCalls(perSecond, next) === 0) next++;
        const nextCallAt = next * PROVIDER_RATE_WINDOW_MS;
        refuseThoseDueBefore(nextCallAt);
        if (waiting > 0) await new Promise((r) => setTimeout(r, Math.max(1, nextCallAt - Date.now())));
      }
    } finally {
      serving = false;
    }
  };

  return {
    acquire(organization) {
      return new Promise<number>((resolve, reject) => {
        const line = lines.get(organization);
        const waiter = { organization, deadline: Date.now() + maxWaitMs, resolve, reject };
        if (line) line.push(waiter);
        else {
          lines.set(organization, [waiter]);
          turns.push(organization);
        }
        waiting++;
        // Started after the current task, so the calls asked for together are counted in one round trip.
        if (!serving) {
          serving = true;
          queueMicrotask(() => void serve());
        }
      });
    },
  };
}

/** The send step, each call after a call of the provider's rate, in its organization's turn. */
export function rateLimitedSend(send: SendStep, rate: ProviderRate): SendStep {
  return async (step, ctx) => {
    await rate.acquire(step.organizationId);
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
