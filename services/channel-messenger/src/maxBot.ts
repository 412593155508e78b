import { BOT_STOP_COMMANDS } from '@rrs/proto';
import { PermanentSendError, providerFetch, providerJson, RetryableSendError } from '@rrs/sender-kit';
import { isStopCommand, startPayload, type BotClient, type BotEvent } from './bots';
import type { BotAccount } from './config';

/** The update types the bot subscribes to (dev.max.ru/docs-api/objects/Update). */
export const MAX_UPDATE_TYPES = ['bot_started', 'bot_stopped', 'message_created'] as const;

/**
 * A MAX Bot API update (dev.max.ru/docs-api/objects/Update) as a BotEvent. `bot_started` carries the deep
 * link's `payload` (`https://max.ru/<bot>?start=<payload>`, dev.max.ru/help/deeplinks) and the `user`;
 * `bot_stopped` is the person stopping the bot; a `message_created` in a dialog may be `/start <payload>`
 * or a stop command. The bot writes to the person by `user_id`.
 */
export function parseMaxUpdate(update: unknown): BotEvent {
  const body = (update ?? {}) as {
    update_type?: string;
    user?: { user_id?: number | string };
    payload?: string | null;
    message?: { sender?: { user_id?: number | string }; recipient?: { chat_type?: string }; body?: { text?: string | null } };
  };
  switch (body.update_type) {
    case 'bot_started':
      return body.user?.user_id === undefined ? { kind: 'ignored' } : { kind: 'start', chatId: String(body.user.user_id), payload: typeof body.payload === 'string' ? body.payload : '' };
    case 'bot_stopped':
      return body.user?.user_id === undefined ? { kind: 'ignored' } : { kind: 'stop', chatId: String(body.user.user_id), silent: true };
    case 'message_created': {
      const message = body.message;
      const text = message?.body?.text;
      if (message?.recipient?.chat_type !== 'dialog' || message.sender?.user_id === undefined || typeof text !== 'string') return { kind: 'ignored' };
      const chatId = String(message.sender.user_id);
      const payload = startPayload(text);
      if (payload !== null) return { kind: 'start', chatId, payload };
      return isStopCommand(text, BOT_STOP_COMMANDS) ? { kind: 'stop', chatId, silent: false } : { kind: 'ignored' };
    }
    default:
      return { kind: 'ignored' };
  }
}

/**
 * The MAX Bot API (dev.max.ru/docs-api): the token in the `Authorization` header; `POST
 * {apiUrl}/messages?user_id=<id>` `{text}` → `{message: {body: {mid}}}`; `POST {apiUrl}/subscriptions`
 * `{url, update_types, secret}` → `{success}`. Errors answer `{code, message}`: 401 a wrong token; 403 and
 * 404 the dialog is not available (the person stopped the bot, or never started it): the link ends.
 */
export function maxBot(account: BotAccount, limiter: { acquire(chat: string): Promise<void> }): BotClient {
  const base = account.apiUrl.replace(/\/$/, '');
  const call = (path: string, body: unknown) =>
    providerFetch(`${base}${path}`, { method: 'POST', headers: { authorization: account.token, 'content-type': 'application/json' }, body: JSON.stringify(body) }, { provider: 'max_bot', timeoutMs: account.timeoutMs });
  return {
    channel: 'MAX',
    provider: 'max_bot',
    link: `https://max.ru/${account.name}`,
    secretHeader: 'x-max-bot-api-secret',
    async send(chatId, text) {
      await limiter.acquire(chatId);
      const res = await call(`/messages?user_id=${encodeURIComponent(chatId)}`, { text });
      if (res.ok) {
        const answer = await providerJson<{ message?: { body?: { mid?: string } } }>(res, 'max_bot');
        const mid = answer.message?.body?.mid;
        if (!mid) throw new RetryableSendError('provider_bad_response', 'max_bot messages: answer without message.body.mid', { maybeDelivered: true });
        return { kind: 'sent', messageId: mid };
      }
      const detail = `HTTP ${res.status} ${(await res.text()).slice(0, 300)}`;
      if (res.status === 403 || res.status === 404) return { kind: 'gone', detail };
      if (res.status === 401) throw new RetryableSendError('provider_auth_failed', `max_bot messages: ${detail}`, { retryAfterMs: 60_000 });
      if (res.status === 400) throw new PermanentSendError('provider_rejected', `max_bot messages: ${detail}`);
      throw new RetryableSendError('provider_error', `max_bot messages: ${detail}`);
    },
    async registerWebhook(url, secret) {
      const res = await call('/subscriptions', { url, update_types: MAX_UPDATE_TYPES, secret });
      const answer = res.ok ? await providerJson<{ success?: boolean; message?: string }>(res, 'max_bot') : { success: false, message: `HTTP ${res.status}` };
      if (answer.success !== true) throw new Error(`max POST /subscriptions: ${answer.message ?? 'refused'}`);
    },
    parseUpdate: parseMaxUpdate,
  };
}
