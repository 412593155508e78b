import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { CrmError } from './types';

/**
 * The request pace of one CRM account, shared by every connector of it. Two parts:
 * - a budget of `perSecond` requests per one-second window (rate-limiter-flexible; in Redis when
 *   configured, so every replica draws from the same budget), and
 * - in this process, requests to the account start at least 1000/perSecond ms apart, which alone keeps
 *   any sliding second at or under the limit while one replica does the work (fixed windows would let a
 *   burst at the end of one window and the start of the next through together).
 */
export interface RequestPacer {
  /** Waits for the account's turn; past `maxWaitMs` fails `rate_limited`, to be retried later. */
  acquire(account: string, perSecond: number, maxWaitMs: number): Promise<void>;
}

export function createRequestPacer(options: { redis?: Redis; keyPrefix: string }): RequestPacer {
  const limiters = new Map<number, RateLimiterAbstract>();
  const limiterFor = (perSecond: number): RateLimiterAbstract => {
    let limiter = limiters.get(perSecond);
    if (!limiter) {
      const keyPrefix = `${options.keyPrefix}:crm:${perSecond}`;
      limiter = options.redis
        ? new RateLimiterRedis({ storeClient: options.redis, keyPrefix, points: perSecond, duration: 1 })
        : new RateLimiterMemory({ keyPrefix, points: perSecond, duration: 1 });
      limiters.set(perSecond, limiter);
    }
    return limiter;
  };
  /** Per account: when the next request may start in this process. */
  const nextStart = new Map<string, number>();
  /** Per account: when the last request actually started here. */
  const lastStart = new Map<string, number>();

  return {
    async acquire(account, perSecond, maxWaitMs) {
      const deadline = Date.now() + maxWaitMs;
      // 10 % over the exact spacing, so network jitter never lands 8 of 7 allowed in one of the CRM's seconds.
      const spacing = Math.ceil((1000 / perSecond) * 1.1);
      const slot = Math.max(Date.now(), nextStart.get(account) ?? 0);
      if (slot > deadline) throw new CrmError('rate_limited', `request pace of ${account} reached`, { retryAfterMs: slot - Date.now() });
      nextStart.set(account, slot + spacing);
      if (slot > Date.now()) await sleep(slot - Date.now());
      // Timers that fire late (a busy event loop) wake together: each start keeps its spacing from the
      // last real one, never only from its reserved slot, or a stall would release a burst.
      for (let gap = Date.now() - (lastStart.get(account) ?? -Infinity); gap < spacing; gap = Date.now() - (lastStart.get(account) ?? -Infinity)) {
        await sleep(spacing - gap);
      }
      lastStart.set(account, Date.now());
      const limiter = limiterFor(perSecond);
      for (;;) {
        try {
          await limiter.consume(account, 1);
          return;
        } catch (err) {
          if (!(err instanceof RateLimiterRes)) throw new CrmError('unavailable', 'the CRM request budget store (Redis) failed', { cause: err });
          const wait = Math.max(1, err.msBeforeNext);
          if (Date.now() + wait > deadline) throw new CrmError('rate_limited', `request budget of ${account} spent`, { retryAfterMs: wait });
          await sleep(wait);
        }
      }
    },
  };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export interface CrmHttpOptions {
  pacer: RequestPacer;
  /** The account the pace is kept for (amoCRM base URL, Bitrix24 portal). */
  account: string;
  perSecond: number;
  timeoutMs: number;
  /** Longest wait for a turn, and for in-call retries after the CRM said "too many requests". */
  maxRateWaitMs: number;
}

export interface CrmResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON, the text when it is not JSON, or null when empty. */
  body: unknown;
}

/**
 * One CRM request with the account's pace and a timeout. `isRateLimited` tells the CRM's "too many
 * requests" answer (amoCRM 429; Bitrix24 503 QUERY_LIMIT_EXCEEDED): it is retried here after
 * Retry-After (or 1 s, 2 s, …) while the wait budget lasts, then fails `rate_limited`. A network error
 * or timeout fails `unavailable`. Every other answer is returned to the adapter to judge.
 */
export async function crmRequest(url: string, init: RequestInit, options: CrmHttpOptions, isRateLimited: (res: CrmResponse) => boolean): Promise<CrmResponse> {
  const deadline = Date.now() + options.maxRateWaitMs;
  for (let attempt = 0; ; attempt++) {
    await options.pacer.acquire(options.account, options.perSecond, Math.max(0, deadline - Date.now()));
    let res: CrmResponse;
    try {
      const raw = await fetch(url, { ...init, redirect: 'error', signal: AbortSignal.timeout(options.timeoutMs) });
      const text = await raw.text();
      let body: unknown = text === '' ? null : text;
      if (text !== '') {
        try {
          body = JSON.parse(text);
        } catch {
          /* not JSON: keep the text */
        }
      }
      res = { status: raw.status, headers: raw.headers, body };
    } catch (err) {
      throw new CrmError('unavailable', `${new URL(url).host}: ${(err as Error).name === 'TimeoutError' ? 'timed out' : (err as Error).message}`, { cause: err });
    }
    if (!isRateLimited(res)) return res;
    const wait = retryAfterMs(res.headers) ?? 1000 * 2 ** attempt;
    if (Date.now() + wait > deadline) throw new CrmError('rate_limited', `${new URL(url).host} answered ${res.status}: too many requests`, { status: res.status, retryAfterMs: wait });
    await sleep(wait);
  }
}

function retryAfterMs(headers: Headers): number | undefined {
  const value = headers.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

/** The error of an answer the adapter did not expect, by its status. */
export function crmErrorOf(res: CrmResponse, what: string): CrmError {
  const detail = typeof res.body === 'string' ? res.body.slice(0, 200) : JSON.stringify(res.body ?? '').slice(0, 200);
  if (res.status === 401 || res.status === 403) return new CrmError('unauthorized', `${what}: ${res.status} ${detail}`, { status: res.status });
  if (res.status === 429) return new CrmError('rate_limited', `${what}: ${res.status} ${detail}`, { status: res.status });
  if (res.status >= 500) return new CrmError('unavailable', `${what}: ${res.status} ${detail}`, { status: res.status });
  return new CrmError('rejected', `${what}: ${res.status} ${detail}`, { status: res.status });
}
