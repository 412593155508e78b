import { timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import { collapseRepeats, counter, listenHttp, type ListeningHttpServer, type Logger } from '@rrs/runtime';

/** What one provider callback (a delivery receipt, a bounce, a complaint) came to. */
export type ReceiptResult = 'recorded' | 'not_final' | 'unknown_message' | 'bad_signature' | 'bad_request';

const receiptsTotal = counter({ name: 'sender_receipts_total', help: 'Provider callbacks (delivery receipts, bounces, complaints, opt-outs) received, by channel, provider and result.', labelNames: ['channel', 'provider', 'result'] });

/** Compares two secrets in constant time. */
export function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The password of `Authorization: Basic …` (the user name is not checked), or '' without one. */
export function basicPassword(header: string | undefined): string {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header ?? '');
  if (!match) return '';
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? '' : decoded.slice(colon + 1);
}

/** The token of `Authorization: Bearer …`, or '' without one. */
export function bearerToken(header: string | undefined): string {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return match ? match[1] : '';
}

/** One provider's callback on the receipts endpoint. */
export interface ReceiptRoute {
  /** Provider name (metrics, logs). */
  provider: string;
  /** The channel the callback is about, when the endpoint serves several (metrics; default the endpoint's). */
  channel?: string;
  methods: readonly string[];
  /** Whether this route takes the request's path, e.g. `/receipts/smsc`, or a prefix with a secret segment. */
  matches(pathname: string): boolean;
  /**
   * Whether the caller is the provider (a signature is checked in `handle`, which sees the body). A
   * refused caller gets `refusedStatus` (default 404: a secret path must not be told apart from none).
   */
  authorize(req: http.IncomingMessage, url: URL): boolean;
  refusedStatus?: number;
  /** Applies the callback; every entry is applied before it resolves, so a provider retry redoes all. */
  handle(body: Buffer, url: URL): Promise<ReceiptResult>;
  /** The answer body the provider wants for a callback it need not send again (e.g. SMS.ru's `100`). */
  okBody?: string;
}

const STATUS: Record<ReceiptResult, number> = { recorded: 200, not_final: 200, unknown_message: 200, bad_signature: 403, bad_request: 400 };

/**
 * A sender's receipts endpoint, on its own port: each route a provider's callback. Unknown messages are
 * answered 200 so the provider stops retrying them; a failure to apply (the send log or the bus down) is
 * 503, so the provider retries. Bodies over `maxBodyBytes` (64 KiB) are cut off.
 */
export async function startReceiptEndpoint(options: { channel: string; host: string; port: number; routes: readonly ReceiptRoute[]; logger: Logger; maxBodyBytes?: number }): Promise<ListeningHttpServer> {
  // While the send log or the bus is down every receipt fails the same way: one line per cause per interval.
  const failures = collapseRepeats(options.logger);
  const limit = options.maxBodyBytes ?? 65_536;
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://receipts');
    const route = options.routes.find((r) => r.matches(url.pathname) && r.methods.includes(req.method ?? ''));
    if (!route) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
      return;
    }
    if (!route.authorize(req, url)) {
      receiptsTotal.inc({ channel: route.channel ?? options.channel, provider: route.provider, result: 'bad_signature' });
      res.writeHead(route.refusedStatus ?? 404, { 'content-type': 'text/plain' }).end(route.refusedStatus === 401 ? 'unauthorized' : 'not found');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) req.destroy();
      else chunks.push(chunk);
    });
    req.on('end', () => {
      route.handle(Buffer.concat(chunks), url).then(
        (result) => {
          receiptsTotal.inc({ channel: route.channel ?? options.channel, provider: route.provider, result });
          if (result !== 'recorded' && result !== 'not_final') options.logger.warn({ result, provider: route.provider }, 'provider callback not applied');
          const ok = result === 'recorded' || result === 'not_final' || result === 'unknown_message';
          res.writeHead(STATUS[result], { 'content-type': 'text/plain' }).end(ok ? (route.okBody ?? 'OK') : result);
        },
        (err) => {
          failures.error({ err, provider: route.provider }, 'provider callback failed; the provider will retry');
          res.writeHead(503, { 'content-type': 'text/plain' }).end('retry');
        },
      );
    });
  });
  const listening = await listenHttp(server, options);
  return {
    port: listening.port,
    async close() {
      await listening.close();
      failures.flush();
    },
  };
}
