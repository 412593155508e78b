import { PermanentSendError, providerFetch, providerJson, RetryableSendError, type SinkOutbox } from '@rrs/sender-kit';
import type { MessengerAccount } from './config';

export type MessengerSendAnswer = { kind: 'sent'; providerMessageId: string } | { kind: 'not_registered' };

export interface MessengerProvider {
  readonly name: string;
  /** Sends `text` to the account registered on `phone` (E.164), if there is one. */
  send(request: { stepId: string; phone: string; text: string; link: string }): Promise<MessengerSendAnswer>;
}

/** Sorts a non-2xx answer of the gateway (429 and 5xx are already sorted by providerFetch). */
async function failure(res: Response, what: string): Promise<never> {
  const body = (await res.text()).slice(0, 300);
  if (res.status === 401 || res.status === 403) throw new RetryableSendError('provider_auth_failed', `${what}: HTTP ${res.status} ${body}`, { retryAfterMs: 60_000 });
  // 466: the account's quota for the period is used up.
  if (res.status === 466) throw new RetryableSendError('provider_quota_exceeded', `${what}: HTTP 466 ${body}`, { retryAfterMs: 300_000 });
  if (res.status === 400) throw new PermanentSendError('provider_rejected', `${what}: HTTP 400 ${body}`);
  throw new RetryableSendError('provider_error', `${what}: HTTP ${res.status} ${body}`);
}

/**
 * An HTTP messenger gateway of the GREEN-API shape (the same for MAX and Telegram accounts):
 * `POST {apiUrl}/waInstance{id}/checkAccount/{token}` `{phoneNumber}` → `{exist, chatId}`, then
 * `POST {apiUrl}/waInstance{id}/sendMessage/{token}` `{chatId, message}` → `{idMessage}`.
 */
export function greenApiProvider(name: string, account: MessengerAccount, limiter: { acquire(chat: string): Promise<void> }): MessengerProvider {
  const base = account.apiUrl.replace(/\/$/, '');
  const call = async <T>(method: string, body: unknown): Promise<T> => {
    const res = await providerFetch(`${base}/waInstance${account.idInstance}/${method}/${account.apiToken}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }, { provider: name, timeoutMs: account.timeoutMs });
    if (!res.ok) return failure(res, `${name} ${method}`);
    return providerJson<T>(res, name);
  };
  return {
    name,
    async send(req) {
      const digits = req.phone.replace(/^\+/, '');
      const check = await call<{ exist?: boolean; chatId?: string }>('checkAccount', { phoneNumber: Number(digits) });
      if (check.exist !== true) return { kind: 'not_registered' };
      const chatId = check.chatId || `${digits}@c.us`;
      await limiter.acquire(chatId);
      const sent = await call<{ idMessage?: string }>('sendMessage', { chatId, message: req.text });
      if (!sent.idMessage) throw new RetryableSendError('provider_bad_response', `${name} sendMessage: answer without idMessage`);
      return { kind: 'sent', providerMessageId: sent.idMessage };
    },
  };
}

/** The all-in-one provider: every number is "registered"; the message goes to the dev inbox. */
export function sinkMessengerProvider(channel: string, outbox: SinkOutbox): MessengerProvider {
  return {
    name: 'sink',
    async send(req) {
      outbox.record({ channel, stepId: req.stepId, to: req.phone, subject: '', text: req.text, link: req.link });
      return { kind: 'sent', providerMessageId: `sink-${req.stepId}` };
    },
  };
}
