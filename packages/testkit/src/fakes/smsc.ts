/**
 * A local fake of the SMSC.ru HTTP API (https://smsc.ru/api/http/), the SMS gateway channel-sms calls
 * (services/channel-sms/src/provider.ts), for tests, the chaos suite and `bench/send.mjs`:
 *
 * - `/sys/send.php` (GET query or POST form-encoded): `login` + `psw` (or `apikey`), `phones` (several
 *   separated by `,` or `;`), `mes`, optional `id`, `sender`, `charset`; `fmt=3` answers JSON:
 *   `{"id": …, "cnt": n}` on success, `{"error": "…", "error_code": N}` on refusal (HTTP 200, as SMSC
 *   does). Refusals the fake makes on its own: 2 wrong login or password, 1 missing `phones`/`mes` or a
 *   bad `id`, 7 an invalid number, 3 not enough money, 9 the same request again within a minute (SMSC's
 *   "duplicate request" rule). Like SMSC, a second message with the same `id` is accepted ("не обязательно
 *   уникален"): ids are not deduplicated.
 * - `/sys/status.php`: `phone` + `id` → `{"status": 0, …}` for the last message with that id to that
 *   phone, `{"status": -3}` when there is none (what a resumed send of channel-sms asks first). With
 *   `statusMethod: false` it is 404, as on an SMSC-compatible gateway without the status method;
 *   `respondStatus` answers it first (e.g. `{hang: true}`: a hung SMSC whose status hangs too).
 * - `/sys/balance.php`: `{"balance": "<n.nn>"}` (plus `"currency": "RUR"` with `cur=1`), or error 2.
 * - `/sys/get.php?get_answers=1` (https://smsc.ru/api/http/get_data/inbox): the SMS people sent to the
 *   account's numbers, oldest first, as `[{"id", "phone", "to_phone", "sent": "dd.mm.yyyy hh:mm:ss",
 *   "message"}]`: those after `after_id`, else those of the last `hour` hours (default 1); error 2 for
 *   wrong credentials. `reply(phone, message)` puts one there, as a person answering would.
 * - Status notifications: `deliver(id, phone, status)` POSTs `id`, `phone`, `status`, `time`, `err` and
 *   `sha1` = sha1("<id>:<phone>:<status>:<password>") to `statusUrl`, as SMSC calls the status handler
 *   set in the account ("Уведомления о событиях").
 *
 * Each accepted message is counted by its message id (the given `id`, else one the fake assigns) and by
 * phone, with the time it was accepted. `respond` lets a test answer a request its own way first (an
 * error code, an HTTP status, a delay, no answer at all).
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A send request as the fake read it. */
export interface SmscSendRequest {
  phones: string[];
  mes: string;
  /** The message id given by the caller; '' when none. */
  id: string;
  sender: string;
  /** Every field, as sent. */
  fields: URLSearchParams;
}

/** A message the fake accepted. */
export interface SmscMessage {
  id: string;
  phones: string[];
  mes: string;
  sender: string;
  /** Messages charged: one per phone (the fake does not split long texts into parts). */
  cnt: number;
  /** Epoch milliseconds (fractional). */
  acceptedAt: number;
}

/** What `respond` may answer instead of the fake's own handling. */
export type SmscAnswer =
  | { error: string; errorCode: number }
  | { httpStatus: number; body?: string; headers?: Record<string, string> }
  /** Never answers: the caller must time out. */
  | { hang: true };

export interface FakeSmscOptions {
  /** Credentials the fake accepts (default `bench` / `secret`); `apikey` may replace both. */
  login?: string;
  password?: string;
  apikey?: string;
  /** Account balance in roubles (default 1 000 000). */
  balance?: number;
  /** Price of one message (default 0: the balance never runs out). */
  pricePerMessage?: number;
  /** Keep every accepted message in `messages` (default true). */
  keepMessages?: boolean;
  /** How long an identical request is refused with error 9 (default 60 000 ms, as SMSC). */
  duplicateWindowMs?: number;
  /** Consulted first for every send request; undefined = the fake's own handling. */
  respond?: (request: SmscSendRequest) => SmscAnswer | undefined | Promise<SmscAnswer | undefined>;
  /** Consulted first for every status request (`id`, `phone`, …); undefined = the fake's own handling. */
  respondStatus?: (fields: URLSearchParams) => SmscAnswer | undefined | Promise<SmscAnswer | undefined>;
  /** Whether `/sys/status.php` exists (default true); false = 404, a compatible gateway without it. */
  statusMethod?: boolean;
  /** Called once per accepted message. */
  onMessage?: (message: SmscMessage) => void;
}

