import { PermanentSendError, ProviderRecalledError, RetryableSendError, type ChannelProvider, type SinkOutbox } from '@rrs/sender-kit';
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
/** Of those, the ones that can cut a session after DATA went out, before the 250 (an error not from SmtpPool, without `dataSent`). */
const MID_SESSION_CODES = new Set(['ETIMEDOUT', 'ESOCKET', 'EPROTOCOL', 'ECONNRESET']);

/**
 * Sorts an SMTP failure by the phase it happened in (docs/channels.md, "What a failure means, per
 * provider"). Only a session lost after the server accepted DATA and the message data went out
 * (`dataSent`, set by SmtpPool) without the server's reply may have delivered it ("maybe delivered");
 * everything before — no connection, no greeting, TLS, AUTH, the envelope refused — is "not sent":
 *
 * - RCPT TO refused: about that recipient, never the server's fault. 5xx ends the step
 *   (`recipient_rejected`); 4xx (greylisting, a full mailbox: 450/451/452) is retried later for that
 *   recipient (`recipient_deferred`, recipient level: no failover, no breaker), and fails with that reason
 *   if it outlasts every try.
 * - MAIL FROM refused with 5xx, or AUTH refused: our sender or credentials are wrong
 *   (`provider_request_refused`, `provider_auth_failed`): a provider fault that fails over and alerts.
 * - The message refused after its data (5xx to the end of data): permanent `provider_rejected`.
 * - Any other reply (421, a 4xx, a 5xx greeting): a provider fault, not sent.
 */
export function classifySmtpError(err: unknown): RetryableSendError | PermanentSendError {
  const failure = err as { responseCode?: number; code?: string; message?: string; dataSent?: boolean; command?: string; recalled?: boolean };
  if (failure.recalled) return new ProviderRecalledError('smtp');
  if (failure.code === 'EAUTH') return new RetryableSendError('provider_auth_failed', `SMTP authentication failed: ${failure.message}`, { cause: err, retryAfterMs: 60_000 });
  if (typeof failure.responseCode === 'number') {
    const code = failure.responseCode;
    const text = `SMTP ${code}${failure.command ? ` to ${failure.command}` : ''}: ${failure.message}`;
    if (failure.command === 'RCPT TO') {
      if (code >= 500) return new PermanentSendError('recipient_rejected', text, { cause: err });
      // Retried with the sender's backoff (1 s doubling to 60 s: about 4 minutes over SENDER_MAX_DELIVER 10).
      return new RetryableSendError('recipient_deferred', text, { cause: err, recipientLevel: true });
    }
    if (failure.command === 'MAIL FROM' && code >= 500) return new RetryableSendError('provider_request_refused', text, { cause: err, retryAfterMs: 60_000 });
    if (code >= 500 && failure.command === 'DATA') return new PermanentSendError('provider_rejected', text, { cause: err });
    return new RetryableSendError('provider_unavailable', text, { cause: err });
  }
  // No reply: only a session lost after the data went out may have delivered the message.
  const sure = typeof failure.dataSent === 'boolean';
  if (failure.code && TRANSIENT_CODES.has(failure.code)) {
    const maybeDelivered = sure ? failure.dataSent === true : MID_SESSION_CODES.has(failure.code);
    return new RetryableSendError(failure.code === 'ETIMEDOUT' ? 'provider_timeout' : 'provider_unreachable', `SMTP ${failure.code}: ${failure.message}`, { cause: err, maybeDelivered });
  }
  return new RetryableSendError('provider_error', `SMTP: ${failure.message ?? String(err)}`, { cause: err, maybeDelivered: sure ? failure.dataSent === true : true });
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
    async send(message, ctx) {
      const { envelope, raw } = composer.compose(message);
      // Signed as built, before the pool: what the server gets is exactly what was signed.
      const data = sign ? await sign(raw) : raw;
      try {
        await pool.send(envelope, data, ctx.signal, ctx.ahead === true);
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
