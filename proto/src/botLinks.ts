/*
 * The official messenger bots' deep links (docs/channels.md "Official bots"): the rules the scheduler
 * (which issues link codes), the gateway (which shows them) and channel-messenger (which reads them from
 * the bots' webhooks) all follow.
 */

/** Channels with an official bot a customer can link. */
export const BOT_CHANNELS = ['MAX', 'TELEGRAM'] as const;
export type BotChannel = (typeof BOT_CHANNELS)[number];

/**
 * A link code: 128 random bits in base64url, 22 characters. Telegram takes a `start` parameter of up to
 * 64 of `A-Za-z0-9_-` (core.telegram.org/bots/features#deep-linking), MAX up to 128 characters
 * (dev.max.ru/help/deeplinks): this fits both and says nothing about the person.
 */
export const BOT_LINK_CODE = /^[A-Za-z0-9_-]{22}$/;

/** How long a code can be claimed after the thank-you page showed it. */
export const BOT_LINK_LIFETIME_MS = 7 * 24 * 3_600_000;

/** The bot's deep link carrying a code: `https://t.me/<bot>?start=<code>`, `https://max.ru/<bot>?start=<code>`. */
export function botDeepLink(botLink: string, code: string): string {
  return `${botLink.replace(/\/+$/, '')}?start=${encodeURIComponent(code)}`;
}

/** The commands that unlink a chat (the person's opt-out), as the bots receive them. */
export const BOT_STOP_COMMANDS: ReadonlySet<string> = new Set(['/stop', 'stop', 'стоп', '/unsubscribe']);
