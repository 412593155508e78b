/**
 * A local fake of the SMS.ru HTTP API (https://sms.ru/api), the second SMS provider of channel-sms
 * (services/channel-sms/src/smsru.ts), for tests and benches:
 *
 * - `/sms/send` (GET query or POST form): `api_id`, `to` (numbers separated by `,`), `msg`, `json=1`,
 *   optional `from`, `test=1`. Answers (HTTP 200, as SMS.ru does) `{"status": "OK", "status_code": 100,
 *   "sms": {"<number>": {"status": "OK", "status_code": 100, "sms_id": "…"} | {"status": "ERROR",
 *   "status_code": N, "status_text": "…"}}, "balance": n}`; a request-level refusal is `{"status":
 *   "ERROR", "status_code": N, "status_text": "…"}`. Codes the fake gives on its own: 200 wrong api_id,
 *   202 a bad number, 203 no text, 201 not enough money, 230 the daily limit of messages to one number,
 *   231 the same text to the same number within a minute, 209 a number on the account's stop list
 *   (`addToStopList`), 220 while `outage('unavailable')`. With
 *   `test=1` nothing is sent or charged, and the answer is the same.
 * - `/sms/status`: `sms_id` (several separated by `,`) → per id `{"status": "OK", "status_code": 100…103}`
 *   or `{"status": "ERROR", "status_code": -1}` for an unknown id.
 * - `/my/balance`: `{"status": "OK", "status_code": 100, "balance": n}`.
 * - Status callbacks: `deliver(smsId, code)` POSTs `data[0]=sms_status\n<sms_id>\n<code>\n<unix time>` to
 *   `callbackUrl`, as SMS.ru's api callback does (https://sms.ru/api/callback); SMS.ru expects `100`.
 *
 * `outage(mode)` takes the fake down: `unavailable` answers status 220 to sends (nothing accepted),
 * `http503` answers HTTP 503 (nothing accepted), `refuse` stops listening (connections refused), `none`
 * brings it back on the same port with the same state.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SmsRuMessage {
  smsId: string;
  to: string;
  msg: string;
  from: string;
  test: boolean;
  acceptedAt: number;
  /** Last status code (100 queued … 103 delivered, 104+ not delivered). */
  status: number;
}

export type SmsRuOutage = 'none' | 'unavailable' | 'http503' | 'refuse';

export interface FakeSmsRuOptions {
  apiId?: string;
  /** Balance in roubles (default 1 000). */
  balance?: number;
  /** Price of one message (default 0). */
  pricePerMessage?: number;
  /** Messages one number may get per day before 230 (default 100). */
  dailyLimitPerNumber?: number;
  /** Where status callbacks go (`deliver`). */
  callbackUrl?: string;
}

export interface FakeSmsRu {
  url: string;
  port: number;
  readonly requests: number;
  /** Accepted messages (test sends included), oldest first. */
  readonly messages: readonly SmsRuMessage[];
  readonly balance: number;
  timesAccepted(phoneDigits: string): number;
  /** Puts a number (digits) on the account's stop list: sends to it are refused with 209. */
  addToStopList(phoneDigits: string): void;
  outage(mode: SmsRuOutage): Promise<void>;
  /** Sets a message's status and sends the status callback; resolves with the callback's answer body. */
  deliver(smsId: string, code: number): Promise<{ status: number; body: string }>;
  /** Where `deliver` posts (the callback URL set in the SMS.ru account). */
  callbackUrl: string | undefined;
  close(): Promise<void>;
}

const NUMBER = /^\d{10,15}$/;
const DAY_MS = 86_400_000;

