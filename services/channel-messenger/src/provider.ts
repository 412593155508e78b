import { PermanentSendError, providerFetch, providerJson, RetryableSendError, type SinkOutbox } from '@rrs/sender-kit';
import { counter } from '@rrs/runtime';
import type { MessengerAccount } from './config';

const checkAccounts = counter({ name: 'messenger_check_account_total', help: 'checkAccount look-ups by messenger and result (asked the gateway, or cached).', labelNames: ['channel', 'result'] });

export type MessengerSendAnswer = { kind: 'sent'; providerMessageId: string } | { kind: 'not_registered' };

export interface MessengerProvider {
  readonly name: string;
  /**
   * Sends `text` to the account registered on `phone` (E.164), if there is one. `resumed`: an earlier call
   * for this step may have reached the gateway (SendContext.resumed), so look for it before sending.
   */
  send(request: { stepId: string; phone: string; text: string; link: string; resumed?: boolean }): Promise<MessengerSendAnswer>;
}

/** An entry of `showMessagesQueue` (the MAX docs name the id `messageID`, the Telegram ones `idMessage`). */
interface QueuedMessage {
  messageID?: string;
  idMessage?: string;
  body?: { chatId?: string; message?: string };
}

/** An entry of `lastOutgoingMessages`. */
interface OutgoingMessage {
  idMessage?: string;
  chatId?: string;
  textMessage?: string;
  extendedTextMessage?: { text?: string };
}

/**
 * `checkAccount` answers per phone number, reused for `ttlMs` (a number without an account for a tenth of
 * it: it may join the messenger), at most `maxEntries` (oldest dropped first). Concurrent look-ups of one
 * number share one call. GREEN-API restricts accounts that check numbers too often, and a number's
 * account rarely changes, so every step to a known number skips the call.
 */
export class AccountLookupCache {
  private readonly entries = new Map<string, { exist: boolean; chatId: string; until: number }>();
  private readonly inFlight = new Map<string, Promise<{ exist: boolean; chatId: string }>>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 100_000,
    private readonly now: () => number = Date.now,
  ) {}

  async get(phone: string, lookup: () => Promise<{ exist: boolean; chatId: string }>): Promise<{ exist: boolean; chatId: string; cached: boolean }> {
    const hit = this.entries.get(phone);
    if (hit && hit.until > this.now()) return { exist: hit.exist, chatId: hit.chatId, cached: true };
    let pending = this.inFlight.get(phone);
    if (!pending) {
      pending = lookup().finally(() => this.inFlight.delete(phone));
      this.inFlight.set(phone, pending);
    }
    const answer = await pending;
    if (this.ttlMs > 0) {
      this.entries.delete(phone);
      this.entries.set(phone, { ...answer, until: this.now() + (answer.exist ? this.ttlMs : Math.floor(this.ttlMs / 10)) });
      if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    }
    return { ...answer, cached: false };
  }
}

/** How far back a resumed send looks in the account's outgoing journal: the method's default, one day. */
const JOURNAL_MINUTES = 1440;

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
 *
 * sendMessage takes no client message id and does not deduplicate. A resumed send therefore looks for
 * its message first, by chat and exact text (the text carries the recipient's personal link): in the
 * account's send queue (`GET showMessagesQueue`, messages accepted but not yet sent) and in its outgoing
 * journal (`GET lastOutgoingMessages?minutes=1440`), and sends only if neither has it.
 */
export function greenApiProvider(name: string, account: MessengerAccount, limiter: { acquire(chat: string): Promise<void> }, accounts = new AccountLookupCache(account.accountCacheMs ?? 0)): MessengerProvider {
  const base = account.apiUrl.replace(/\/$/, '');
  const call = async <T>(method: string, body?: unknown, query = ''): Promise<T> => {
    const res = await providerFetch(`${base}/waInstance${account.idInstance}/${method}/${account.apiToken}${query}`, body === undefined
      ? { method: 'GET' }
      : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }, { provider: name, timeoutMs: account.timeoutMs });
    if (!res.ok) return failure(res, `${name} ${method}`);
    return providerJson<T>(res, name);
  };

  /** The id of a message with this text to this chat the account already has (queued or sent), if any. */
  const alreadyTaken = async (chatId: string, text: string): Promise<string | null> => {
    try {
      const queue = await call<QueuedMessage[]>('showMessagesQueue');
      if (!Array.isArray(queue)) throw new RetryableSendError('provider_bad_response', `${name} showMessagesQueue: not a list`);
      const queued = queue.find((q) => q.body?.chatId === chatId && q.body?.message === text);
      if (queued) return queued.messageID ?? queued.idMessage ?? '';
      const journal = await call<OutgoingMessage[]>('lastOutgoingMessages', undefined, `?minutes=${JOURNAL_MINUTES}`);
      if (!Array.isArray(journal)) throw new RetryableSendError('provider_bad_response', `${name} lastOutgoingMessages: not a list`);
      const sent = journal.find((m) => m.chatId === chatId && (m.textMessage === text || m.extendedTextMessage?.text === text));
      return sent ? sent.idMessage ?? '' : null;
    } catch (err) {
      // Still unknown whether the gateway has it: the next try must look again.
      const reason = err instanceof RetryableSendError || err instanceof PermanentSendError ? err.reason : 'provider_error';
      throw new RetryableSendError(reason, `${name}: looking for an earlier send failed: ${(err as Error).message}`, { cause: err, maybeDelivered: true, retryAfterMs: (err as RetryableSendError).retryAfterMs });
    }
  };

  return {
    name,
    async send(req) {
      const digits = req.phone.replace(/^\+/, '');
      const check = await accounts.get(digits, async () => {
        const answer = await call<{ exist?: boolean; chatId?: string }>('checkAccount', { phoneNumber: Number(digits) });
        return { exist: answer.exist === true, chatId: answer.chatId || `${digits}@c.us` };
      });
      checkAccounts.inc({ channel: name, result: check.cached ? 'cached' : 'asked' });
      if (!check.exist) return { kind: 'not_registered' };
      const chatId = check.chatId;
      if (req.resumed) {
        const earlier = await alreadyTaken(chatId, req.text);
        if (earlier !== null) return { kind: 'sent', providerMessageId: earlier };
      }
      await limiter.acquire(chatId);
      const sent = await call<{ idMessage?: string }>('sendMessage', { chatId, message: req.text });
      if (!sent.idMessage) throw new RetryableSendError('provider_bad_response', `${name} sendMessage: answer without idMessage`, { maybeDelivered: true });
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
