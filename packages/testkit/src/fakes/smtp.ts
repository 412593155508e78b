/**
 * A local SMTP server (smtp-server, the library nodemailer's authors keep) that accepts mail and
 * counts it: what channel-email's tests, the chaos suite and `bench/send.mjs` send to. It speaks real
 * SMTP (EHLO, AUTH PLAIN/LOGIN, MAIL, RCPT, DATA), so the sender's own SMTP client is what is exercised.
 */
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { SMTPServer, type SMTPServerAddress } from 'smtp-server';

/** A message the server accepted (its 250 answer to DATA). */
export interface SmtpSinkMessage {
  from: string;
  /** Envelope recipients (RCPT TO), as given. */
  to: string[];
  /** The Message-ID header, as written (`<…>`); '' when there is none. */
  messageId: string;
  /** Size of the message data in bytes. */
  size: number;
  /** Epoch milliseconds (fractional) at which the message was accepted. */
  acceptedAt: number;
  /** The message as received (headers and body); kept only with `keepRaw`. */
  raw?: Buffer;
}

/** An SMTP reply the server gives instead of accepting: 4xx = try later, 5xx = refused. */
export interface SmtpRefusal {
  code: number;
  message: string;
}

export interface SmtpSinkOptions {
  /** Required credentials; unset = no AUTH (the client must not authenticate). */
  auth?: { user: string; pass: string };
  /**
   * Keep every accepted message in `messages` (default true). A benchmark sending hundreds of
   * thousands turns it off and reads `count`, `onMessage` or `acceptedAtOf`.
   */
  keepMessages?: boolean;
  /** Also keep each message's bytes in `raw` (default true; needs `keepMessages`). */
  keepRaw?: boolean;
  /** Answers MAIL FROM for the sender address; a refusal (e.g. 553 "sender not allowed") makes the server reply with it. Default: accept. */
  onMailFrom?: (address: string) => SmtpRefusal | undefined;
  /** Answers RCPT TO for an address; a refusal makes the server reply with it (450/451/452 temporary, 550 permanent). Default: accept. */
  onRcptTo?: (address: string) => SmtpRefusal | undefined;
  /** Called once per accepted message, after it is counted. */
  onMessage?: (message: SmtpSinkMessage) => void;
  /** Simultaneous connections allowed (default 100). */
  maxClients?: number;
}

export interface SmtpSink {
  /** `smtp://[user:pass@]127.0.0.1:<port>`, as channel-email's `SMTP_URL` takes it. */
  url: string;
  port: number;
  /** Messages accepted (each DATA answered 250), kept or not. */
  readonly count: number;
  /** Accepted messages, oldest first (empty with `keepMessages: false`). */
  readonly messages: readonly SmtpSinkMessage[];
  /** When the first message for this envelope recipient was accepted (epoch ms), kept even without `keepMessages`. */
  acceptedAtOf(recipient: string): number | undefined;
  /** Accepted messages per envelope recipient: more than one means it was sent twice. */
  timesAccepted(recipient: string): number;
  close(): Promise<void>;
}

const nowMs = () => performance.timeOrigin + performance.now();

function refusal(r: SmtpRefusal): Error & { responseCode: number } {
  return Object.assign(new Error(r.message), { responseCode: r.code });
}

/** The Message-ID header from the header block of a message, unfolded. */
function messageIdOf(raw: Buffer): string {
  const end = raw.indexOf('\r\n\r\n');
  const head = raw.subarray(0, end < 0 ? raw.length : end).toString('latin1').replace(/\r\n[ \t]+/g, ' ');
  return /^message-id:\s*(.*)$/im.exec(head)?.[1].trim() ?? '';
}

