import { Readable } from 'node:stream';
import SMTPConnection, { type Options as SMTPConnectionOptions, type SentMessageInfo } from 'nodemailer/lib/smtp-connection';
import { WaitLine } from '@rrs/sender-kit';

export interface SmtpPoolOptions {
  /** Passed to each nodemailer SMTPConnection: host, port, secure, tls, timeouts. */
  connection: SMTPConnectionOptions;
  /** AUTH credentials; unset = no AUTH. */
  auth?: { user: string; pass: string };
  /** Sessions open at once; each carries one message at a time. */
  maxConnections: number;
  /** Messages one session carries before it says QUIT and a new one takes its place (nodemailer's pool: 100). */
  maxMessages?: number;
}

/** What the server said about a delivered message. */
export type SmtpSendInfo = SentMessageInfo;

/**
 * An error of a send: `dataSent` says the message data went out on the socket (the server had accepted
 * DATA with its 354) before the session failed, so the server may have the message even without its
 * reply. Every error the pool throws carries it: false for a failure to open a session (no connection,
 * no greeting, TLS, AUTH), for the envelope refused, and for a send recalled while it waited for a session.
 */
export type SmtpSendError = Error & { code?: string; responseCode?: number; dataSent?: boolean; recalled?: boolean };

/** Code of a send recalled while waiting for a session (`signal` aborted): it never reached the server. */
export const SEND_RECALLED = 'ERECALLED';

interface Session {
  connection: SMTPConnection;
  /** Messages handed to this session (sent or refused). */
  messages: number;
  /** Set once it is closed or closing: never handed out again, its slot is free. */
  done: boolean;
}

/**
 * The message data as SMTPConnection reads it after the server's 354: a stream, not the Buffer, since
 * whether it was read tells whether the data went out. The socket is corked from that read until the
 * next turn of the event loop, so the data and the `.` line SMTPConnection writes after it leave in one
 * write (two otherwise: each write to a local server costs a wake-up on both sides).
 */
function messageData(connection: SMTPConnection, raw: Buffer): Readable {
  return new Readable({
    read() {
      const socket = connection._socket;
      if (socket && !socket.destroyed && !socket.writableCorked) {
        socket.cork();
        setImmediate(() => socket.uncork());
      }
      this.push(raw);
      this.push(null);
    },
  });
}

/** Code the pool's own refusal carries once it is closed. */
const POOL_CLOSED = 'ECONNECTION';

function recalledError(): SmtpSendError {
  return Object.assign(new Error('recalled while waiting for an SMTP session'), { code: SEND_RECALLED, recalled: true });
}

/** Errors of a session as a whole (nodemailer's isTransientError): another session may well succeed. */
function isTransient(err: SmtpSendError): boolean {
  return err.responseCode === 421 || err.code === 'ECONNECTION' || err.code === 'ESOCKET' || err.code === 'ETIMEDOUT';
}

/**
 * A pool of SMTP sessions over nodemailer's SMTPConnection (its SMTP client: EHLO, STARTTLS, AUTH,
 * PIPELINING, dot-stuffing). The message goes in already built, one Buffer, so its data leaves in one
 * socket write, behind the envelope's one pipelined write.
 *
 * Why not nodemailer's own pool (`createTransport({ pool: true })`): its `sendMail` with a prebuilt
 * `raw` message still costs ~120–190 µs of CPU per email more than this (a MailMessage, a MimeNode, a
 * PassThrough and a stream pipeline with its AbortController per message), more than channel-email's
 * whole budget (issue 20). What it does beyond that is kept here: a session is reused until
 * `maxMessages`, a refused message leaves its session usable after RSET, a session the server closed
 * while idle is dropped, and a message that failed on a reused session before a byte of its data was
 * sent is tried again on another session.
 */
export class SmtpPool {
  private readonly idle: Session[] = [];
  /**
   * Sends waiting for a session: handed one that is free, or `undefined` = a free slot to open one in.
   * Small requests' sends first (`ahead`).
   */
  private readonly waiting = new WaitLine<(session: Session | undefined) => void>();
  /** Sessions open or opening. */
  private open = 0;
  private closed = false;
  private readonly maxMessages: number;

  constructor(private readonly options: SmtpPoolOptions) {
    this.maxMessages = options.maxMessages ?? 100;
  }

  /**
   * Sends one message; rejects with nodemailer's SMTP error (code, responseCode) plus `dataSent`. An
   * aborted `signal` recalls the send while it waits for a session (code SEND_RECALLED); once it has its
   * session the signal no longer matters. An `ahead` send (a small request's) waits for a session ahead
   * of the others.
   */
  async send(envelope: { from: string; to: string[] }, raw: Buffer, signal?: AbortSignal, ahead = false): Promise<SmtpSendInfo> {
    for (let attempt = 1; ; attempt++) {
      let session: Session;
      try {
        session = await this.acquire(signal, ahead);
      } catch (caught) {
        // No session: nothing of this message reached a server.
        (caught as SmtpSendError).dataSent = false;
        throw caught;
      }
      const reused = session.messages > 0;
      const data = messageData(session.connection, raw);
      try {
        const info = await this.sendOn(session, envelope, data);
        this.release(session);
        return info;
      } catch (caught) {
        const err = caught as SmtpSendError;
        err.dataSent = data.readableDidRead;
        if (reused && !err.dataSent && isTransient(err) && attempt <= this.options.maxConnections && !this.closed) {
          // The server ended the session while it sat idle (its timeout, a restart): nothing was sent.
          // Each such try drops a stale session, and a new session is no longer a reused one, so this
          // ends by the time every idle session has been tried.
          this.discard(session);
          continue;
        }
        if ((err.code === 'EENVELOPE' || err.code === 'EMESSAGE') && err.responseCode !== 421 && !session.done) {
          // The server refused this message; the session itself is fine once reset.
          session.connection.reset((resetErr) => (resetErr ? this.discard(session) : this.release(session)));
        } else {
          this.discard(session);
        }
        throw err;
      }
    }
  }

