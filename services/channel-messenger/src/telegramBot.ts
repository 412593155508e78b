import { BOT_STOP_COMMANDS } from '@rrs/proto';
import { PermanentSendError, providerFetch, providerJson, RetryableSendError } from '@rrs/sender-kit';
import { isStopCommand, startPayload, type BotClient, type BotEvent } from './bots';
import type { BotAccount } from './config';

/** Telegram's answer envelope (core.telegram.org/bots/api#making-requests). */
interface TelegramAnswer<T> {
  ok?: boolean;
  result?: T;
  error_code?: number;
  description?: string;
  parameters?: { retry_after?: number };
}

/** `parameters.retry_after` (seconds) of a 429, as milliseconds. */
export function telegramRetryAfter(body: string): number | undefined {
  try {
    const seconds = (JSON.parse(body) as TelegramAnswer<unknown>).parameters?.retry_after;
    return typeof seconds === 'number' && seconds >= 0 ? seconds * 1_000 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * 403 is Telegram's answer for a chat the bot may no longer write to ("Forbidden: bot was blocked by the
 * user", "…: user is deactivated"); 400 "chat not found" is a chat id that never started the bot or is
 * gone. Either way the chat is lost: the link ends.
 */
function chatGone(status: number, description: string): boolean {
  return status === 403 || (status === 400 && /chat not found|user not found/i.test(description));
}

/**
 * An update of the Telegram Bot API (core.telegram.org/bots/api#update) as a BotEvent: a private
 * `message` `/start <payload>` (a deep link, core.telegram.org/bots/features#deep-linking) or a stop
 * command, or `my_chat_member` whose new status is `kicked` (the person blocked the bot).
 */
export function parseTelegramUpdate(update: unknown): BotEvent {
  const body = (update ?? {}) as {
    message?: { chat?: { id?: number | string; type?: string }; text?: string };
    my_chat_member?: { chat?: { id?: number | string; type?: string }; new_chat_member?: { status?: string } };
  };
  const member = body.my_chat_member;
  if (member?.chat?.type === 'private' && member.chat.id !== undefined && member.new_chat_member?.status === 'kicked') {
    return { kind: 'stop', chatId: String(member.chat.id), silent: true };
  }
  const message = body.message;
  if (message?.chat?.type !== 'private' || message.chat.id === undefined || typeof message.text !== 'string') return { kind: 'ignored' };
  const chatId = String(message.chat.id);
  const payload = startPayload(message.text);
  if (payload !== null) return { kind: 'start', chatId, payload };
  if (isStopCommand(message.text, BOT_STOP_COMMANDS)) return { kind: 'stop', chatId, silent: false };
  return { kind: 'ignored' };
}

/**
 * The Telegram Bot API (core.telegram.org/bots/api): `POST {apiUrl}/bot<token>/sendMessage` `{chat_id,
 * text}` → `{ok, result: Message}`; `setWebhook` `{url, secret_token, allowed_updates}`. Rate limits
 * answer 429 with `parameters.retry_after`; 401 is a wrong token (retryable: the operator fixes it).
 */
export function telegramBot(account: BotAccount, limiter: { acquire(chat: string): Promise<void> }): BotClient {
  const base = `${account.apiUrl.replace(/\/$/, '')}/bot${account.token}`;
  const call = async <T>(method: string, body: unknown): Promise<{ status: number; answer: TelegramAnswer<T> }> => {
    const res = await providerFetch(`${base}/${method}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }, { provider: 'telegram_bot', timeoutMs: account.timeoutMs, retryAfterFromBody: telegramRetryAfter });
    return { status: res.status, answer: await providerJson<TelegramAnswer<T>>(res, 'telegram_bot') };
  };
  return {
    channel: 'TELEGRAM',
    provider: 'telegram_bot',
    link: `https://t.me/${account.name}`,
    secretHeader: 'x-telegram-bot-api-secret-token',
    async send(chatId, text) {
      await limiter.acquire(chatId);
      const { status, answer } = await call<{ message_id?: number }>('sendMessage', { chat_id: chatId, text });
      if (answer.ok === true && answer.result?.message_id !== undefined) return { kind: 'sent', messageId: String(answer.result.message_id) };
      const description = answer.description ?? `HTTP ${status}`;
      if (chatGone(status, description)) return { kind: 'gone', detail: description };
      if (status === 401) throw new RetryableSendError('provider_auth_failed', `telegram_bot sendMessage: ${description}`, { retryAfterMs: 60_000 });
      if (status === 400) throw new PermanentSendError('provider_rejected', `telegram_bot sendMessage: ${description}`);
      throw new RetryableSendError('provider_error', `telegram_bot sendMessage: ${description}`, { maybeDelivered: status === 200 });
    },
    async registerWebhook(url, secret) {
      const { answer } = await call<boolean>('setWebhook', { url, secret_token: secret, allowed_updates: ['message', 'my_chat_member'] });
      if (answer.ok !== true) throw new Error(`telegram setWebhook: ${answer.description ?? 'refused'}`);
    },
    parseUpdate: parseTelegramUpdate,
  };
}
