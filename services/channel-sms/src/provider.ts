import { PermanentSendError, RetryableSendError, type ChannelProvider, type ProviderCallContext, type SinkOutbox } from '@rrs/sender-kit';
import { answerJson, ProviderHttp } from './http';

export interface SmsSendRequest {
  stepId: string;
  /** E.164. */
  phone: string;
  text: string;
  link: string;
  /** An earlier call for this step may have reached the provider (SendContext.resumed): look before sending. */
  resumed?: boolean;
}

/** One SMS provider; channel-sms puts its providers in a ProviderChain (SMS_PROVIDERS order). */
export interface SmsProvider extends ChannelProvider<SmsSendRequest> {
  /** Resolves with the provider's id of the message (what its delivery receipts refer to). */
  send(request: SmsSendRequest, ctx?: ProviderCallContext): Promise<{ providerMessageId: string }>;
  /** Closes its kept-alive connections (the service's stop). */
  close?(): Promise<void>;
}

export interface SmscOptions {
  /** e.g. `https://smsc.ru` (or the backup `https://www2.smsc.ru`). */
  baseUrl: string;
  login: string;
  password: string;
  /** Sender name registered at SMSC; empty = the account default. */
  sender?: string;
  timeoutMs: number;
  /**
   * Most requests out to SMSC at once from this process (`SMSC_MAX_CONNECTIONS`, default
   * SMSC_MAX_CONNECTIONS_DEFAULT); the others wait their turn within their timeout.
   */
  maxConnections?: number;
}

/**
 * SMSC refuses "fifteen and more requests at once from different connections under one login" with
 * error 9 (docs/channels.md): a replica keeps at most 14 out, and replicas of one login share 14 by
 * setting `SMSC_MAX_CONNECTIONS` to 14 / replicas.
 */
export const SMSC_MAX_CONNECTIONS_DEFAULT = 14;

interface SmscAnswer {
  id?: number | string;
  cnt?: number;
  error?: string;
  error_code?: number;
}

interface SmscStatusAnswer {
  status?: number | string;
  error?: string;
  error_code?: number;
}

/**
 * SMSC.ru error codes of `send.php` (fmt=3 answers `{"error": "...", "error_code": N}`), sorted.
 * Codes 2–4 are about our account, not the recipient, so they are retried (and dead-lettered if they last).
 */
const SMSC_ERRORS: Record<number, { kind: 'permanent' | 'retryable'; reason: string; retryAfterMs?: number }> = {
  1: { kind: 'permanent', reason: 'provider_rejected' },
  2: { kind: 'retryable', reason: 'provider_auth_failed', retryAfterMs: 60_000 },
  3: { kind: 'retryable', reason: 'provider_account_balance', retryAfterMs: 60_000 },
  4: { kind: 'retryable', reason: 'provider_ip_blocked', retryAfterMs: 60_000 },
  5: { kind: 'permanent', reason: 'provider_rejected' },
  6: { kind: 'permanent', reason: 'message_forbidden' },
  7: { kind: 'permanent', reason: 'invalid_phone' },
  8: { kind: 'permanent', reason: 'undeliverable' },
};
/**
 * Error 9 of send.php: the same request again within a minute, or 15 and more requests at once under one
 * login ("too many concurrent requests"). The two cannot be told apart by the code, so the status method
 * decides: SMSC has the message → it went out; it has not → SMSC was busy, try again.
 */
const SMSC_DUPLICATE_OR_BUSY = 9;
/** Status of status.php for a phone and id SMSC has no message for. */
const SMSC_STATUS_NOT_FOUND = -3;

/**
 * The SMSC.ru HTTP API (`POST /sys/send.php`, form-encoded, `fmt=3` for JSON answers). The message
 * `id` is the step id (SMSC takes up to 40 latin letters, digits, `.`, `_`, `-`: a UUID fits), so the
 * delivery receipt names the step, and SMSC can be asked whether it has the step's message.
 *
 * SMSC does not refuse a second message with the same `id` (its docs: "не обязательно уникален"); it
 * refuses only the same request within a minute (error 9). So a resumed send (the process died after
 * the call, or the call ended without an answer) first asks `status.php` for this phone and id, and sends
 * only if SMSC has no such message: that closes the window whatever the time since the first call.
 */