/** Starts the server on a free loopback port (plain SMTP, no STARTTLS offered). */
export async function startSmtpSink(options: SmtpSinkOptions = {}): Promise<SmtpSink> {
  const keep = options.keepMessages ?? true;
  const keepRaw = keep && (options.keepRaw ?? true);
  const messages: SmtpSinkMessage[] = [];
  const firstAccepted = new Map<string, number>();
  const times = new Map<string, number>();
  let count = 0;
  const address = (a: SMTPServerAddress | false) => (a ? a.address : '');

  const server = new SMTPServer({
    authOptional: !options.auth,
    disabledCommands: options.auth ? ['STARTTLS'] : ['STARTTLS', 'AUTH'],
    // Plain SMTP on loopback: the client may authenticate without TLS.
    allowInsecureAuth: true,
    logger: false,
    maxClients: options.maxClients ?? 100,
    // Pooled clients keep their connections open; close() ends them after this grace.
    closeTimeout: 1_000,
    onAuth(auth, _session, cb) {
      if (options.auth && auth.username === options.auth.user && auth.password === options.auth.pass) cb(null, { user: auth.username });
      else cb(refusal({ code: 535, message: '5.7.8 Authentication credentials invalid' }));
    },
    onMailFrom(from, _session, cb) {
      const refused = options.onMailFrom?.(from.address);
      cb(refused ? refusal(refused) : undefined);
    },
    onRcptTo(rcpt, _session, cb) {
      const refused = options.onRcptTo?.(rcpt.address);
      cb(refused ? refusal(refused) : undefined);
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      let size = 0;
      stream.on('data', (chunk: Buffer) => {
        size += chunk.length;
        chunks.push(chunk);
      });
      stream.on('end', () => {
        const raw = Buffer.concat(chunks, size);
        const message: SmtpSinkMessage = {
          from: address(session.envelope.mailFrom),
          to: session.envelope.rcptTo.map((r) => r.address),
          messageId: messageIdOf(raw),
          size,
          acceptedAt: nowMs(),
          ...(keepRaw ? { raw } : {}),
        };
        count++;
        for (const to of message.to) {
          if (!firstAccepted.has(to)) firstAccepted.set(to, message.acceptedAt);
          times.set(to, (times.get(to) ?? 0) + 1);
        }
        if (keep) messages.push(message);
        options.onMessage?.(message);
        cb(null, 'OK: queued');
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  // smtp-server emits client errors (a client that hangs up mid-session) on the server.
  server.on('error', () => undefined);
  const port = (server.server.address() as AddressInfo).port;
  const credentials = options.auth ? `${encodeURIComponent(options.auth.user)}:${encodeURIComponent(options.auth.pass)}@` : '';
  return {
    url: `smtp://${credentials}127.0.0.1:${port}`,
    port,
    get count() {
      return count;
    },
    messages,
    acceptedAtOf: (recipient) => firstAccepted.get(recipient),
    timesAccepted: (recipient) => times.get(recipient) ?? 0,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A server that takes TCP connections and never says a word (see `startSilentSmtpServer`). */
export interface SilentSmtpServer {
  /** `smtp://127.0.0.1:<port>`, as channel-email's `SMTP_URL` takes it. */
  url: string;
  port: number;
  /** Connections accepted so far. */
  readonly connections: number;
  /** Connections open now. */
  readonly open: number;
  close(): Promise<void>;
}

/**
 * An SMTP server that hangs before its greeting: it accepts the TCP connection and never sends the 220
 * (RFC 5321 §3.1: the client waits for it before any command), as an overloaded or wedged MTA does. A
 * client can have sent nothing of a message to it: the whole session is "not sent".
 */
export async function startSilentSmtpServer(): Promise<SilentSmtpServer> {
  const sockets = new Set<Socket>();
  let connections = 0;
  const server = createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('close', () => sockets.delete(socket));
    // Reads whatever the client writes (nothing, if it follows the protocol) and never answers.
    socket.resume();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `smtp://127.0.0.1:${port}`,
    port,
    get connections() {
      return connections;
    },
    get open() {
      return sockets.size;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