export async function startFakeSmsRu(options: FakeSmsRuOptions = {}): Promise<FakeSmsRu> {
  const apiId = options.apiId ?? 'smsru-test-api-id';
  const price = options.pricePerMessage ?? 0;
  const dailyLimit = options.dailyLimitPerNumber ?? 100;
  let balance = options.balance ?? 1_000;
  let requests = 0;
  let mode: SmsRuOutage = 'none';
  let nextId = 1;
  const messages: SmsRuMessage[] = [];
  const byId = new Map<string, SmsRuMessage>();
  const perNumber = new Map<string, number[]>();
  const lastText = new Map<string, number>();
  const stopList = new Set<string>();

  const refuse = (code: number, text: string) => ({ status: 'ERROR', status_code: code, status_text: text });

  function send(fields: URLSearchParams): unknown {
    if (fields.get('api_id') !== apiId) return refuse(200, 'Неправильный api_id');
    const msg = fields.get('msg') ?? '';
    if (!msg) return refuse(203, 'Нет текста сообщения');
    if (mode === 'unavailable') return refuse(220, 'Сервис временно недоступен, попробуйте чуть позже');
    const to = (fields.get('to') ?? '').split(',').map((n) => n.trim()).filter(Boolean);
    if (to.length === 0) return refuse(202, 'Неправильно указан номер получателя');
    const test = fields.get('test') === '1';
    const sms: Record<string, unknown> = {};
    const now = Date.now();
    for (const number of to) {
      if (!NUMBER.test(number)) {
        sms[number] = refuse(202, 'Неправильно указан номер получателя');
        continue;
      }
      if (stopList.has(number)) {
        sms[number] = refuse(209, 'Вы добавили этот номер (или один из номеров) в стоп-лист');
        continue;
      }
      const today = (perNumber.get(number) ?? []).filter((at) => now - at < DAY_MS);
      if (today.length >= dailyLimit) {
        sms[number] = refuse(230, 'Превышен общий лимит количества сообщений на этот номер в день');
        continue;
      }
      const key = `${number}|${msg}`;
      const last = lastText.get(key);
      if (last !== undefined && now - last < 60_000) {
        sms[number] = refuse(231, 'Превышен лимит одинаковых сообщений на этот номер в минуту');
        continue;
      }
      if (!test && balance < price) {
        sms[number] = refuse(201, 'Не хватает средств на лицевом счету');
        continue;
      }
      if (!test) balance -= price;
      const message: SmsRuMessage = { smsId: `${String(nextId++).padStart(6, '0')}-${String(now % 100_000_000).padStart(8, '0')}`, to: number, msg, from: fields.get('from') ?? '', test, acceptedAt: now, status: 100 };
      messages.push(message);
      byId.set(message.smsId, message);
      today.push(now);
      perNumber.set(number, today);
      lastText.set(key, now);
      sms[number] = { status: 'OK', status_code: 100, sms_id: message.smsId };
    }
    return { status: 'OK', status_code: 100, sms, balance: Number(balance.toFixed(2)) };
  }

  function handle(path: string, fields: URLSearchParams): { http: number; body: unknown } {
    if (mode === 'http503') return { http: 503, body: { status: 'ERROR' } };
    if (fields.get('json') !== '1') return { http: 400, body: 'this fake answers json=1 only' };
    if (path === '/sms/send') {
      requests++;
      return { http: 200, body: send(fields) };
    }
    if (fields.get('api_id') !== apiId) return { http: 200, body: refuse(200, 'Неправильный api_id') };
    if (path === '/my/balance') return { http: 200, body: { status: 'OK', status_code: 100, balance: Number(balance.toFixed(2)) } };
    if (path === '/sms/status') {
      const sms: Record<string, unknown> = {};
      for (const id of (fields.get('sms_id') ?? '').split(',').filter(Boolean)) {
        const message = byId.get(id);
        sms[id] = message ? { status: 'OK', status_code: message.status, cost: price } : { status: 'ERROR', status_code: -1, status_text: 'Сообщение не найдено' };
      }
      return { http: 200, body: { status: 'OK', status_code: 100, sms } };
    }
    return { http: 404, body: { status: 'ERROR', status_code: 211, status_text: 'Метод не найден' } };
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://smsru');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const fields = new URLSearchParams(url.search);
      if (req.method === 'POST') for (const [k, v] of new URLSearchParams(Buffer.concat(chunks).toString('utf8'))) fields.set(k, v);
      const answer = handle(url.pathname, fields);
      res.writeHead(answer.http, { 'content-type': 'application/json; charset=utf-8' }).end(typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body));
    });
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  await listen(0);
  const port = (server.address() as AddressInfo).port;
  let listening = true;
  let callbackUrl = options.callbackUrl;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get requests() {
      return requests;
    },
    get balance() {
      return balance;
    },
    messages,
    get callbackUrl() {
      return callbackUrl;
    },
    set callbackUrl(value) {
      callbackUrl = value;
    },
    timesAccepted: (digits) => messages.filter((m) => m.to === digits && !m.test).length,
    addToStopList: (digits) => {
      stopList.add(digits);
    },
    async outage(next) {
      mode = next;
      if (next === 'refuse' && listening) {
        listening = false;
        await stop();
      } else if (next !== 'refuse' && !listening) {
        await listen(port);
        listening = true;
      }
    },
    async deliver(smsId, code) {
      const message = byId.get(smsId);
      if (!message) throw new Error(`no message ${smsId}`);
      message.status = code;
      if (!callbackUrl) throw new Error('the fake has no callbackUrl');
      const body = new URLSearchParams({ 'data[0]': `sms_status\n${smsId}\n${code}\n${Math.floor(Date.now() / 1000)}` });
      const res = await fetch(callbackUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
      return { status: res.status, body: await res.text() };
    },
    async close() {
      if (listening) {
        listening = false;
        await stop();
      }
    },
  };
}
