import { PermanentSendError, providerFetch, providerJson, RetryableSendError, type SinkOutbox } from '@rrs/sender-kit';

export interface SmsSendRequest {
  stepId: string;
  /** E.164. */
  phone: string;
  text: string;
  link: string;
}

export interface SmsProvider {
  readonly name: string;
  /** Resolves with the provider's id of the message (what its delivery receipts refer to). */
  send(request: SmsSendRequest): Promise<{ providerMessageId: string }>;
}

export interface SmscOptions {
  /** e.g. `https://smsc.ru` (or the backup `https://www2.smsc.ru`). */
  baseUrl: string;
  login: string;
  password: string;
  /** Sender name registered at SMSC; empty = the account default. */
  sender?: string;
  timeoutMs: number;
}

interface SmscAnswer {
  id?: number | string;
  cnt?: number;
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
/** "The same request was already sent within a minute": SMSC has the message. */
const SMSC_DUPLICATE = 9;

/**
 * The SMSC.ru HTTP API (`POST /sys/send.php`, form-encoded, `fmt=3` for JSON answers). The message
 * `id` is the step id, so the delivery receipt names the step, and a repeat of the same request within
 * a minute (a send resumed after a crash) is refused by SMSC with error 9 instead of being sent again.
 */
export function smscProvider(options: SmscOptions): SmsProvider {
  const url = `${options.baseUrl.replace(/\/$/, '')}/sys/send.php`;
  return {
    name: 'smsc',
    async send(req) {
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
      const res = await providerFetch(url, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form }, { provider: 'smsc', timeoutMs: options.timeoutMs });
      if (!res.ok) {
        await res.body?.cancel();
        throw new RetryableSendError('provider_bad_response', `smsc: HTTP ${res.status}`);
      }
      const answer = await providerJson<SmscAnswer>(res, 'smsc');
      if (answer.error_code === undefined && answer.error === undefined) {
        if (answer.id === undefined) throw new RetryableSendError('provider_bad_response', 'smsc: answer without id or error');
        return { providerMessageId: String(answer.id) };
      }
      const code = Number(answer.error_code);
      if (code === SMSC_DUPLICATE) return { providerMessageId: req.stepId };
      const known = SMSC_ERRORS[code];
      const message = `smsc error ${code}: ${answer.error ?? ''}`;
      if (known?.kind === 'permanent') throw new PermanentSendError(known.reason, message);
      throw new RetryableSendError(known?.reason ?? 'provider_error', message, { retryAfterMs: known?.retryAfterMs });
    },
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
