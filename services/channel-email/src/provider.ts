import { Socket } from 'node:net';
import nodemailer from 'nodemailer';
import type SMTPPool from 'nodemailer/lib/smtp-pool';
import { PermanentSendError, RetryableSendError, type ChannelProvider, type SinkOutbox } from '@rrs/sender-kit';
import { DEFAULT_SMTP_MAX_CONNECTIONS } from './config';
import type { EmailMessage } from './message';

/** One email provider (SMTP, Postmark, the sink): a channel provider of rendered messages that holds a connection pool. */
export interface EmailProvider extends ChannelProvider<EmailMessage> {
  close(): void;
}

/** Error codes of nodemailer's SMTP transport that mean "could not talk to the server": try again later. */
const TRANSIENT_CODES = new Set(['ECONNECTION', 'ETIMEDOUT', 'ESOCKET', 'EDNS', 'EPROTOCOL', 'ECONNRESET', 'ECONNREFUSED']);
/** Of those, the ones that can cut a session after DATA went out, before the 250: the server may have the message. */
const MID_SESSION_CODES = new Set(['ETIMEDOUT', 'ESOCKET', 'EPROTOCOL', 'ECONNRESET']);

/**
 * Sorts an SMTP failure: a 4xx reply or a connection problem is retryable; a 5xx reply is permanent
 * (the server refused this message or recipient); an authentication failure is retryable, since it is
 * our configuration, not the recipient, that is wrong.
 */
export function classifySmtpError(err: unknown): RetryableSendError | PermanentSendError {
  const failure = err as { responseCode?: number; code?: string; message?: string };
  if (failure.code === 'EAUTH') return new RetryableSendError('smtp_auth_failed', `SMTP authentication failed: ${failure.message}`, { cause: err });
  if (typeof failure.responseCode === 'number') {
    if (failure.responseCode >= 500) return new PermanentSendError(failure.code === 'EENVELOPE' ? 'recipient_rejected' : 'provider_rejected', `SMTP ${failure.responseCode}: ${failure.message}`, { cause: err });
    return new RetryableSendError('provider_unavailable', `SMTP ${failure.responseCode}: ${failure.message}`, { cause: err });
  }
  if (failure.code && TRANSIENT_CODES.has(failure.code)) return new RetryableSendError('provider_unreachable', `SMTP ${failure.code}: ${failure.message}`, { cause: err, maybeDelivered: MID_SESSION_CODES.has(failure.code) });
  return new RetryableSendError('provider_error', `SMTP: ${failure.message ?? String(err)}`, { cause: err, maybeDelivered: true });
}

export function smtpProvider(options: { smtpUrl: string; from: string; timeoutMs: number; maxConnections?: number }): EmailProvider {
  const url = new URL(options.smtpUrl);
  const secure = url.protocol === 'smtps:';
  const transport = nodemailer.createTransport({
    host: url.hostname,
    port: url.port ? Number(url.port) : url.protocol === 'smtps:' ? 465 : 587,
    secure,
    auth: url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined,
    pool: true,
    maxConnections: options.maxConnections ?? DEFAULT_SMTP_MAX_CONNECTIONS,
    connectionTimeout: options.timeoutMs,
    greetingTimeout: options.timeoutMs,
    socketTimeout: options.timeoutMs,
    // Self-signed certificates are allowed only when the URL says so (`?tls_reject_unauthorized=false`).
    // noDelay: see below (nodemailer hands the TLS options to tls.connect, which passes it to the socket).
    tls: { rejectUnauthorized: url.searchParams.get('tls_reject_unauthorized') !== 'false', ...(secure ? { noDelay: true } : {}) },
    // Nagle's algorithm off: an SMTP client writes a command and waits for the reply, so with Nagle on,
    // a command written behind an unacknowledged segment waited for the server's delayed ACK (40 ms
    // on Linux) — a local server took ~100 emails/s over 5 connections, ~900/s with this. nodemailer
    // opens a plain connection on a socket handed in (and upgrades it with STARTTLS as usual).
    ...(secure ? {} : { getSocket: (_options: unknown, callback: (err: Error | null, socketOptions?: { socket: Socket }) => void) => callback(null, { socket: new Socket().setNoDelay(true) }) }),
  } as SMTPPool.Options);
  return {
    name: 'smtp',
    async send(message) {
      try {
        const info = await transport.sendMail({
          from: options.from,
          to: message.to,
          subject: message.subject,
          text: message.text,
          html: message.html,
          messageId: message.messageId,
          headers: message.headers,
        });
        return { providerMessageId: info.messageId ?? message.messageId };
      } catch (err) {
        throw classifySmtpError(err);
      }
    },
    close: () => transport.close(),
  };
}

/** The all-in-one provider: the message goes to the dev inbox. */
export function sinkEmailProvider(outbox: SinkOutbox): EmailProvider {
  return {
    name: 'sink',
    async send(message, ctx) {
      outbox.record({ channel: 'EMAIL', stepId: ctx.idempotencyKey, to: message.to, subject: message.subject, text: message.text, link: message.link });
      return { providerMessageId: message.messageId };
    },
    close: () => undefined,
  };
}
