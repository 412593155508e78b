/**
 * A local fake of the Postmark HTTP API (https://postmarkapp.com/developer), the HTTP email provider of
 * channel-email (services/channel-email/src/postmark.ts), for tests:
 *
 * - `POST /email` with `X-Postmark-Server-Token`: a wrong token is HTTP 401 `{"ErrorCode": 10}`; a body
 *   that is not JSON 422 `402`; 422 `300` "Invalid email request" for what Postmark's support article
 *   lists (https://postmarkapp.com/support/article/1180-what-does-errorcode-300-mean): a `From` or `To`
 *   that is no address, a `From` whose name has punctuation without quotes (`Acme, Inc <a@b.c>`), no
 *   `TextBody` nor `HtmlBody`; a recipient marked inactive (`deactivate`) 422 `406`. Otherwise 200 `{"To", "SubmittedAt", "MessageID", "ErrorCode": 0,
 *   "Message": "OK"}`, and the message (with its `Metadata`, `Headers`, `MessageStream`) is kept.
 * - `GET /messages/outbound?count&offset[&recipient][&metadata_<key>=<value>]` (the outbound message
 *   search): `{"TotalCount", "Messages": [{"MessageID", "Recipients", "Subject", "Metadata", "Status"}]}`.
 * - Webhooks: `deliver`, `bounce`, `complain` and `suppress` POST the events Postmark posts
 *   (RecordType `Delivery`, `Bounce`, `SpamComplaint`, `SubscriptionChange`) to `webhookUrl`, with the
 *   Basic credentials of that URL in an `Authorization` header, as Postmark sends them.
 *
 * `outage(mode)`: `http500` answers 500 without taking the message; `accept500` takes it and then
 * answers 500 (the ambiguous case); `refuse` stops listening; `none` brings it back on the same port.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface PostmarkMessage {
  MessageID: string;
  From: string;
  To: string;
  Subject: string;
  HtmlBody: string;
  TextBody: string;
  MessageStream: string;
  Headers: Array<{ Name: string; Value: string }>;
  Metadata: Record<string, string>;
  SubmittedAt: string;
}

export type PostmarkOutage = 'none' | 'http500' | 'accept500' | 'refuse';

export interface FakePostmark {
  url: string;
  port: number;
  /** Calls of `POST /email`, accepted or not. */
  readonly sendCalls: number;
  readonly searchCalls: number;
  readonly messages: readonly PostmarkMessage[];
  /** Where the webhook helpers post (the webhook URL set on the Postmark server, credentials included). */
  webhookUrl: string | undefined;
  /** Marks a recipient inactive (Postmark's suppression after a hard bounce or a complaint): sends to it get 406. */
  deactivate(email: string): void;
  outage(mode: PostmarkOutage): Promise<void>;
  deliver(messageId: string): Promise<{ status: number; body: string }>;
  bounce(messageId: string, type: string, typeCode?: number): Promise<{ status: number; body: string }>;
  complain(messageId: string): Promise<{ status: number; body: string }>;
  suppress(messageId: string, reason: 'HardBounce' | 'SpamComplaint' | 'ManualSuppression'): Promise<{ status: number; body: string }>;
  /** Posts any body to the webhook URL (a test of refusals); `auth: false` leaves the credentials out. */
  post(body: string, options?: { auth?: boolean }): Promise<{ status: number; body: string }>;
  close(): Promise<void>;
}

const ADDRESS = /^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/;

/** A sender address as the fake checks it (a local domain such as `localhost` is let through). */
const FROM_ADDRESS = /^[^\s@<>,;:"]+@[^\s@<>,;:"]+$/;

