import http from 'node:http';
import https from 'node:https';
import { pinnedLookup, WebhookUrlNotAllowed, type UrlGuard } from './urlGuard';

/** At most this much of a receiver's answer is read and kept. */
export const RESPONSE_BODY_LIMIT = 4096;

export type SendResult =
  | { kind: 'response'; status: number; body: string; retryAfter?: string; durationMs: number }
  | { kind: 'error'; error: string; durationMs: number };

export interface WebhookRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  /** CA certificates trusted for https instead of Node's bundle (tests; deployments use NODE_EXTRA_CA_CERTS). */
  ca?: string[];
}

/**
 * POSTs one webhook. The URL passes the SSRF guard first, and the connection goes to the addresses the
 * guard checked. Redirects are not followed (a 3xx is just a status). The whole exchange, body included,
 * is bounded by `timeoutMs`; at most RESPONSE_BODY_LIMIT bytes of the answer are read.
 */
export async function postWebhook(guard: UrlGuard, request: WebhookRequest): Promise<SendResult> {
  const started = Date.now();
  const elapsed = () => Date.now() - started;
  let checked;
  try {
    checked = await guard.check(request.url);
  } catch (err) {
    if (err instanceof WebhookUrlNotAllowed) return { kind: 'error', error: `url_not_allowed: ${err.message}`, durationMs: elapsed() };
    throw err;
  }
  const body = Buffer.from(request.body, 'utf8');
  const transport = checked.url.protocol === 'https:' ? https : http;
  return new Promise<SendResult>((resolve) => {
    let settled = false;
    const finish = (result: SendResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const req = transport.request(checked.url, {
      method: 'POST',
      agent: false,
      ...(request.ca ? { ca: request.ca } : {}),
      lookup: pinnedLookup(checked),
      headers: {
        'content-type': 'application/json',
        'content-length': String(body.length),
        'user-agent': 'rrs-webhooks/1',
        ...request.headers,
      },
    });
    const timer = setTimeout(() => {
      finish({ kind: 'error', error: `timeout after ${request.timeoutMs} ms`, durationMs: elapsed() });
      req.destroy();
    }, request.timeoutMs);
    req.on('error', (err) => finish({ kind: 'error', error: `connection_error: ${(err as NodeJS.ErrnoException).code ?? err.message}`, durationMs: elapsed() }));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const done = () => {
        const retryAfter = res.headers['retry-after'];
        finish({
          kind: 'response',
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).subarray(0, RESPONSE_BODY_LIMIT).toString('utf8'),
          retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
          durationMs: elapsed(),
        });
        res.destroy();
      };
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        size += chunk.length;
        if (size >= RESPONSE_BODY_LIMIT) done();
      });
      res.on('end', done);
      // A receiver that drops the connection mid-body still answered with its status.
      res.on('error', done);
      res.on('aborted', done);
    });
    req.end(body);
  });
}
