import { Router } from 'express';
import type { SinkMessage, SinkOutbox } from './sink';
import { escapeHtml } from './template';


function toJson(message: SinkMessage) {
  return { channel: message.channel, stepId: message.stepId, to: message.to, subject: message.subject || null, text: message.text, link: message.link, sentAt: message.sentAt.toISOString() };
}

function page(messages: SinkMessage[]): string {
  const rows = messages
    .map((message) => `<tr><td>${escapeHtml(message.sentAt.toISOString())}</td><td>${escapeHtml(message.channel)}</td><td>${escapeHtml(message.to)}</td><td>${message.subject ? `<b>${escapeHtml(message.subject)}</b><br>` : ''}<pre>${escapeHtml(message.text)}</pre></td><td>${message.link ? `<a href="${escapeHtml(message.link)}">${escapeHtml(message.link)}</a>` : ''}</td></tr>`)
    .join('\n');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Dev inbox</title><meta http-equiv="refresh" content="5">
<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;width:100%}td,th{border:1px solid #ddd;padding:6px;vertical-align:top;text-align:left}pre{white-space:pre-wrap;margin:0;font:inherit}</style>
</head><body><h1>Dev inbox</h1><p>Every message the sink providers "sent" in this all-in-one process, newest first (${messages.length}). JSON: <a href="/dev/messages">/dev/messages</a>.</p>
<table><thead><tr><th>Time</th><th>Channel</th><th>Recipient</th><th>Text</th><th>Link</th></tr></thead><tbody>
${rows || '<tr><td colspan="5">No messages yet.</td></tr>'}
</tbody></table></body></html>`;
}

/**
 * The dev inbox of the all-in-one mode: `GET /dev/messages` (JSON, newest first; `?to=` filters by
 * recipient) and `GET /dev/inbox` (HTML). Never mounted in the distributed deployment.
 */
export function devInboxRouter(outbox: SinkOutbox): Router {
  const router = Router();
  const select = (to: unknown) => [...outbox.list()].reverse().filter((message) => typeof to !== 'string' || message.to === to);
  router.get('/dev/messages', (req, res) => {
    res.set('cache-control', 'no-store').json({ messages: select(req.query.to).map(toJson) });
  });
  router.get('/dev/inbox', (req, res) => {
    res.set('cache-control', 'no-store').type('html').send(page(select(req.query.to)));
  });
  return router;
}
