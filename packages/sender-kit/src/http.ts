import { PermanentSendError, RetryableSendError } from './errors';

/** Reads a Retry-After header (delay-seconds or an HTTP date) as milliseconds from now. */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1_000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

export interface ProviderRequestOptions {
  /** Provider name for error messages. */
  provider: string;
  timeoutMs: number;
  /**
   * Reads the wait out of a 429's body, for providers that put it there rather than in Retry-After
   * (Telegram: `parameters.retry_after`); the header wins when both are given.
   */
  retryAfterFromBody?: (body: string) => number | undefined;
}

/** Network errors raised before a request could reach the provider: it cannot have the message. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * One HTTP call to a provider, with its failures sorted: a timeout, a network error, 429 and 5xx are
 * retryable (429 and 503 carry the provider's Retry-After); other non-2xx answers are returned for the
 * adapter to read, since providers put their own error codes in the body. A timeout, a connection lost
 * after connecting and a 5xx are marked `maybeDelivered`: the provider may have taken the request.
 */
export async function providerFetch(url: string, init: RequestInit, options: ProviderRequestOptions): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(url, { ...init, signal: AbortSignal.timeout(options.timeoutMs) });
  } catch (err) {
    const timedOut = (err as Error).name === 'TimeoutError' || (err as Error).name === 'AbortError';
    const code = ((err as Error).cause as { code?: string } | undefined)?.code;
    throw new RetryableSendError(timedOut ? 'provider_timeout' : 'provider_unreachable', `${options.provider}: ${timedOut ? `no answer within ${options.timeoutMs} ms` : (err as Error).message}${code ? ` (${code})` : ''}`, {
      cause: err,
      maybeDelivered: timedOut || !code || !NOT_CONNECTED.has(code),
    });
  }
  if (res.status === 429) {
    const fromBody = options.retryAfterFromBody ? options.retryAfterFromBody(await res.text().catch(() => '')) : (await res.body?.cancel(), undefined);
    throw new RetryableSendError('provider_rate_limited', `${options.provider}: 429 Too Many Requests`, { retryAfterMs: parseRetryAfter(res.headers.get('retry-after')) ?? fromBody });
  }
  if (res.status >= 500) {
    await res.body?.cancel();
    throw new RetryableSendError('provider_unavailable', `${options.provider}: HTTP ${res.status}`, { retryAfterMs: parseRetryAfter(res.headers.get('retry-after')), maybeDelivered: true });
  }
  return res;
}

/** Parses a provider's JSON body, treating an unreadable body as a provider fault worth retrying. */
export async function providerJson<T>(res: Response, provider: string): Promise<T> {
  const text = await res.text();
  try {
    return JSON.parse(text) as T;
  } catch (err) {
    throw new RetryableSendError('provider_bad_response', `${provider}: answer is not JSON (HTTP ${res.status})`, { cause: err });
  }
}

export { PermanentSendError, RetryableSendError };
