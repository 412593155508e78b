import { PermanentSendError, RetryableSendError, type ChannelProvider, type SinkOutbox } from '@rrs/sender-kit';
import { DEFAULT_SMTP_MAX_CONNECTIONS } from './config';
import type { DkimSigner } from './dkim';
import type { EmailMessage } from './message';
import { EmailComposer } from './mime';
import { SmtpPool } from './smtpPool';

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
 * our configuration, not the recipient, that is wrong. A connection lost after the message data went
 * out (`dataSent`, set by SmtpPool) may have delivered it, whatever its code.
 */
export function classifySmtpError(err: unknown): RetryableSendError | PermanentSendError {
  const failure = err as { responseCode?: number; code?: string; message?: string; dataSent?: boolean };
  if (failure.code === 'EAUTH') return new RetryableSendError('smtp_auth_failed', `SMTP authentication failed: ${failure.message}`, { cause: err });
  if (typeof failure.responseCode === 'number') {
    if (failure.responseCode >= 500) return new PermanentSendError(failure.code === 'EENVELOPE' ? 'recipient_rejected' : 'provider_rejected', `SMTP ${failure.responseCode}: ${failure.message}`, { cause: err });
    return new RetryableSendError('provider_unavailable', `SMTP ${failure.responseCode}: ${failure.message}`, { cause: err });
  }
  if (failure.code && TRANSIENT_CODES.has(failure.code)) return new RetryableSendError('provider_unreachable', `SMTP ${failure.code}: ${failure.message}`, { cause: err, maybeDelivered: MID_SESSION_CODES.has(failure.code) || failure.dataSent === true });
  return new RetryableSendError('provider_error', `SMTP: ${failure.message ?? String(err)}`, { cause: err, maybeDelivered: true });
}

export function smtpProvider(options: { smtpUrl: string; from: string; timeoutMs: number; maxConnections?: number; sign?: DkimSigner }): EmailProvider {
  const url = new URL(options.smtpUrl);
  const secure = url.protocol === 'smtps:';
  const composer = new EmailComposer(options.from);
  const sign = options.sign;
  // nodemailer's SMTPConnection turns Nagle's algorithm off on every socket, plain or TLS: a command
  // written behind an unacknowledged segment would wait for the server's delayed ACK (40 ms on Linux).
  const pool = new SmtpPool({
    connection: {
      host: url.hostname,
      port: url.port ? Number(url.port) : secure ? 465 : 587,
      secure,
      connectionTimeout: options.timeoutMs,
      greetingTimeout: options.timeoutMs,
      socketTimeout: options.timeoutMs,
      // Self-signed certificates are allowed only when the URL says so (`?tls_reject_unauthorized=false`).
      tls: { rejectUnauthorized: url.searchParams.get('tls_reject_unauthorized') !== 'false' },
      logger: false,
    },
    auth: url.username ? { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } : undefined,
    maxConnections: options.maxConnections ?? DEFAULT_SMTP_MAX_CONNECTIONS,
  });
  return {
    name: 'smtp',
    async send(message) {
      const { envelope, raw } = composer.compose(message);
      // Signed as built, before the pool: what the server gets is exactly what was signed.
      const data = sign ? await sign(raw) : raw;
      try {
        await pool.send(envelope, data);
        return { providerMessageId: message.messageId };
      } catch (err) {
        throw classifySmtpError(err);
      }
    },
    close: () => pool.close(),
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
