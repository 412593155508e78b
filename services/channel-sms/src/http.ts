import { Pool } from 'undici';
import { parseRetryAfter, ProviderRecalledError, RetryableSendError, WaitLine, type ProviderRequestOptions } from '@rrs/sender-kit';

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

/** A call waiting for one of the `maxConnections` slots: nothing of it has left this process. */
interface SlotWaiter {
  resolve: () => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
  signal?: AbortSignal;
  onAbort?: () => void;
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
  /** Requests out (holding a slot) when `maxConnections` is set. */
  private active = 0;
  /** Calls waiting for a slot, small requests' first. */
  private readonly slotQueue = new WaitLine<SlotWaiter>();

  constructor(baseUrl: string, private readonly options: ProviderHttpOptions) {
    const url = new URL(baseUrl);
    this.basePath = url.pathname.replace(/\/$/, '');
    this.pool = new Pool(url.origin, { connect: { timeout: options.timeoutMs }, connections: options.maxConnections ?? null });
    if (options.maxConnections !== undefined && !(options.maxConnections >= 1)) throw new Error(`${options.provider}: maxConnections must be at least 1`);
  }

  /**
   * `POST {base}{path}`, form-encoded. Resolves with any answer below 500 but 429, whole; a timeout, a
   * network error, 429 and 5xx reject with RetryableSendError (429 and 503 with the provider's
   * Retry-After). A timeout, a connection lost after connecting and a 5xx are `maybeDelivered`.
   *
   * With `maxConnections`, a call first waits for a slot (our own queue, so undici never holds a request
   * back): one that gets none within the timeout is "not sent" (`provider_timeout`, not maybe delivered),
   * and an aborted `signal` (ProviderCallContext.signal: the provider failed meanwhile) recalls it from
   * the queue (ProviderRecalledError). Once it holds a slot it is on the wire, and the signal is ignored.
   * An `ahead` call (a small request's, ProviderCallContext.ahead) waits ahead of the others.
   */
  async postForm(path: string, form: URLSearchParams, signal?: AbortSignal, ahead = false): Promise<ProviderAnswer> {
    const limit = this.options.maxConnections;
    if (limit === undefined) return this.post(path, form, this.options.timeoutMs);
    const startedAt = Date.now();
    if (this.active < limit) this.active++;
    else {
      await this.waitForSlot(signal, ahead);
      // Handed a slot by a call that just ended: if that call's failure recalled this one, or this one's
      // time is up meanwhile, it goes no further (not sent).
      if (signal?.aborted || Date.now() - startedAt >= this.options.timeoutMs) {
        this.releaseSlot();
        throw signal?.aborted ? new ProviderRecalledError(this.options.provider) : new RetryableSendError('provider_timeout', `${this.options.provider}: no connection free within ${this.options.timeoutMs} ms (not sent)`);
      }
    }
    let answered = false;
    try {
      const answer = await this.post(path, form, Math.max(1, this.options.timeoutMs - (Date.now() - startedAt)));
      answered = true;
      return answer;
    } finally {
      // After a failure the slot passes on only once the failure has reached the provider's breaker
      // (its promise chain runs before setImmediate), which recalls the calls still waiting.
      if (answered) this.releaseSlot();
      else setImmediate(() => this.releaseSlot());
    }
  }

  private waitForSlot(signal: AbortSignal | undefined, ahead: boolean): Promise<void> {
    const { provider, timeoutMs } = this.options;
    if (signal?.aborted) return Promise.reject(new ProviderRecalledError(provider));
    return new Promise<void>((resolve, reject) => {
      const waiter: SlotWaiter = {
        resolve,
        reject,
        signal,
        timer: setTimeout(() => {
          this.leaveQueue(waiter);
          reject(new RetryableSendError('provider_timeout', `${provider}: no connection free within ${timeoutMs} ms (not sent)`));
        }, timeoutMs),
      };
      if (signal) {
        waiter.onAbort = () => {
          this.leaveQueue(waiter);
          reject(new ProviderRecalledError(provider));
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.slotQueue.push(waiter, ahead);
    });
  }

  private leaveQueue(waiter: SlotWaiter): void {
    clearTimeout(waiter.timer);
    if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
    this.slotQueue.remove(waiter);
  }

  /** Hands the slot to the next waiting call, or frees it. */
  private releaseSlot(): void {
    const next = this.slotQueue.shift();
    if (!next) {
      this.active--;
      return;
    }
    clearTimeout(next.timer);
    if (next.onAbort) next.signal?.removeEventListener('abort', next.onAbort);
    next.resolve();
  }

  /** One request on the wire, bounded by `timeoutMs`. */
  private async post(path: string, form: URLSearchParams, timeoutMs: number): Promise<ProviderAnswer> {
    const { provider } = this.options;
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
