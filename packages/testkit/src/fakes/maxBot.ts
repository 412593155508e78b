/**
 * A local fake of the MAX Bot API (https://dev.max.ru/docs-api), which channel-messenger's official MAX
 * bot speaks, under `{url}`:
 *
 * - The token goes in the `Authorization` header (the docs: "передача токена через query-параметры
 *   больше не поддерживается"); a missing or wrong one is 401.
 * - `POST /messages?user_id=<id>` `{text}` → `{message: {recipient: {user_id}, body: {mid, seq, text},
 *   timestamp}}` (dev.max.ru/docs-api/methods/POST/messages). A user the test `block`s (they stopped the
 *   bot) answers 403 `{code: "chat.denied", message}`; a user_id that is not a number is 400.
 * - `POST /subscriptions` `{url, update_types?, secret?}` → `{success: true}`; `GET /subscriptions` →
 *   `{subscriptions: [{url, time, update_types}]}`. `deliver(update)` POSTs an Update to the subscribed
 *   URL as MAX does, with the header `X-Max-Bot-Api-Secret`, and returns the HTTP status it got.
 * - `rateLimitPerSecond`: past that many /messages calls a second, 429 `{code: "too.many.requests"}`
 *   with `Retry-After` (seconds). `failNext(n)`: the next n /messages calls answer 503.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface MaxBotMessage {
  mid: string;
  userId: string;
  text: string;
}

export interface FakeMaxBot {
  /** What `MAX_BOT_API_URL` takes. */
  url: string;
  token: string;
  readonly messages: readonly MaxBotMessage[];
  subscription(): { url: string; secret: string; updateTypes: string[] } | undefined;
  block(userId: string): void;
  failNext(count: number): void;
  /** The next n send calls answer 429 whatever the rate (a deterministic rate limit for tests). */
  rateLimitNext(count: number): void;
  deliver(update: unknown, secret?: string | null): Promise<number>;
  calls(path: string): number;
  close(): Promise<void>;
}

export async function startFakeMaxBot(options: { token?: string; rateLimitPerSecond?: number; retryAfterSeconds?: number } = {}): Promise<FakeMaxBot> {
  const token = options.token ?? 'fake-max-bot-token';
  const messages: MaxBotMessage[] = [];
  const blocked = new Set<string>();
  const counts = new Map<string, number>();
  let subscribed: { url: string; secret: string; updateTypes: string[] } | undefined;
  let failures = 0;
  let limited = 0;
  let window = { second: 0, n: 0 };
  let seq = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const answer = (status: number, body: unknown, headers: Record<string, string> = {}) => res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
      const url = new URL(req.url ?? '/', 'http://max');
      if (req.headers.authorization !== token || url.searchParams.has('access_token')) return answer(401, { code: 'verify.token', message: 'Invalid access_token' });
      counts.set(url.pathname, (counts.get(url.pathname) ?? 0) + 1);
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
      } catch {
        return answer(400, { code: 'proto.payload', message: 'Invalid JSON' });
      }
      if (url.pathname === '/subscriptions' && req.method === 'GET') {
        return answer(200, { subscriptions: subscribed ? [{ url: subscribed.url, time: Date.now(), update_types: subscribed.updateTypes }] : [] });
      }
      if (url.pathname === '/subscriptions' && req.method === 'POST') {
        if (typeof body.url !== 'string' || !body.url) return answer(400, { code: 'proto.payload', message: 'url is required' });
        if (body.secret !== undefined && (typeof body.secret !== 'string' || !/^[A-Za-z0-9_-]{5,256}$/.test(body.secret))) return answer(400, { code: 'proto.payload', message: 'invalid secret' });
        subscribed = { url: body.url, secret: typeof body.secret === 'string' ? body.secret : '', updateTypes: Array.isArray(body.update_types) ? (body.update_types as string[]) : [] };
        return answer(200, { success: true });
      }
      if (url.pathname !== '/messages' || req.method !== 'POST') return answer(404, { code: 'not.found', message: 'Not found' });
      if (failures > 0) {
        failures -= 1;
        return answer(503, { code: 'internal', message: 'Service unavailable' });
      }
      if (options.rateLimitPerSecond !== undefined || limited > 0) {
        const second = Math.floor(Date.now() / 1000);
        window = window.second === second ? { second, n: window.n + 1 } : { second, n: 1 };
        const refuse = limited > 0 || window.n > (options.rateLimitPerSecond ?? Infinity);
        limited = Math.max(0, limited - 1);
        if (refuse) return answer(429, { code: 'too.many.requests', message: 'Too many requests' }, { 'retry-after': String(options.retryAfterSeconds ?? 1) });
      }
      const userId = url.searchParams.get('user_id') ?? '';
      if (!/^\d+$/.test(userId)) return answer(400, { code: 'proto.payload', message: 'user_id or chat_id is required' });
      if (typeof body.text !== 'string' || body.text === '') return answer(400, { code: 'proto.payload', message: 'text is empty' });
      if (blocked.has(userId)) return answer(403, { code: 'chat.denied', message: 'chat.denied: dialog with this user is not available' });
      const message = { mid: `mid.${(++seq).toString(16).padStart(16, '0')}`, userId, text: body.text };
      messages.push(message);
      answer(200, { message: { recipient: { user_id: Number(userId), chat_type: 'dialog' }, timestamp: Date.now(), body: { mid: message.mid, seq, text: body.text } } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    token,
    messages,
    subscription: () => subscribed,
    block: (userId) => blocked.add(userId),
    failNext: (count) => (failures = count),
    rateLimitNext: (count) => (limited = count),
    async deliver(update, secret) {
      if (!subscribed) throw new Error('fake MAX: no subscription');
      const given = secret === undefined ? subscribed.secret : secret;
      const res = await fetch(subscribed.url, { method: 'POST', headers: { 'content-type': 'application/json', ...(given ? { 'x-max-bot-api-secret': given } : {}) }, body: JSON.stringify(update) });
      await res.body?.cancel();
      return res.status;
    },
    calls: (path) => counts.get(path) ?? 0,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
