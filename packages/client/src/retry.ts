import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Statuses that mean "not now" rather than "not this": 429 (rate limited) and 503 (a dependency is
 * down). Any other 4xx says the request itself is wrong, and sending it again cannot help.
 */
export const RETRYABLE_STATUSES: readonly number[] = [429, 503];

export interface RetryPolicy {
  /** Attempts after the first one. Default 3; 0 turns retries off. */
  retries?: number;
  /** The wait when the response has no usable `Retry-After`: `baseDelayMs · 2^n` for the n-th retry. Default 1000. */
  baseDelayMs?: number;
  /** A `Retry-After` longer than this is not waited for: the response is returned as it is. Default 60 000. */
  maxDelayMs?: number;
}

type Fetch = (request: Request) => Promise<Response>;

/** Milliseconds a `Retry-After` value (delay-seconds or an HTTP date, RFC 9110 §10.2.3) asks for; undefined when unusable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  // An HTTP date names its day and month; Date.parse alone would also take "-1" as a year.
  if (!/^[A-Za-z]{3}, /.test(trimmed)) return undefined;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * `fetch` that sends a request again after a 429 or 503, waiting what `Retry-After` asks. Every attempt
 * is a clone of the same request, so a POST keeps its Idempotency-Key and a retry can never do the
 * work twice. When the retries run out (or the wait asked is longer than `maxDelayMs`) the last response
 * is returned unchanged: the caller reads its problem details like any other error.
 */
export function retryingFetch(send: Fetch, policy: RetryPolicy = {}): Fetch {
  const retries = policy.retries ?? 3;
  const baseDelayMs = policy.baseDelayMs ?? 1000;
  const maxDelayMs = policy.maxDelayMs ?? 60_000;
  return async (request) => {
    for (let retry = 0; ; retry++) {
      const response = await send(retry < retries ? request.clone() : request);
      if (retry >= retries || !RETRYABLE_STATUSES.includes(response.status)) return response;
      const delay = retryAfterMs(response.headers.get('retry-after')) ?? baseDelayMs * 2 ** retry;
      if (delay > maxDelayMs) return response;
      // The body of a response we drop is read to the end, so its connection can be reused.
      await response.arrayBuffer().catch(() => undefined);
      await sleep(delay, undefined, { signal: request.signal });
    }
  };
}
