import { gauge } from '@rrs/runtime';
import { PermanentSendError, RetryableSendError, type ProviderCallContext } from '@rrs/sender-kit';
import { answerJson, ProviderHttp } from './http';
import type { SmsProvider, SmsSendRequest } from './provider';

export interface SmsRuOptions {
  /** `https://sms.ru` (docs: https://sms.ru/api/send). */
  baseUrl: string;
  apiId: string;
  /** Sender name approved at SMS.ru (`from`); empty = the account default. */
  sender?: string;
  /** `test=1`: SMS.ru checks the request and answers as for a real send, but sends and charges nothing. */
  test?: boolean;
  timeoutMs: number;
}

interface SmsRuNumber {
  status?: string;
  status_code?: number;
  sms_id?: string;
  status_text?: string;
}

interface SmsRuAnswer {
  status?: string;
  status_code?: number;
  status_text?: string;
  sms?: Record<string, SmsRuNumber>;
  balance?: number;
}

/**
 * The reason of a step SMS.ru refused because the number is on the account's stop list (code 209): the
 * person asked the business, or SMS.ru, to stop, so the step fails and the person enters the ledger.
 */
export const PROVIDER_STOP_LIST = 'recipient_opted_out';

type Sorted = { kind: 'permanent'; reason: string } | { kind: 'retryable'; reason: string; retryAfterMs?: number; maybeSent?: boolean; recipientLevel?: boolean };

/**
 * SMS.ru status codes of `sms/send` (request-level and per number, https://sms.ru/api/send and the code
 * list at https://sms.ru/api/status), sorted. Codes about our account (200, 201, 204, 206, 300–302) and
 * 220 "service temporarily unavailable" are provider faults: the chain moves the step on to the next
 * provider. Codes about the number or the text end the step.
 */
export function sortSmsRuCode(code: number, resumed: boolean): Sorted {
  switch (code) {
    case 200: case 300: case 301: case 302: return { kind: 'retryable', reason: 'provider_auth_failed', retryAfterMs: 60_000 };
    case 201: return { kind: 'retryable', reason: 'provider_account_balance', retryAfterMs: 60_000 };
    case 204: return { kind: 'retryable', reason: 'provider_auth_failed', retryAfterMs: 60_000 };
    case 206: return { kind: 'retryable', reason: 'provider_account_limit', retryAfterMs: 60_000 };
    case 220: return { kind: 'retryable', reason: 'provider_unavailable', retryAfterMs: 5_000 };
    case 202: return { kind: 'permanent', reason: 'invalid_phone' };
    case 207: return { kind: 'permanent', reason: 'undeliverable' };
    case 209: return { kind: 'permanent', reason: PROVIDER_STOP_LIST };
    // This number's own daily limit: never the provider's fault; fails with this reason if it outlasts every try.
    case 230: return { kind: 'retryable', reason: 'recipient_daily_limit', retryAfterMs: 3_600_000, recipientLevel: true };
    // The same text to the same number within a minute / a day: after a call that may have gone through,
    // that is our own message (sent); otherwise another step's identical message.
    case 231: return resumed ? { kind: 'retryable', reason: 'duplicate', maybeSent: true } : { kind: 'retryable', reason: 'provider_busy', retryAfterMs: 60_000 };
    case 232: return resumed ? { kind: 'retryable', reason: 'duplicate', maybeSent: true } : { kind: 'permanent', reason: 'provider_rejected' };
    default:
      if (code >= 203 && code <= 213) return { kind: 'permanent', reason: 'provider_rejected' };
      return { kind: 'retryable', reason: 'provider_error' };
  }
}

const balanceGauge = gauge({ name: 'sms_provider_balance', help: 'Account balance an SMS provider last reported (SMS.ru returns it with every send), in the account currency.', labelNames: ['provider'] });

/**
 * The SMS.ru HTTP API: `POST {base}/sms/send` form-encoded with `api_id`, `to` (digits), `msg`, `json=1`
 * (+ `from`, `test=1`). The answer has a request status, one status per number (with its `sms_id`) and the
 * balance left. SMS.ru takes no idempotency key and cannot be asked about a message by our id, so it has
 * no lookup: a call that may have reached it keeps the step with SMS.ru (ProviderChain), and a resumed send
 * reads its "identical message to this number within a minute/day" refusals (231/232) as the earlier send.
 */
export function smsRuProvider(options: SmsRuOptions): SmsProvider {
  const http = new ProviderHttp(options.baseUrl, { provider: 'smsru', timeoutMs: options.timeoutMs });
  return {
    name: 'smsru',
    async send(req: SmsSendRequest, ctx?: ProviderCallContext) {
      const resumed = ctx?.resumed ?? req.resumed ?? false;
      const to = req.phone.replace(/^\+/, '');
      const form = new URLSearchParams({ api_id: options.apiId, to, msg: req.text, json: '1' });
      if (options.sender) form.set('from', options.sender);
      if (options.test) form.set('test', '1');
      const res = await http.postForm('/sms/send', form);
      if (res.status < 200 || res.status >= 300) throw new RetryableSendError('provider_bad_response', `smsru: HTTP ${res.status}`, { maybeDelivered: true });
      const answer = answerJson<SmsRuAnswer>(res, 'smsru');
      if (typeof answer.balance === 'number') balanceGauge.set({ provider: 'smsru' }, answer.balance);
      const requestCode = Number(answer.status_code);
      if (answer.status !== 'OK' || requestCode !== 100) return fail(requestCode, answer.status_text, resumed, req);
      const number = answer.sms?.[to];
      if (!number) throw new RetryableSendError('provider_bad_response', `smsru: no status for ${to} in the answer`, { maybeDelivered: true });
      if (number.status === 'OK' && number.sms_id) return { providerMessageId: number.sms_id };
      return fail(Number(number.status_code), number.status_text, resumed, req);
    },
    close: () => http.close(),
  };
}

function fail(code: number, text: string | undefined, resumed: boolean, req: SmsSendRequest): { providerMessageId: string } {
  const sorted = sortSmsRuCode(code, resumed);
  const message = `smsru status ${code}: ${text ?? ''}`;
  if (sorted.kind === 'permanent') throw new PermanentSendError(sorted.reason, message);
  // Our earlier call went through: its sms_id is not known, so its receipts cannot be matched.
  if (sorted.maybeSent) return { providerMessageId: `smsru-unknown:${req.stepId}` };
  throw new RetryableSendError(sorted.reason, message, { retryAfterMs: sorted.retryAfterMs, recipientLevel: sorted.recipientLevel });
}
