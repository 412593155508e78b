import type { BotChannel } from '@rrs/proto';
import type { SinkOutbox } from '@rrs/sender-kit';

/** What a bot's webhook update means to us; anything else is ignored. */
export type BotEvent =
  /** The person pressed Start through a deep link (`payload` is its `start` parameter; '' without one). */
  | { kind: 'start'; chatId: string; payload: string }
  /** The person asked to stop (`/stop`), or blocked / stopped the bot (`silent`: nothing can be sent back). */
  | { kind: 'stop'; chatId: string; silent: boolean }
  | { kind: 'ignored' };

/** A send through a bot: taken, or the chat is gone (the person blocked or stopped the bot). */
export type BotSendAnswer = { kind: 'sent'; messageId: string } | { kind: 'gone'; detail: string };

/** One official bot (MAX Bot API, Telegram Bot API), as the sender and the webhook use it. */
export interface BotClient {
  readonly channel: BotChannel;
  /** Recorded on the step as its provider: `telegram_bot`, `max_bot` (`sink_bot` in the all-in-one). */
  readonly provider: string;
  /** The deep-link base the thank-you page offers: `https://t.me/<name>`, `https://max.ru/<name>`. */
  readonly link: string;
  /** Header carrying the webhook secret the bot's platform sends with every update. */
  readonly secretHeader: string;
  /** Throws RetryableSendError / PermanentSendError as every adapter does. */
  send(chatId: string, text: string): Promise<BotSendAnswer>;
  /** Points the platform's webhook at `url` with `secret` (setWebhook / POST /subscriptions). */
  registerWebhook(url: string, secret: string): Promise<void>;
  parseUpdate(update: unknown): BotEvent;
}

/** The webhook path of a channel's bot on the bots port: `/bots/telegram`, `/bots/max`. */
export function botWebhookPath(channel: BotChannel): string {
  return `/bots/${channel.toLowerCase()}`;
}

/** The commands that unlink: `/stop` (also `stop`, `стоп`, `/unsubscribe`), case-insensitive. */
export function isStopCommand(text: string, stopCommands: ReadonlySet<string>): boolean {
  return stopCommands.has(text.trim().toLowerCase().replace(/@\w+$/, ''));
}

/** `/start <payload>` (Telegram's deep link arrives as this message; MAX clients may send it as text). */
export function startPayload(text: string): string | null {
  const match = /^\/start(?:@\w+)?(?:\s+(\S+))?\s*$/.exec(text.trim());
  return match ? (match[1] ?? '') : null;
}

/**
 * The all-in-one's bot: messages go to the dev inbox (to `bot:<chat id>`); `link` is where its deep
 * links lead (the all-in-one's stand-in page, /dev/bots/<channel>); updates are read by the channel's
 * own parser, so the webhook sees what the platform would send.
 */
export function sinkBot(channel: BotChannel, link: string, outbox: SinkOutbox, parseUpdate: (update: unknown) => BotEvent): BotClient {
  let sent = 0;
  return {
    channel,
    provider: 'sink_bot',
    link,
    secretHeader: channel === 'MAX' ? 'x-max-bot-api-secret' : 'x-telegram-bot-api-secret-token',
    async send(chatId, text) {
      outbox.record({ channel, stepId: '', to: `bot:${chatId}`, subject: '', text, link: '' });
      sent += 1;
      return { kind: 'sent', messageId: `sink-bot-${sent}` };
    },
    async registerWebhook() {},
    parseUpdate,
  };
}
