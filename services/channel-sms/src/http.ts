import { Pool } from 'undici';
import { parseRetryAfter, RetryableSendError, type ProviderRequestOptions } from '@rrs/sender-kit';

/** A provider's answer, read whole: the adapters read their own error codes from the body. */
export interface ProviderAnswer {
  status: number;
  body: string;
}

/** Failures of a request that never reached the provider: it cannot have the message. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

export interface ProviderHttpOptions extends ProviderRequestOptions {
  /**
   * Most requests out at once (each on its own kept-alive connection); the others wait their turn,
   * within their timeout. Unset = no limit.
   */
  maxConnections?: number;
}

/**
 * One provider's HTTP API over a pool of kept-alive connections (undici's Pool), for the calls made
 * once per SMS. It sorts failures exactly as sender-kit's `providerFetch` does, without what fetch
 * costs per call (a WHATWG Request, Response and body stream, an AbortSignal.timeout): on the send
 * path those were about a third of channel-sms's CPU per SMS. A form body goes out with its headers in
 * one write.
 *
 * `timeoutMs` bounds the whole call, as with fetch: waiting for a connection, the request and the
 * whole answer. The adapters rely on it: a call never outlives SMSC_TIMEOUT_MS, so with the ack wait
 * above it a step is not redelivered while its first call may still reach the provider.
 */
export class ProviderHttp {
  private readonly pool: Pool;
  private readonly basePath: string;

  constructor(baseUrl: string, private readonly options: ProviderHttpOptions) {
    const url = new URL(baseUrl);
    this.basePath = url.pathname.replace(/\/$/, '');
    this.pool = new Pool(url.origin, { connect: { timeout: options.timeoutMs }, connections: options.maxConnections ?? null });
  }

  /**
   * `POST {base}{path}`, form-encoded. Resolves with any answer below 500 but 429, whole; a timeout, a
   * network error, 429 and 5xx reject with RetryableSendError (429 and 503 with the provider's
   * Retry-After). A timeout, a connection lost after connecting and a 5xx are `maybeDelivered`.
   */
  async postForm(path: string, form: URLSearchParams): Promise<ProviderAnswer> {
    const { provider, timeoutMs } = this.options;
    const abort = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        const timedOut = new RetryableSendError('provider_timeout', `${provider}: no answer within ${timeoutMs} ms`, { maybeDelivered: true });
        // A request still waiting for a connection is dropped unsent; one on the wire is cut.
        abort.abort(timedOut);
        reject(timedOut);
      }, timeoutMs);
    });
    let answer: { status: number; headers: Record<string, string | string[] | undefined>; body: string };
    try {
      answer = await Promise.race([this.call(path, form, abort.signal), deadline]);
    } catch (err) {
      if (err instanceof RetryableSendError) throw err;
      const code = (err as { code?: string }).code;
      throw new RetryableSendError(code === 'UND_ERR_CONNECT_TIMEOUT' ? 'provider_timeout' : 'provider_unreachable', `${provider}: ${(err as Error).message}${code ? ` (${code})` : ''}`, {
        cause: err,
        maybeDelivered: !code || !NOT_CONNECTED.has(code),
      });
    } finally {
      clearTimeout(timer);
    }
    const { status, headers, body } = answer;
    if (status === 429) {
      const fromBody = this.options.retryAfterFromBody?.(body);
      throw new RetryableSendError('provider_rate_limited', `${provider}: 429 Too Many Requests`, { retryAfterMs: parseRetryAfter(header(headers['retry-after'])) ?? fromBody });
    }
    if (status >= 500) {
      throw new RetryableSendError('provider_unavailable', `${provider}: HTTP ${status}`, { retryAfterMs: parseRetryAfter(header(headers['retry-after'])), maybeDelivered: true });
    }
    return { status, body };
  }

  private async call(path: string, form: URLSearchParams, signal: AbortSignal) {
    const res = await this.pool.request({
      path: this.basePath + path,
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
      signal,
    });
    return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
  }

  /**
   * Closes the connections at once. The service calls it after its sender has drained, when a call
   * still out can only be one whose step was handed back to the bus: waiting for it (up to the
   * timeout) would only hold up the stop.
   */
  close(): Promise<void> {
    return this.pool.destroy();
  }
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** Parses a provider's JSON answer, treating an unreadable one as a provider fault worth retrying. */
export function answerJson<T>(answer: ProviderAnswer, provider: string): T {
  try {
    return JSON.parse(answer.body) as T;
  } catch (err) {
    throw new RetryableSendError('provider_bad_response', `${provider}: answer is not JSON (HTTP ${answer.status})`, { cause: err });
  }
}
