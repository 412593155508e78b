import type { AddressInfo, Socket } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { classifySmtpError } from '../src/provider';
import { SmtpPool, type SmtpSendError } from '../src/smtpPool';

// mailparser ships no types.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { simpleParser } = require('mailparser') as { simpleParser(src: Buffer): Promise<{ text?: string }> };

type Refusal = Error & { responseCode: number };
const refusal = (code: number, message: string): Refusal => Object.assign(new Error(message), { responseCode: code });

/**
 * A real SMTP server (smtp-server) that records each accepted message with the connection it came on.
 * `mailFrom` and `data` can refuse, or cut the session, per message.
 */
async function startServer(hooks: { mailFrom?: (session: { id: string; transaction: number }) => Refusal | undefined; afterData?: () => 'cut' | undefined; socketTimeout?: number; startTls?: boolean; noPipelining?: boolean } = {}) {
  const accepted: Array<{ connection: string; to: string[]; raw: Buffer; secure: boolean }> = [];
  const connections = new Set<string>();
  const sockets: Socket[] = [];
  const open = { now: 0, most: 0 };
  const server = new SMTPServer({
    authOptional: false,
    // With `startTls`, STARTTLS is offered with smtp-server's built-in self-signed certificate.
    disabledCommands: hooks.startTls ? [] : ['STARTTLS'],
    allowInsecureAuth: true,
    logger: false,
    ...(hooks.socketTimeout ? { socketTimeout: hooks.socketTimeout } : {}),
    hidePIPELINING: hooks.noPipelining ?? false,
    onConnect(session, cb) {
      connections.add(session.id);
      cb();
    },
    onAuth(auth, _session, cb) {
      if (auth.username === 'user' && auth.password === 'secret') cb(null, { user: 'user' });
      else cb(refusal(535, 'Authentication failed'));
    },
    onMailFrom(_address, session, cb) {
      cb(hooks.mailFrom?.({ id: session.id, transaction: session.transaction }));
    },
    onRcptTo(address, _session, cb) {
      cb(address.address.startsWith('bounce') ? refusal(550, '5.1.1 No such user') : undefined);
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        if (hooks.afterData?.() === 'cut') {
          // The server has the whole message and goes away before its reply.
          for (const socket of sockets) socket.destroy();
          return;
        }
        accepted.push({ connection: session.id, to: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks), secure: session.secure });
        cb(null, 'OK');
      });
    },
  });
  // A session is open at the server from its connection until the server says 221 to QUIT (before the
  // client can see its end) or the socket closes, whichever comes first.
  server.server.on('connection', (socket: Socket) => {
    sockets.push(socket);
    open.most = Math.max(open.most, ++open.now);
    let over = false;
    const end = () => {
      if (!over) open.now--;
      over = true;
    };
    const write = socket.write.bind(socket) as (chunk: unknown, ...rest: unknown[]) => boolean;
    socket.write = ((chunk: unknown, ...rest: unknown[]) => {
      if (String(chunk).startsWith('221')) end();
      return write(chunk, ...rest);
    }) as Socket['write'];
    socket.once('close', end);
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.server.address() as AddressInfo).port;
  return { port, accepted, connections, open, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const raw = (to: string, text = 'hello') => Buffer.from(`From: r@acme.test\r\nTo: ${to}\r\nSubject: s\r\nMessage-ID: <${to}>\r\n\r\n${text}\r\n`);

function pool(port: number, options: { maxConnections?: number; maxMessages?: number; timeoutMs?: number } = {}) {
  const timeoutMs = options.timeoutMs ?? 3_000;
  return new SmtpPool({
    connection: { host: '127.0.0.1', port, secure: false, logger: false, connectionTimeout: timeoutMs, greetingTimeout: timeoutMs, socketTimeout: timeoutMs, tls: { rejectUnauthorized: false } },
    auth: { user: 'user', pass: 'secret' },
    maxConnections: options.maxConnections ?? 2,
    maxMessages: options.maxMessages,
  });
}

describe('SmtpPool', () => {
  it('carries many messages over at most maxConnections sessions, a session for maxMessages at most', async () => {
    const server = await startServer();
    const smtp = pool(server.port, { maxConnections: 3, maxMessages: 4 });
    try {
      const recipients = Array.from({ length: 30 }, (_, i) => `r${i}@example.com`);
      await Promise.all(recipients.map((to) => smtp.send({ from: 'r@acme.test', to: [to] }, raw(to))));
      expect(server.accepted.map((m) => m.to[0]).sort()).toEqual([...recipients].sort());
      const perConnection = new Map<string, number>();
      for (const m of server.accepted) perConnection.set(m.connection, (perConnection.get(m.connection) ?? 0) + 1);
      expect(Math.max(...perConnection.values())).toBeLessThanOrEqual(4);
      // 30 messages, 4 a session: at least 8 sessions, never more than 3 open at the server at once.
      expect(server.connections.size).toBeGreaterThanOrEqual(8);
      expect(server.open.most).toBeLessThanOrEqual(3);
    } finally {
      smtp.close();
      await server.close();
    }
  });

  it('sends the message data as given, dot-stuffed on the wire and whole at the other end', async () => {
    const server = await startServer();
    const smtp = pool(server.port);
    try {
      const text = 'first\r\n.\r\n.second\r\nlast';
      await smtp.send({ from: 'r@acme.test', to: ['dots@example.com'] }, raw('dots@example.com', text));
      expect((await simpleParser(server.accepted[0].raw)).text).toBe(`${text}\n`.replace(/\r\n/g, '\n'));
    } finally {
      smtp.close();
      await server.close();
    }
  });

  it('keeps a session after the server refused a recipient (RSET), and the refusal is permanent', async () => {
    const server = await startServer();
    const smtp = pool(server.port, { maxConnections: 1 });
    try {
      const refused = await smtp.send({ from: 'r@acme.test', to: ['bounce@example.com'] }, raw('bounce@example.com')).catch((err: SmtpSendError) => err);
      expect(refused).toMatchObject({ code: 'EENVELOPE', responseCode: 550, dataSent: false });
      expect(classifySmtpError(refused)).toMatchObject({ name: 'PermanentSendError', reason: 'recipient_rejected' });
      await smtp.send({ from: 'r@acme.test', to: ['after@example.com'] }, raw('after@example.com'));
      expect(server.accepted.map((m) => m.to)).toEqual([['after@example.com']]);
      expect(server.connections.size).toBe(1);
    } finally {
      smtp.close();
      await server.close();
    }
  });

  it('sends a message again on a new session when a reused one was closed by the server before its data went out (421)', async () => {
    // Every session's second transaction is answered 421 (the server closing it), before any data.
    const server = await startServer({ mailFrom: ({ transaction }) => (transaction === 2 ? refusal(421, '4.4.2 Closing the session') : undefined) });
    const smtp = pool(server.port, { maxConnections: 1 });
    try {
      for (const to of ['a@example.com', 'b@example.com', 'c@example.com']) await smtp.send({ from: 'r@acme.test', to: [to] }, raw(to));
      expect(server.accepted.map((m) => m.to[0])).toEqual(['a@example.com', 'b@example.com', 'c@example.com']);
      // a; b refused on the first session, sent on a second; c likewise on a third.
      expect(server.connections.size).toBe(3);
    } finally {
      smtp.close();
      await server.close();
    }
  });

  it('tries every stale session before a new one when the server was restarted under the idle sessions', async () => {
    // Sessions opened before the "restart" are answered 421 from then on; new ones work.
    const stale = new Set<string>();
    let restarted = false;
    const server = await startServer({ mailFrom: ({ id }) => (restarted && stale.has(id) ? refusal(421, '4.3.2 Restarting') : undefined) });
    const smtp = pool(server.port, { maxConnections: 3 });
    try {
      await Promise.all(['a', 'b', 'c'].map((n) => smtp.send({ from: 'r@acme.test', to: [`${n}@example.com`] }, raw(`${n}@example.com`))));
      for (const id of server.connections) stale.add(id);
      expect(stale.size).toBe(3);
      restarted = true;
      await smtp.send({ from: 'r@acme.test', to: ['after@example.com'] }, raw('after@example.com'));
      expect(server.accepted.map((m) => m.to[0])).toContain('after@example.com');
      expect(server.connections.size).toBe(4);
    } finally {
      smtp.close();
      await server.close();
    }
  });

  it('talks to a server without PIPELINING one command at a time, refusals included', async () => {
    const server = await startServer({ noPipelining: true });
    const smtp = pool(server.port, { maxConnections: 1 });
    try {
      await smtp.send({ from: 'r@acme.test', to: ['one@example.com'] }, raw('one@example.com'));
      await expect(smtp.send({ from: 'r@acme.test', to: ['bounce@example.com'] }, raw('bounce@example.com'))).rejects.toMatchObject({ code: 'EENVELOPE', responseCode: 550 });
      await smtp.send({ from: 'r@acme.test', to: ['two@example.com'] }, raw('two@example.com'));
      expect(server.accepted.map((m) => m.to[0])).toEqual(['one@example.com', 'two@example.com']);
      expect(server.connections.size).toBe(1);
    } finally {
      smtp.close();
      await server.close();
    }
  });

  it('upgrades a plain session with STARTTLS when the server offers it', async () => {
    const server = await startServer({ startTls: true });
    const smtp = pool(server.port, { maxConnections: 1 });
    try {
      for (const to of ['tls1@example.com', 'tls2@example.com']) await smtp.send({ from: 'r@acme.test', to: [to] }, raw(to, 'over TLS'));
      expect(server.accepted.map((m) => [m.to[0], m.secure])).toEqual([['tls1@example.com', true], ['tls2@example.com', true]]);
      expect((await simpleParser(server.accepted[1].raw)).text).toBe('over TLS\n');
    } finally {
      smtp.close();
      await server.close();
    }
  });

  it('drops a session the server timed out while it sat idle, and sends the next message on a new one', async () => {
    const server = await startServer({ socketTimeout: 300 });
    const smtp = pool(server.port, { maxConnections: 1 });
    try {
      await smtp.send({ from: 'r@acme.test', to: ['one@example.com'] }, raw('one@example.com'));
      await new Promise((r) => setTimeout(r, 600));
      await smtp.send({ from: 'r@acme.test', to: ['two@example.com'] }, raw('two@example.com'));
      expect(server.accepted.map((m) => m.to[0])).toEqual(['one@example.com', 'two@example.com']);
      expect(server.connections.size).toBe(2);
    } finally {
      smtp.close();
      await server.close();
    }
  });

  it('says the data went out when the session is cut after it, before the reply: the message is maybe delivered, not tried again', async () => {
    let dataEnds = 0;
    const server = await startServer({ afterData: () => (++dataEnds === 2 ? 'cut' : undefined) });
    const smtp = pool(server.port, { maxConnections: 1 });
    try {
      await smtp.send({ from: 'r@acme.test', to: ['first@example.com'] }, raw('first@example.com'));
      const cut = await smtp.send({ from: 'r@acme.test', to: ['cut@example.com'] }, raw('cut@example.com')).catch((err: SmtpSendError) => err);
      expect(cut).toMatchObject({ dataSent: true });
      expect(classifySmtpError(cut)).toMatchObject({ name: 'RetryableSendError', maybeDelivered: true });
      // Not resent by the pool, even though its session was a reused one.
      expect(dataEnds).toBe(2);
      await smtp.send({ from: 'r@acme.test', to: ['next@example.com'] }, raw('next@example.com'));
      expect(dataEnds).toBe(3);
      expect(server.accepted.map((m) => m.to[0])).toEqual(['first@example.com', 'next@example.com']);
    } finally {
      smtp.close();
      await server.close();
    }
  });

  it('fails a send with wrong credentials as EAUTH, and refuses sends once closed', async () => {
    const server = await startServer();
    const wrong = new SmtpPool({ connection: { host: '127.0.0.1', port: server.port, secure: false, logger: false }, auth: { user: 'user', pass: 'nope' }, maxConnections: 1 });
    try {
      const err = await wrong.send({ from: 'r@acme.test', to: ['x@example.com'] }, raw('x@example.com')).catch((e: SmtpSendError) => e);
      expect(err).toMatchObject({ code: 'EAUTH' });
      expect(classifySmtpError(err)).toMatchObject({ reason: 'provider_auth_failed', maybeDelivered: false });
      wrong.close();
      await expect(wrong.send({ from: 'r@acme.test', to: ['y@example.com'] }, raw('y@example.com'))).rejects.toMatchObject({ code: 'ECONNECTION' });
      expect(server.accepted).toHaveLength(0);
    } finally {
      wrong.close();
      await server.close();
    }
  });

  it("gives the next free session to a small request's send (ahead) before the sends that waited longer", async () => {
    const server = await startServer();
    const smtp = pool(server.port, { maxConnections: 1 });
    try {
      const send = (to: string, ahead = false) => smtp.send({ from: 'r@acme.test', to: [to] }, raw(to), undefined, ahead);
      const first = send('first@example.com');
      const bulk = ['bulk1@example.com', 'bulk2@example.com', 'bulk3@example.com'].map((to) => send(to));
      const order = send('order@example.com', true);
      const later = send('order2@example.com', true);
      await Promise.all([first, ...bulk, order, later]);
      expect(server.accepted.map((m) => m.to[0])).toEqual(['first@example.com', 'order@example.com', 'order2@example.com', 'bulk1@example.com', 'bulk2@example.com', 'bulk3@example.com']);
    } finally {
      smtp.close();
      await server.close();
    }
  });

  it('refuses a send waiting for a session once the pool closes, and lets the one in flight finish', async () => {
    const server = await startServer();
    const smtp = pool(server.port, { maxConnections: 1 });
    try {
      const first = smtp.send({ from: 'r@acme.test', to: ['inflight@example.com'] }, raw('inflight@example.com'));
      const waiting = smtp.send({ from: 'r@acme.test', to: ['waiting@example.com'] }, raw('waiting@example.com'));
      smtp.close();
      await expect(first).resolves.toBeDefined();
      await expect(waiting).rejects.toMatchObject({ code: 'ECONNECTION' });
      expect(server.accepted.map((m) => m.to[0])).toEqual(['inflight@example.com']);
    } finally {
      await server.close();
    }
  });
});