/** `addr` or `Name <addr>`; a name with the specials `,;:@()[]\"<>` must be quoted (the support article's `Joe Sender, jr`). */
function fromIsValid(from: string): boolean {
  const named = /^(.*)<([^<>]+)>$/.exec(from.trim());
  if (!named) return FROM_ADDRESS.test(from.trim());
  const name = named[1].trim();
  const quoted = /^".*"$/.test(name);
  return FROM_ADDRESS.test(named[2].trim()) && (quoted || !/[,;:@()[\]\\"<>]/.test(name));
}

export async function startFakePostmark(options: { serverToken?: string; webhookUrl?: string } = {}): Promise<FakePostmark> {
  const token = options.serverToken ?? 'postmark-test-server-token';
  let mode: PostmarkOutage = 'none';
  let sendCalls = 0;
  let searchCalls = 0;
  const messages: PostmarkMessage[] = [];
  const inactive = new Set<string>();

  function send(raw: string): { status: number; body: unknown } {
    let input: Partial<PostmarkMessage>;
    try {
      input = JSON.parse(raw) as Partial<PostmarkMessage>;
    } catch {
      return { status: 422, body: { ErrorCode: 402, Message: 'Received invalid JSON input.' } };
    }
    const to = String(input.To ?? '');
    const from = String(input.From ?? '');
    if (!fromIsValid(from)) return { status: 422, body: { ErrorCode: 300, Message: `Error parsing 'From': Illegal email address '${from}'. It must contain the '@' symbol, and a name with punctuation must be quoted.` } };
    if (!ADDRESS.test(to)) return { status: 422, body: { ErrorCode: 300, Message: `Error parsing 'To': Illegal email address '${to}'.` } };
    if (!input.TextBody && !input.HtmlBody) return { status: 422, body: { ErrorCode: 300, Message: 'Provide either email TextBody or HtmlBody or both.' } };
    if (inactive.has(to.toLowerCase())) return { status: 422, body: { ErrorCode: 406, Message: `You tried to send to recipient(s) that have been marked as inactive. Found inactive addresses: ${to}.` } };
    const message: PostmarkMessage = {
      MessageID: randomUUID(),
      From: String(input.From ?? ''),
      To: to,
      Subject: String(input.Subject ?? ''),
      HtmlBody: String(input.HtmlBody ?? ''),
      TextBody: String(input.TextBody ?? ''),
      MessageStream: String(input.MessageStream ?? 'outbound'),
      Headers: Array.isArray(input.Headers) ? input.Headers : [],
      Metadata: input.Metadata && typeof input.Metadata === 'object' ? input.Metadata : {},
      SubmittedAt: new Date().toISOString(),
    };
    messages.push(message);
    if (mode === 'accept500') return { status: 500, body: { ErrorCode: 0, Message: 'Internal server error' } };
    return { status: 200, body: { To: to, SubmittedAt: message.SubmittedAt, MessageID: message.MessageID, ErrorCode: 0, Message: 'OK' } };
  }

  function search(query: URLSearchParams): { status: number; body: unknown } {
    const count = Number(query.get('count'));
    const offset = Number(query.get('offset'));
    if (!Number.isInteger(count) || count < 1 || count > 500 || !Number.isInteger(offset) || offset < 0) return { status: 422, body: { ErrorCode: 1000, Message: 'count and offset are required' } };
    const recipient = query.get('recipient');
    const metadata = [...query].filter(([name]) => name.startsWith('metadata_')).map(([name, value]) => [name.slice('metadata_'.length), value] as const);
    const found = messages
      .filter((m) => (recipient === null || m.To.toLowerCase() === recipient.toLowerCase()) && metadata.every(([key, value]) => m.Metadata[key] === value))
      .reverse();
    return {
      status: 200,
      body: { TotalCount: found.length, Messages: found.slice(offset, offset + count).map((m) => ({ MessageID: m.MessageID, Recipients: [m.To], Subject: m.Subject, Metadata: m.Metadata, MessageStream: m.MessageStream, Status: 'Sent', ReceivedAt: m.SubmittedAt })) },
    };
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://postmark');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const reply = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      if (req.headers['x-postmark-server-token'] !== token) return reply(401, { ErrorCode: 10, Message: 'The Server Token you provided in the X-Postmark-Server-Token request header was invalid.' });
      if (req.method === 'POST' && url.pathname === '/email') {
        sendCalls++;
        if (mode === 'http500') return reply(500, { ErrorCode: 0, Message: 'Internal server error' });
        const answer = send(Buffer.concat(chunks).toString('utf8'));
        return reply(answer.status, answer.body);
      }
      if (req.method === 'GET' && url.pathname === '/messages/outbound') {
        searchCalls++;
        const answer = search(url.searchParams);
        return reply(answer.status, answer.body);
      }
      reply(404, { ErrorCode: 404, Message: 'Not found' });
    });
  });
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  const fake: FakePostmark = {
    url: `http://127.0.0.1:${port}`,
    port,
    get sendCalls() {
      return sendCalls;
    },
    get searchCalls() {
      return searchCalls;
    },
    messages,
    webhookUrl: options.webhookUrl,
    deactivate: (email) => void inactive.add(email.toLowerCase()),
    async outage(next) {
      if (next === 'refuse' && mode !== 'refuse') {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      } else if (next !== 'refuse' && mode === 'refuse') {
        await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
      }
      mode = next;
    },
    async post(body, postOptions = {}) {
      if (!fake.webhookUrl) throw new Error('the fake Postmark has no webhookUrl');
      const target = new URL(fake.webhookUrl);
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (postOptions.auth !== false && target.username) headers.authorization = `Basic ${Buffer.from(`${decodeURIComponent(target.username)}:${decodeURIComponent(target.password)}`).toString('base64')}`;
      target.username = '';
      target.password = '';
      const res = await fetch(target, { method: 'POST', headers, body });
      return { status: res.status, body: await res.text() };
    },
    deliver: (messageId) => fake.post(JSON.stringify({ RecordType: 'Delivery', MessageID: messageId, Recipient: recipientOf(messageId), DeliveredAt: new Date().toISOString(), Details: 'smtp;250 2.0.0 OK', MessageStream: 'outbound', Metadata: metadataOf(messageId), ServerID: 1 })),
    bounce: (messageId, type, typeCode = type === 'HardBounce' ? 1 : 4096) =>
      fake.post(JSON.stringify({ RecordType: 'Bounce', ID: Math.floor(Math.random() * 1e9), Type: type, TypeCode: typeCode, Name: type, MessageID: messageId, Email: recipientOf(messageId), BouncedAt: new Date().toISOString(), Inactive: type === 'HardBounce', CanActivate: true, MessageStream: 'outbound', Metadata: metadataOf(messageId), ServerID: 1 })),
    complain: (messageId) => fake.post(JSON.stringify({ RecordType: 'SpamComplaint', ID: Math.floor(Math.random() * 1e9), Type: 'SpamComplaint', TypeCode: 512, MessageID: messageId, Email: recipientOf(messageId), BouncedAt: new Date().toISOString(), Inactive: true, MessageStream: 'outbound', Metadata: metadataOf(messageId), ServerID: 1 })),
    suppress: (messageId, reason) => fake.post(JSON.stringify({ RecordType: 'SubscriptionChange', MessageID: messageId, Recipient: recipientOf(messageId), SuppressSending: true, SuppressionReason: reason, ChangedAt: new Date().toISOString(), Origin: 'Recipient', MessageStream: 'outbound', Metadata: metadataOf(messageId), ServerID: 1 })),
    async close() {
      if (mode !== 'refuse') {
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
    },
  };
  const recipientOf = (messageId: string) => messages.find((m) => m.MessageID === messageId)?.To ?? 'unknown@example.com';
  const metadataOf = (messageId: string) => messages.find((m) => m.MessageID === messageId)?.Metadata ?? {};
  return fake;
}
