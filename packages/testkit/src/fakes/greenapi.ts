/**
 * A local fake of the GREEN-API HTTP API (https://green-api.com/en/docs/api/), the working-account
 * gateway channel-messenger sends MAX and Telegram messages through, under
 * `{url}/waInstance{id}/{method}/{token}`:
 *
 * - `GET getStateInstance` → `{"stateInstance": …}`: the instance state a test sets with `setState`
 *   (`authorized`, `notAuthorized`, `blocked`, `suspended`, `starting`, `sleepMode`, `yellowCard`,
 *   `pendingPassword`; https://green-api.com/en/docs/api/account/GetStateInstance and the Telegram page).
 * - `POST checkAccount` `{phoneNumber: <number>}` → `{exist, chatId}`; numbers ending in `0000` have no
 *   account; a non-numeric phoneNumber is 400.
 * - `POST sendMessage` `{chatId, message}` → `{idMessage}`. Like GREEN-API, no client id and no
 *   deduplication. While the instance is not `authorized` a message is accepted into the send queue and
 *   not sent (GREEN-API keeps it 24 h: "instance status tracking").
 * - `GET showMessagesQueue`, `GET lastOutgoingMessages`: the queue and the sent messages.
 * - `POST setSettings` `{webhookUrl, webhookUrlToken, outgoingWebhook, …}` → `{saveSettings: true}`;
 *   `reportStatus(idMessage, status)` then posts the instance's `outgoingMessageStatus` webhook to
 *   `webhookUrl` with `Authorization: Bearer <webhookUrlToken>` when one is set, as the Webhook Endpoint
 *   technology does (https://green-api.com/v3/docs/api/receiving/technology-webhook-endpoint,
 *   https://green-api.com/v3/docs/api/receiving/notifications-format/statuses/OutgoingMessageStatus).
 * - A wrong token is 401. `rateLimitPerSecond` answers 429 past that many calls a second per method.
 *
 * Calls are counted per method, so a test can check that the state is not polled and accounts are not
 * looked up more than it allows.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type GreenApiState = 'authorized' | 'notAuthorized' | 'blocked' | 'suspended' | 'starting' | 'sleepMode' | 'yellowCard' | 'pendingPassword';

export type GreenApiMessageStatus = 'sent' | 'delivered' | 'read' | 'failed' | 'noAccount' | 'notInGroup' | 'yellowCard';

interface GreenApiSettings {
  webhookUrl: string;
  webhookUrlToken: string;
  outgoingWebhook: string;
}

export interface GreenApiMessage {
  idMessage: string;
  instance: string;
  chatId: string;
  message: string;
  /** Sent (in the journal) or held in the send queue (the instance was not authorized). */
  where: 'journal' | 'queue';
}

export interface FakeGreenApiOptions {
  /** Accepted token (default `fake-token-123`). */
  token?: string;
  rateLimitPerSecond?: number;
}

export interface FakeGreenApi {
  /** `…/v3`, what `MAX_API_URL` / `TELEGRAM_API_URL` take. */
  url: string;
  token: string;
  setState(instance: string, state: GreenApiState): void;
  /** Calls of a method (for one instance, or all). */
  calls(method: string, instance?: string): number;
  readonly messages: readonly GreenApiMessage[];
  /**
   * Posts an `outgoingMessageStatus` webhook for a message this fake took (its instance's settings must
   * have a `webhookUrl` and `outgoingWebhook: "yes"`); resolves with the HTTP status the endpoint answered.
   * `token` overrides the instance's `webhookUrlToken` (a caller that is not GREEN-API).
   */
  reportStatus(idMessage: string, status: GreenApiMessageStatus, options?: { timestamp?: number; token?: string | null; description?: string }): Promise<number>;
  close(): Promise<void>;
}

