import { setTimeout as sleep } from 'node:timers/promises';
import { IDEMPOTENCY_KEY_HEADER } from './idempotency';

/**
 * Statuses that mean "not now" rather than "not this", retried on every call: 429 (rate limited) and
 * 503 (a dependency is down). Any other 4xx says the request itself is wrong, and sending it again
 * cannot help.
 */
export const RETRYABLE_STATUSES: readonly number[] = [429, 503];

/**
 * Retried only on a call that is safe to send twice (see `isSafeToRepeat`): the outcome of the first
 * attempt is unknown (a 500, a proxy's 502 or 504, a connection that broke), and the second attempt
 * either finds the first one's saved answer (a replay) or does the work once.
 */
export const RETRYABLE_WHEN_SAFE_STATUSES: readonly number[] = [500, 502, 504];

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
 * A request that may be sent again when the first attempt's outcome is unknown: a GET or HEAD (they
 * change nothing), or any request carrying an Idempotency-Key (the service saves the first answer with
 * the effect, in one transaction, and answers a repeat from it). The client gives every POST a key.
 */
export function isSafeToRepeat(request: Request): boolean {
  return request.method === 'GET' || request.method === 'HEAD' || request.headers.has(IDEMPOTENCY_KEY_HEADER);
}

/** 409 `idempotency_key_in_use`: the first attempt with this key is still running (its answer comes with `Retry-After`). */
async function keyInUse(response: Response): Promise<boolean> {
  if (response.status !== 409) return false;
  try {
    return ((await response.clone().json()) as { code?: unknown }).code === 'idempotency_key_in_use';
  } catch {
    return false;
  }
}

/**
 * `fetch` that sends a request again when that can only help and never do the work twice:
 * - after a 429 or 503, any request, waiting what `Retry-After` asks;
 * - after a 500, 502 or 504, a broken connection (fetch rejects) or a 409 `idempotency_key_in_use`
 *   (an earlier attempt of the same call is still running), only a request that is safe to repeat
 *   (`isSafeToRepeat`: a GET, or a POST with its Idempotency-Key, kept by every attempt).
 * Every attempt is a clone of the same request. When the retries run out (or the wait asked is longer
 * than `maxDelayMs`) the last response is returned unchanged — the caller reads its problem details like
 * any other error — or the last network error is thrown. An aborted request is never retried.
 */
export function retryingFetch(send: Fetch, policy: RetryPolicy = {}): Fetch {
  const retries = policy.retries ?? 3;
  const baseDelayMs = policy.baseDelayMs ?? 1000;
  const maxDelayMs = policy.maxDelayMs ?? 60_000;
  return async (request) => {
    const safe = isSafeToRepeat(request);
    for (let retry = 0; ; retry++) {
      const last = retry >= retries;
      let response: Response;
      try {
        response = await send(last ? request : request.clone());
      } catch (err) {
        if (last || !safe || request.signal.aborted) throw err;
        await sleep(baseDelayMs * 2 ** retry, undefined, { signal: request.signal });
        continue;
      }
      if (last) return response;
      const again = RETRYABLE_STATUSES.includes(response.status) || (safe && (RETRYABLE_WHEN_SAFE_STATUSES.includes(response.status) || (await keyInUse(response))));
      if (!again) return response;
      const delay = retryAfterMs(response.headers.get('retry-after')) ?? baseDelayMs * 2 ** retry;
      if (delay > maxDelayMs) return response;
      // The body of a response we drop is read to the end, so its connection can be reused.
      await response.arrayBuffer().catch(() => undefined);
      await sleep(delay, undefined, { signal: request.signal });
    }
  };
}