export function smscProvider(options: SmscOptions): SmsProvider {
  const http = new ProviderHttp(options.baseUrl, { provider: 'smsc', timeoutMs: options.timeoutMs, maxConnections: options.maxConnections ?? SMSC_MAX_CONNECTIONS_DEFAULT });

  /**
   * Whether SMSC has a message with this id for this phone; null when the gateway has no status method
   * (an unknown: never read as "sent" nor as "not sent").
   */
  const hasMessage = async (req: SmsSendRequest): Promise<boolean | null> => {
    const form = new URLSearchParams({ login: options.login, psw: options.password, phone: req.phone, id: req.stepId, fmt: '3', charset: 'utf-8' });
    const res = await http.postForm('/sys/status.php', form);
    // A compatible gateway without the status method: send as before (error 9 still refuses a repeat within a minute).
    if (res.status === 404) return null;
    if (res.status < 200 || res.status >= 300) throw new RetryableSendError('provider_bad_response', `smsc status: HTTP ${res.status}`, { maybeDelivered: true });
    const answer = answerJson<SmscStatusAnswer>(res, 'smsc');
    if (answer.error_code !== undefined || answer.error !== undefined) {
      throw new RetryableSendError('provider_status_unavailable', `smsc status error ${answer.error_code ?? ''}: ${answer.error ?? ''}`, { maybeDelivered: true });
    }
    if (answer.status === undefined || !Number.isFinite(Number(answer.status))) throw new RetryableSendError('provider_bad_response', 'smsc status: answer without status', { maybeDelivered: true });
    return Number(answer.status) !== SMSC_STATUS_NOT_FOUND;
  };

  return {
    name: 'smsc',
    async lookup(req) {
      const has = await hasMessage(req);
      if (has === null) return { found: 'unsupported' };
      return has ? { found: true, providerMessageId: req.stepId } : { found: false };
    },
    async send(req, ctx) {
      const resumed = ctx?.resumed ?? req.resumed ?? false;
      if (resumed && (await hasMessage(req)) === true) return { providerMessageId: req.stepId };
      const form = new URLSearchParams({
        login: options.login,
        psw: options.password,
        phones: req.phone,
        mes: req.text,
        id: req.stepId,
        fmt: '3',
        charset: 'utf-8',
      });
      if (options.sender) form.set('sender', options.sender);
      const res = await http.postForm('/sys/send.php', form, ctx?.signal, ctx?.ahead === true);
      if (res.status < 200 || res.status >= 300) throw new RetryableSendError('provider_bad_response', `smsc: HTTP ${res.status}`, { maybeDelivered: true });
      const answer = answerJson<SmscAnswer>(res, 'smsc');
      if (answer.error_code === undefined && answer.error === undefined) {
        if (answer.id === undefined) throw new RetryableSendError('provider_bad_response', 'smsc: answer without id or error');
        return { providerMessageId: String(answer.id) };
      }
      const code = Number(answer.error_code);
      if (code === SMSC_DUPLICATE_OR_BUSY) {
        const has = await hasMessage(req);
        // Sent only on SMSC's word that it has the message, never on a guess.
        if (has === true) return { providerMessageId: req.stepId };
        if (has === false) throw new RetryableSendError('provider_busy', `smsc error 9 without a message for this id: ${answer.error ?? ''}`, { retryAfterMs: 5_000 });
        // No status method (a compatible gateway): SMSC cannot say which error 9 this is.
        if (!resumed) {
          // "The same request within a minute" needs an earlier request for this step, and no earlier
          // call for it may have reached SMSC (not resumed): so it was "too many requests at once". Not sent.
          throw new RetryableSendError('provider_busy', `smsc error 9 (no status method; no earlier call for this step): ${answer.error ?? ''}`, { retryAfterMs: 5_000 });
        }
        // An earlier call may have been taken, within the minute, or SMSC was busy: the step stays in
        // doubt with SMSC (the chain pins it there, never another provider) and is sent again through
        // SMSC alone, as resumed. SMSC then accepts it (sent on its word) or refuses it again; past the
        // minute, a repeat of a message SMSC had taken is a second SMS (docs/channels.md), never a lost one.
        throw new RetryableSendError('provider_busy', `smsc error 9 on a resumed send and no status method to tell a repeat from a busy SMSC: ${answer.error ?? ''}`, { retryAfterMs: 20_000, maybeDelivered: true });
      }
      const known = SMSC_ERRORS[code];
      const message = `smsc error ${code}: ${answer.error ?? ''}`;
      if (known?.kind === 'permanent') throw new PermanentSendError(known.reason, message);
      throw new RetryableSendError(known?.reason ?? 'provider_error', message, { retryAfterMs: known?.retryAfterMs });
    },
    close: () => http.close(),
  };
}

/** The all-in-one provider: the SMS goes to the dev inbox. */
export function sinkSmsProvider(outbox: SinkOutbox): SmsProvider {
  return {
    name: 'sink',
    async send(req) {
      outbox.record({ channel: 'SMS', stepId: req.stepId, to: req.phone, subject: '', text: req.text, link: req.link });
      return { providerMessageId: req.stepId };
    },
  };
}
