/**
 * A local fake of the Telegram Bot API (https://core.telegram.org/bots/api), which channel-messenger's
 * official Telegram bot speaks, under `{url}/bot<token>/<method>`:
 *
 * - Answers are `{"ok": true, "result": …}` or `{"ok": false, "error_code", "description", "parameters"?}`
 *   ("Making requests").
 * - `POST sendMessage` `{chat_id, text}` (JSON) → a Message `{message_id, chat: {id}, date, text}`. A chat
 *   the test `block`s answers 403 "Forbidden: bot was blocked by the user"; a chat id that is not an
 *   integer is 400 "Bad Request: chat not found".
 * - `POST setWebhook` `{url, secret_token?}` → `true` (`secret_token`: 1–256 of `A-Za-z0-9_-`, else 400);
 *   `getWebhookInfo` → `{url}`. `deliver(update)` POSTs an Update to the webhook as Telegram does, with
 *   the header `X-Telegram-Bot-Api-Secret-Token`, and returns the HTTP status it got.
 * - A wrong token is 401 "Unauthorized". `rateLimitPerSecond`: past that many sendMessage calls a
 *   second, 429 "Too Many Requests: retry after N" with `parameters.retry_after` (seconds).
 * - `failNext(n)`: the next n sendMessage calls answer 502 (Telegram's servers unreachable).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TelegramBotMessage {
  messageId: number;
  chatId: string;
  text: string;
}

export interface FakeTelegramBot {
  /** What `TELEGRAM_BOT_API_URL` takes (the `bot<token>` part is added by the client). */
  url: string;
  token: string;
  readonly messages: readonly TelegramBotMessage[];
  /** The webhook as `setWebhook` set it. */
  webhook(): { url: string; secretToken: string } | undefined;
  /** The person blocks the bot: sends to the chat answer 403 from now on. */
  block(chatId: string): void;
  failNext(count: number): void;
  /** The next n send calls answer 429 whatever the rate (a deterministic rate limit for tests). */
  rateLimitNext(count: number): void;
  /** POSTs an Update to the webhook with its secret (or `secret` when given, to test a wrong one). */
  deliver(update: unknown, secret?: string | null): Promise<number>;
  calls(method: string): number;
  close(): Promise<void>;
}

export async function startFakeTelegramBot(options: { token?: string; rateLimitPerSecond?: number; retryAfterSeconds?: number } = {}): Promise<FakeTelegramBot> {
  const token = options.token ?? '123456:fake-telegram-bot-token';
  const messages: TelegramBotMessage[] = [];
  const blocked = new Set<string>();
  const counts = new Map<string, number>();
  let hook: { url: string; secretToken: string } | undefined;
  let failures = 0;
  let limited = 0;
  let window = { second: 0, n: 0 };
  let nextId = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const answer = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      const error = (code: number, description: string, parameters?: unknown) => answer(code, { ok: false, error_code: code, description, ...(parameters ? { parameters } : {}) });
      const route = /^\/bot([^/]+)\/(\w+)$/.exec(new URL(req.url ?? '/', 'http://telegram').pathname);
      if (!route) return error(404, 'Not Found');
      const [, given, method] = route;
      if (given !== token) return error(401, 'Unauthorized');
      counts.set(method, (counts.get(method) ?? 0) + 1);
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
      } catch {
        return error(400, "Bad Request: can't parse JSON");
      }
      if (method === 'getWebhookInfo') return answer(200, { ok: true, result: { url: hook?.url ?? '', pending_update_count: 0 } });
      if (method === 'setWebhook') {
        const secret = body.secret_token;
        if (secret !== undefined && (typeof secret !== 'string' || !/^[A-Za-z0-9_-]{1,256}$/.test(secret))) return error(400, 'Bad Request: secret token contains unallowed characters');
        if (typeof body.url !== 'string') return error(400, 'Bad Request: bad webhook: URL must be provided');
        hook = body.url ? { url: body.url, secretToken: typeof secret === 'string' ? secret : '' } : undefined;
        return answer(200, { ok: true, result: true, description: 'Webhook was set' });
      }
      if (method !== 'sendMessage') return error(404, 'Not Found: method not found');
      if (failures > 0) {
        failures -= 1;
        return answer(502, { ok: false, error_code: 502, description: 'Bad Gateway' });
      }
      if (options.rateLimitPerSecond !== undefined || limited > 0) {
        const second = Math.floor(Date.now() / 1000);
        window = window.second === second ? { second, n: window.n + 1 } : { second, n: 1 };
        if (limited > 0 || window.n > (options.rateLimitPerSecond ?? Infinity)) {
          limited = Math.max(0, limited - 1);
          const retryAfter = options.retryAfterSeconds ?? 1;
          return error(429, `Too Many Requests: retry after ${retryAfter}`, { retry_after: retryAfter });
        }
      }
      const chatId = String(body.chat_id ?? '');
      if (!/^-?\d+$/.test(chatId)) return error(400, 'Bad Request: chat not found');
      if (typeof body.text !== 'string' || body.text === '') return error(400, 'Bad Request: message text is empty');
      if (blocked.has(chatId)) return error(403, 'Forbidden: bot was blocked by the user');
      const message = { messageId: ++nextId, chatId, text: body.text };
      messages.push(message);
      answer(200, { ok: true, result: { message_id: message.messageId, chat: { id: Number(chatId), type: 'private' }, date: Math.floor(Date.now() / 1000), text: body.text } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    token,
    messages,
    webhook: () => hook,
    block: (chatId) => blocked.add(chatId),
    failNext: (count) => (failures = count),
    rateLimitNext: (count) => (limited = count),
    async deliver(update, secret) {
      if (!hook) throw new Error('fake Telegram: no webhook set');
      const given = secret === undefined ? hook.secretToken : secret;
      const res = await fetch(hook.url, { method: 'POST', headers: { 'content-type': 'application/json', ...(given ? { 'x-telegram-bot-api-secret-token': given } : {}) }, body: JSON.stringify(update) });
      await res.body?.cancel();
      return res.status;
    },
    calls: (method) => counts.get(method) ?? 0,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