export interface FakeSmsc {
  /** Base URL, as channel-sms's `SMSC_URL` takes it. */
  url: string;
  port: number;
  /** Send requests received (accepted or not). */
  readonly requests: number;
  /** Status requests received (answered or not). */
  readonly statusRequests: number;
  /** Messages accepted. */
  readonly count: number;
  /** Accepted messages, oldest first (empty with `keepMessages: false`). */
  readonly messages: readonly SmscMessage[];
  readonly balance: number;
  /** The last accepted message with this id (only with `keepMessages`). */
  byId(id: string): SmscMessage | undefined;
  /** When the first message with this id was accepted (kept even without `keepMessages`). */
  acceptedAtOfId(id: string): number | undefined;
  /** When the first message to this phone (as sent, e.g. `+79161234567`) was accepted. */
  acceptedAtOf(phone: string): number | undefined;
  /** Messages accepted for this phone: more than one means it was sent twice. */
  timesAccepted(phone: string): number;
  /** A person at `phone` (digits, as SMSC lists senders) sends `message` to the account's number; resolves its id. */
  reply(phone: string, message: string, toPhone?: string): number;
  /** Inbox reads (`get_answers`) received. */
  readonly inboxReads: number;
  /** The status handler URL set in the account (where `deliver` posts). */
  statusUrl: string | undefined;
  /** Sends a signed status notification for a message; resolves with the handler's answer. */
  deliver(id: string, phone: string, status: number): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

/** Documented `id`: an integer 1..2147483647 or up to 40 latin letters, digits, `.`, `_`, `-`. */
const MESSAGE_ID = /^[A-Za-z0-9._-]{1,40}$/;
/** A phone as SMSC reads it: digits, optionally with `+`, spaces, dashes and brackets; 10–15 digits. */
const PHONE_DIGITS = /^\d{10,15}$/;

const nowMs = () => performance.timeOrigin + performance.now();

/** Starts the fake on a free loopback port. */
export async function startFakeSmsc(options: FakeSmscOptions = {}): Promise<FakeSmsc> {
  const login = options.login ?? 'bench';
  const password = options.password ?? 'secret';
  const price = options.pricePerMessage ?? 0;
  const keep = options.keepMessages ?? true;
  const duplicateWindowMs = options.duplicateWindowMs ?? 60_000;
  let balance = options.balance ?? 1_000_000;
  let requests = 0;
  let statusRequests = 0;
  let count = 0;
  let nextId = 1;
  const messages: SmscMessage[] = [];
  const byId = new Map<string, SmscMessage>();
  /** `<id>|<phone>` → when the last such message was accepted, for status.php (kept without `keepMessages`). */
  const lastByIdAndPhone = new Map<string, number>();
  const acceptedIds = new Map<string, number>();
  const firstByPhone = new Map<string, number>();
  const timesByPhone = new Map<string, number>();
  /** Request fingerprint → when it was last accepted, for error 9. */
  const recent = new Map<string, number>();
  const hanging = new Set<http.ServerResponse>();
  const inbox: Array<{ id: number; phone: string; to_phone: string; sent: string; message: string; at: number }> = [];
  let inboxReads = 0;
  const smscTime = (at: number) => {
    const d = new Date(at);
    const two = (n: number) => String(n).padStart(2, '0');
    return `${two(d.getDate())}.${two(d.getMonth() + 1)}.${d.getFullYear()} ${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  };

  const authorized = (f: URLSearchParams) => (options.apikey !== undefined && f.get('apikey') === options.apikey) || (f.get('login') === login && f.get('psw') === password);

  function sendMessage(request: SmscSendRequest): { status: number; body: unknown } {
    const refuse = (errorCode: number, error: string) => ({ status: 200, body: { error, error_code: errorCode, ...(request.id ? { id: request.id } : {}) } });
    if (!authorized(request.fields)) return refuse(2, 'authorise error');
    if (request.phones.length === 0 || !request.mes) return refuse(1, 'parameters error');
    if (request.id && !MESSAGE_ID.test(request.id)) return refuse(1, 'parameters error');
    if (request.phones.some((p) => !PHONE_DIGITS.test(p.replace(/[\s()+-]/g, '')))) return refuse(7, 'invalid number');
    const fingerprint = JSON.stringify([request.phones, request.mes, request.id, request.sender]);
    const now = nowMs();
    const last = recent.get(fingerprint);
    if (last !== undefined && now - last < duplicateWindowMs) return refuse(9, 'duplicate request, wait a minute');
    const cnt = request.phones.length;
    if (balance < cnt * price) return refuse(3, 'no money');
    balance -= cnt * price;
    // Oldest first, so the expired ones are cut from the front.
    recent.delete(fingerprint);
    recent.set(fingerprint, now);
    for (const [key, at] of recent) {
      if (now - at < duplicateWindowMs) break;
      recent.delete(key);
    }
    const message: SmscMessage = { id: request.id || String(nextId++), phones: request.phones, mes: request.mes, sender: request.sender, cnt, acceptedAt: now };
    count++;
    if (!acceptedIds.has(message.id)) acceptedIds.set(message.id, now);
    for (const phone of message.phones) {
      lastByIdAndPhone.set(`${message.id}|${phone}`, now);
      if (!firstByPhone.has(phone)) firstByPhone.set(phone, now);
      timesByPhone.set(phone, (timesByPhone.get(phone) ?? 0) + 1);
    }
    if (keep) {
      messages.push(message);
      byId.set(message.id, message);
    }
    options.onMessage?.(message);
    return { status: 200, body: { id: /^\d+$/.test(message.id) ? Number(message.id) : message.id, cnt } };
  }

  /** Answers with what `respond`/`respondStatus` gave: an error code, an HTTP status, or never (a hang). */
  function answered(answer: SmscAnswer, res: http.ServerResponse): true {
    if ('hang' in answer) {
      hanging.add(res);
      res.on('close', () => hanging.delete(res));
    } else if ('httpStatus' in answer) {
      res.writeHead(answer.httpStatus, { 'content-type': 'application/json', ...answer.headers }).end(answer.body ?? '{}');
    } else {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify({ error: answer.error, error_code: answer.errorCode }));
    }
    return true;
  }

  async function handle(path: string, fields: URLSearchParams, res: http.ServerResponse): Promise<void> {
    const json = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
    };
    if (fields.get('fmt') !== '3') {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('this fake answers fmt=3 (JSON) only');
      return;
    }
    if (path === '/sys/balance.php') {
      if (!authorized(fields)) return json(200, { error: 'authorise error', error_code: 2 });
      return json(200, { balance: balance.toFixed(2), ...(fields.get('cur') === '1' ? { currency: 'RUR' } : {}) });
    }
    if (path === '/sys/status.php' && options.statusMethod !== false) {
      statusRequests++;
      const answer = await options.respondStatus?.(fields);
      if (answer && answered(answer, res)) return;
      if (!authorized(fields)) return json(200, { error: 'authorise error', error_code: 2 });
      const at = lastByIdAndPhone.get(`${fields.get('id') ?? ''}|${fields.get('phone') ?? ''}`);
      return json(200, at === undefined ? { status: -3 } : { status: 0, last_timestamp: Math.floor(at / 1000), err: 0 });
    }
    if (path === '/sys/get.php' && fields.get('get_answers') === '1') {
      inboxReads++;
      if (!authorized(fields)) return json(200, { error: 'authorise error', error_code: 2 });
      const afterId = fields.get('after_id');
      const since = Date.now() - Number(fields.get('hour') ?? '1') * 3_600_000;
      const listed = inbox.filter((m) => (afterId !== null ? m.id > Number(afterId) : m.at >= since));
      return json(200, listed.map(({ at: _at, ...entry }) => entry));
    }
    if (path !== '/sys/send.php') return json(404, { error: 'not found' });
    requests++;
    const request: SmscSendRequest = {
      phones: (fields.get('phones') ?? '').split(/[,;]/).map((p) => p.trim()).filter(Boolean),
      mes: fields.get('mes') ?? '',
      id: fields.get('id') ?? '',
      sender: fields.get('sender') ?? '',
      fields,
    };
    const answer = await options.respond?.(request);
    if (answer && answered(answer, res)) return;
    const result = sendMessage(request);
    json(result.status, result.body);
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://smsc');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const fields = new URLSearchParams(url.search);
      if (req.method === 'POST') for (const [k, v] of new URLSearchParams(Buffer.concat(chunks).toString('utf8'))) fields.set(k, v);
      handle(url.pathname, fields, res).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' }).end(String(err));
      });
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const fake: FakeSmsc = {
    url: `http://127.0.0.1:${port}`,
    port,
    get requests() {
      return requests;
    },
    get statusRequests() {
      return statusRequests;
    },
    get count() {
      return count;
    },
    get balance() {
      return balance;
    },
    messages,
    byId: (id) => byId.get(id),
    acceptedAtOfId: (id) => acceptedIds.get(id),
    acceptedAtOf: (phone) => firstByPhone.get(phone),
    timesAccepted: (phone) => timesByPhone.get(phone) ?? 0,
    reply(phone, message, toPhone = '79000000000') {
      const at = Date.now();
      const id = 1_000 + inbox.length;
      inbox.push({ id, phone, to_phone: toPhone, sent: smscTime(at), message, at });
      return id;
    },
    get inboxReads() {
      return inboxReads;
    },
    statusUrl: undefined,
    async deliver(id, phone, status) {
      if (!fake.statusUrl) throw new Error('the fake SMSC has no status handler URL (statusUrl)');
      const sha1 = createHash('sha1').update(`${id}:${phone}:${status}:${password}`).digest('hex');
      const body = new URLSearchParams({ id, phone, status: String(status), time: String(Math.floor(Date.now() / 1000)), err: '0', sha1 });
      const res = await fetch(fake.statusUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
      return { status: res.status, body: await res.text() };
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const res of hanging) res.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  return fake;
}