  /** Ends every idle session with QUIT, the busy ones once their message is done; later sends are refused. */
  close(): void {
    this.closed = true;
    for (const session of this.idle.splice(0)) this.discard(session, true);
    for (const waiter of this.waiting.takeAll()) waiter(undefined);
  }

  private sendOn(session: Session, envelope: { from: string; to: string[] }, data: Readable): Promise<SmtpSendInfo> {
    session.messages++;
    // SMTPConnection keeps the transaction's state (refusals, the MAIL FROM error) on the envelope
    // object it is given: each attempt gets its own, or a retry would inherit the failed one's error.
    const fresh = { from: envelope.from, to: [...envelope.to] };
    return new Promise((resolve, reject) => session.connection.send(fresh, data, (err, info) => (err ? reject(err) : resolve(info))));
  }

  private acquire(signal: AbortSignal | undefined, ahead: boolean): Promise<Session> {
    if (this.closed) return Promise.reject(Object.assign(new Error('the SMTP pool is closed'), { code: POOL_CLOSED }));
    const session = this.idle.pop();
    if (session) return Promise.resolve(session);
    if (this.open < this.options.maxConnections) {
      this.open++;
      return this.connect();
    }
    if (signal?.aborted) return Promise.reject(recalledError());
    return new Promise((resolve, reject) => {
      // Handed a session, or (undefined) a slot already counted in `open`, or told the pool closed.
      const waiter = (handed: Session | undefined) => {
        signal?.removeEventListener('abort', onAbort);
        if (handed) resolve(handed);
        else if (this.closed) reject(Object.assign(new Error('the SMTP pool is closed'), { code: POOL_CLOSED }));
        else {
          // A slot freed by a session that just failed: let that failure reach the provider's breaker
          // first (its promise chain runs before setImmediate), which may recall this send.
          setImmediate(() => {
            if (signal?.aborted) {
              this.freeSlot();
              reject(recalledError());
            } else this.connect().then(resolve, reject);
          });
        }
      };
      // Recalled while waiting (the provider failed meanwhile): it leaves the queue, unsent.
      const onAbort = () => {
        this.waiting.remove(waiter);
        reject(recalledError());
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter, ahead);
    });
  }

  /** Opens a session in a slot already counted in `open`; the slot is freed again if it fails. */
  private connect(): Promise<Session> {
    return new Promise((resolve, reject) => {
      const connection = new SMTPConnection(this.options.connection);
      const session: Session = { connection, messages: 0, done: false };
      let settled = false;
      const fail = (err: Error) => {
        // Settled first: discarding closes the connection, whose 'end' comes back here with a vaguer error.
        if (!settled) {
          settled = true;
          reject(err);
        }
        this.discard(session);
      };
      // After the session is up, an error outside a send (the socket timeout of an idle session, a
      // reset) only ends it; one during a send also reaches that send's callback.
      connection.on('error', fail);
      connection.once('end', () => fail(Object.assign(new Error('Connection closed unexpectedly'), { code: 'ECONNECTION' })));
      connection.connect((err?: Error | null) => {
        if (err) return fail(err);
        const ready = () => {
          if (settled) return;
          settled = true;
          resolve(session);
        };
        if (!this.options.auth) return ready();
        connection.login(this.options.auth, (loginErr) => (loginErr ? fail(loginErr) : ready()));
      });
    });
  }

  /** Hands a session that finished a message to the next send, or keeps it idle. */
  private release(session: Session): void {
    if (session.done) return;
    if (this.closed || session.messages >= this.maxMessages) return this.discard(session, true);
    const next = this.waiting.shift();
    if (next) next(session);
    else this.idle.push(session);
  }

  /** Ends a session (QUIT when `polite`, else closes the socket) and frees its slot for a waiting send; once. */
  private discard(session: Session, polite = false): void {
    if (session.done) return;
    session.done = true;
    const at = this.idle.indexOf(session);
    if (at >= 0) this.idle.splice(at, 1);
    if (polite && !session.connection.destroyed) {
      // Its slot is free once the session is over (the server's answer to QUIT, or the socket timeout),
      // so the server never sees more than maxConnections sessions of this pool at once.
      session.connection.once('end', () => this.freeSlot());
      session.connection.quit();
    } else {
      session.connection.close();
      this.freeSlot();
    }
  }

  private freeSlot(): void {
    this.open--;
    if (this.closed) return;
    const next = this.waiting.shift();
    if (next) {
      this.open++;
      next(undefined);
    }
  }
}