export async function startFakeGreenApi(options: FakeGreenApiOptions = {}): Promise<FakeGreenApi> {
  const token = options.token ?? 'fake-token-123';
  const states = new Map<string, GreenApiState>();
  const counts = new Map<string, number>();
  const messages: GreenApiMessage[] = [];
  const settings = new Map<string, GreenApiSettings>();
  const window = new Map<string, { second: number; n: number }>();
  let taken = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://greenapi');
      const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      const route = /^\/v3\/waInstance(\d+)\/(\w+)\/([\w-]+)$/.exec(url.pathname);
      if (!route) return json(404, {});
      const [, instance, method, given] = route;
      if (given !== token) return json(401, { message: 'Unauthorized' });
      counts.set(`${method}|${instance}`, (counts.get(`${method}|${instance}`) ?? 0) + 1);
      if (options.rateLimitPerSecond !== undefined) {
        const second = Math.floor(Date.now() / 1000);
        const key = `${method}|${instance}`;
        const current = window.get(key);
        const n = current && current.second === second ? current.n + 1 : 1;
        window.set(key, { second, n });
        if (n > options.rateLimitPerSecond) return json(429, { message: 'Too Many Requests' });
      }
      const state = states.get(instance) ?? 'authorized';
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
      } catch {
        return json(400, { message: 'invalid JSON' });
      }
      if (req.method === 'GET' && method === 'getStateInstance') return json(200, { stateInstance: state });
      if (req.method === 'GET' && method === 'showMessagesQueue') {
        return json(200, messages.filter((m) => m.instance === instance && m.where === 'queue').map((m) => ({ messageID: m.idMessage, type: 'sendMessage', body: { chatId: m.chatId, message: m.message } })));
      }
      if (req.method === 'GET' && method === 'lastOutgoingMessages') {
        return json(200, messages.filter((m) => m.instance === instance && m.where === 'journal').map((m) => ({ type: 'outgoing', idMessage: m.idMessage, chatId: m.chatId, textMessage: m.message, typeMessage: 'textMessage', sendByApi: true })));
      }
      if (req.method !== 'POST') return json(404, {});
      if (method === 'checkAccount') {
        if (typeof body.phoneNumber !== 'number') return json(400, { message: "Validation failed. Details: 'phoneNumber' must be a number" });
        const phone = String(body.phoneNumber);
        return json(200, phone.endsWith('0000') ? { exist: false } : { exist: true, chatId: `${phone}@c.us` });
      }
      if (method === 'setSettings') {
        const current = settings.get(instance) ?? { webhookUrl: '', webhookUrlToken: '', outgoingWebhook: 'no' };
        const text = (name: keyof GreenApiSettings) => (typeof body[name] === 'string' ? (body[name] as string) : current[name]);
        settings.set(instance, { webhookUrl: text('webhookUrl'), webhookUrlToken: text('webhookUrlToken'), outgoingWebhook: text('outgoingWebhook') });
        return json(200, { saveSettings: true });
      }
      if (method === 'sendMessage') {
        if (typeof body.chatId !== 'string' || typeof body.message !== 'string' || body.message === '') return json(400, { message: "Validation failed. Details: 'message' is required" });
        const message: GreenApiMessage = { idMessage: `GA${++taken}`, instance, chatId: body.chatId, message: body.message, where: state === 'authorized' ? 'journal' : 'queue' };
        messages.push(message);
        return json(200, { idMessage: message.idMessage });
      }
      json(404, {});
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v3`,
    token,
    setState: (instance, state) => states.set(instance, state),
    calls: (method, instance) => [...counts].filter(([key]) => key.startsWith(`${method}|`) && (instance === undefined || key === `${method}|${instance}`)).reduce((sum, [, n]) => sum + n, 0),
    messages,
    async reportStatus(idMessage, status, reportOptions = {}) {
      const message = messages.find((m) => m.idMessage === idMessage);
      if (!message) throw new Error(`fake GREEN-API: no message ${idMessage}`);
      const instanceSettings = settings.get(message.instance);
      if (!instanceSettings?.webhookUrl || instanceSettings.outgoingWebhook !== 'yes') throw new Error(`fake GREEN-API: instance ${message.instance} has no webhookUrl with outgoingWebhook`);
      const token = reportOptions.token === undefined ? instanceSettings.webhookUrlToken : reportOptions.token;
      const res = await fetch(instanceSettings.webhookUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({
          typeWebhook: 'outgoingMessageStatus',
          chatId: message.chatId,
          instanceData: { idInstance: Number(message.instance), wid: '79000000000@c.us', typeInstance: 'v3' },
          timestamp: reportOptions.timestamp ?? Math.floor(Date.now() / 1000),
          idMessage,
          status,
          ...(reportOptions.description ? { description: reportOptions.description } : {}),
          sendByApi: true,
        }),
        signal: AbortSignal.timeout(10_000),
      });
      await res.arrayBuffer();
      return res.status;
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
