import { randomBytes } from 'node:crypto';
import express, { Router } from 'express';
import { BOT_LINK_CODE, type BotChannel } from '@rrs/proto';
import { parseMaxUpdate, parseTelegramUpdate, sinkBot, type BotClient } from '@rrs/channel-messenger';
import { escapeHtml, type SinkOutbox } from '@rrs/sender-kit';

/** The chat the stand-in bots talk to: one person, the developer at the browser. */
export const DEV_BOT_CHAT_ID = 4242;

const SLUGS: Record<string, BotChannel> = { telegram: 'TELEGRAM', max: 'MAX' };
const NAMES: Record<BotChannel, string> = { TELEGRAM: 'Telegram', MAX: 'MAX' };

export interface DevBots {
  bots: Record<BotChannel, { bot: BotClient; webhookSecret: string }>;
}

/**
 * The all-in-one's stand-ins for the official bots (never in production): what they send goes to the
 * dev inbox (to `bot:4242`), and their deep links lead to a page of this process (/dev/bots/<channel>)
 * that plays the messenger: its Start and Stop buttons post to the bots' webhook endpoint exactly the
 * update the platform would, with the secret.
 */
export function devBots(publicBaseUrl: string, outbox: SinkOutbox): DevBots {
  const make = (channel: BotChannel, parse: (update: unknown) => ReturnType<BotClient['parseUpdate']>) => ({
    bot: sinkBot(channel, `${publicBaseUrl}/dev/bots/${channel.toLowerCase()}`, outbox, parse),
    webhookSecret: randomBytes(24).toString('base64url'),
  });
  return { bots: { MAX: make('MAX', parseMaxUpdate), TELEGRAM: make('TELEGRAM', parseTelegramUpdate) } };
}

/** The update each platform sends for Start through a deep link, and for the person's `/stop`. */
function updateOf(channel: BotChannel, action: 'start' | 'stop', code: string): unknown {
  const now = Date.now();
  if (channel === 'MAX') {
    return action === 'start'
      ? { update_type: 'bot_started', timestamp: now, chat_id: DEV_BOT_CHAT_ID, user: { user_id: DEV_BOT_CHAT_ID, first_name: 'Dev', is_bot: false }, payload: code }
      : { update_type: 'message_created', timestamp: now, message: { sender: { user_id: DEV_BOT_CHAT_ID }, recipient: { chat_id: DEV_BOT_CHAT_ID, chat_type: 'dialog' }, body: { mid: `mid.dev${now}`, text: '/stop' } } };
  }
  const text = action === 'start' ? `/start ${code}` : '/stop';
  return { update_id: now, message: { message_id: now, date: Math.floor(now / 1000), chat: { id: DEV_BOT_CHAT_ID, type: 'private' }, from: { id: DEV_BOT_CHAT_ID, is_bot: false, first_name: 'Dev' }, text } };
}

/**
 * `GET /dev/bots/<telegram|max>?start=<code>`: the stand-in chat, with Start (the deep link's update) and
 * Stop; `POST /dev/bots/<channel>/<start|stop>` delivers the update to the webhook endpoint on
 * `webhookPort` and shows the dev inbox.
 */
export function devBotsRouter(options: { bots: DevBots['bots']; webhookPort: () => number | undefined }): Router {
  const router = Router();
  const form = express.urlencoded({ extended: false, limit: '4kb', parameterLimit: 4 });
  router.get('/dev/bots/:channel', (req, res) => {
    const channel = SLUGS[String(req.params.channel)];
    if (!channel) return void res.status(404).type('text/plain').send('not found');
    const code = typeof req.query.start === 'string' && BOT_LINK_CODE.test(req.query.start) ? req.query.start : '';
    res.setHeader('Cache-Control', 'no-store');
    res.type('text/html; charset=utf-8').send(`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${NAMES[channel]} bot (dev)</title></head>
<body style="font:16px system-ui;max-width:30rem;margin:2rem auto;padding:0 1rem"><h1>${NAMES[channel]} bot — development stand-in</h1>
<p>In production this link opens the official ${NAMES[channel]} bot. Here the buttons send its webhook the update ${NAMES[channel]} would send for chat ${DEV_BOT_CHAT_ID}; what the bot sends shows in the <a href="/dev/inbox">dev inbox</a>.</p>
<form method="post" action="/dev/bots/${channel.toLowerCase()}/start"><input type="hidden" name="code" value="${escapeHtml(code)}"><button type="submit"${code ? '' : ' disabled'}>Start</button></form>
<form method="post" action="/dev/bots/${channel.toLowerCase()}/stop"><button type="submit">Send /stop</button></form></body></html>`);
  });
  router.post('/dev/bots/:channel/:action', form, async (req, res) => {
    const channel = SLUGS[String(req.params.channel)];
    const action = req.params.action === 'start' || req.params.action === 'stop' ? req.params.action : undefined;
    const port = options.webhookPort();
    if (!channel || !action || port === undefined) return void res.status(404).type('text/plain').send('not found');
    const code = typeof req.body?.code === 'string' ? req.body.code : '';
    const { bot, webhookSecret } = options.bots[channel];
    const delivered = await fetch(`http://127.0.0.1:${port}/bots/${channel.toLowerCase()}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [bot.secretHeader]: webhookSecret },
      body: JSON.stringify(updateOf(channel, action, code)),
    });
    await delivered.body?.cancel();
    if (!delivered.ok) return void res.status(502).type('text/plain').send(`the bot webhook answered ${delivered.status}`);
    res.redirect(303, '/dev/inbox');
  });
  return router;
}
