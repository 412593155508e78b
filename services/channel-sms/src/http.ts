import { Pool } from 'undici';
import { parseRetryAfter, RetryableSendError, type ProviderRequestOptions } from '@rrs/sender-kit';

/** A provider's answer, read whole: the adapters read their own error codes from the body. */
export interface ProviderAnswer {
  status: number;
  body: string;
}

/** Failures of a request that never reached the provider: it cannot have the message. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);
const TIMEOUTS = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/**
 * One provider's HTTP API over a pool of kept-alive connections (undici's Pool), for the calls made
 * once per SMS. It sorts failures exactly as sender-kit's `providerFetch` does, without what fetch
 * costs per call (a WHATWG Request, Response and body stream, an AbortSignal with its timer): on the
 * send path those were about a third of channel-sms's CPU per SMS.
 *
 * `timeoutMs` bounds each wait on its own: connecting, the answer's headers once the request is
 * written, and each pause in the answer's body. A form body goes out with its headers in one write.
 */
export class ProviderHttp {
  private readonly pool: Pool;
  private readonly basePath: string;

  constructor(baseUrl: string, private readonly options: ProviderRequestOptions) {
    const url = new URL(baseUrl);
    this.basePath = url.pathname.replace(/\/$/, '');
    this.pool = new Pool(url.origin, {
      connect: { timeout: options.timeoutMs },
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    });
  }

  /**
   * `POST {base}{path}`, form-encoded. Resolves with any answer below 500 but 429, whole; a timeout, a
   * network error, 429 and 5xx reject with RetryableSendError (429 and 503 with the provider's
   * Retry-After). A timeout, a connection lost after connecting and a 5xx are `maybeDelivered`.
   */
  async postForm(path: string, form: URLSearchParams): Promise<ProviderAnswer> {
    const provider = this.options.provider;
    let answer: Awaited<ReturnType<Pool['request']>>;
    let body: string;
    try {
      answer = await this.pool.request({
        path: this.basePath + path,
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: form.toString(),
      });
      body = await answer.body.text();
    } catch (err) {
      const code = (err as { code?: string }).code;
      const timedOut = code !== undefined && TIMEOUTS.has(code);
      throw new RetryableSendError(timedOut ? 'provider_timeout' : 'provider_unreachable', `${provider}: ${timedOut ? `no answer within ${this.options.timeoutMs} ms` : (err as Error).message}${code ? ` (${code})` : ''}`, {
        cause: err,
        maybeDelivered: !code || !NOT_CONNECTED.has(code),
      });
    }
    const status = answer.statusCode;
    if (status === 429) {
      const fromBody = this.options.retryAfterFromBody?.(body);
      throw new RetryableSendError('provider_rate_limited', `${provider}: 429 Too Many Requests`, { retryAfterMs: parseRetryAfter(header(answer.headers['retry-after'])) ?? fromBody });
    }
    if (status >= 500) {
      throw new RetryableSendError('provider_unavailable', `${provider}: HTTP ${status}`, { retryAfterMs: parseRetryAfter(header(answer.headers['retry-after'])), maybeDelivered: true });
    }
    return { status, body };
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
