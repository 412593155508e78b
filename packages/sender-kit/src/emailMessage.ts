import type { busV1 } from '@rrs/proto';
import { escapeHtml, fillTemplate } from './template';

/** A rendered review-request email, ready for any provider. */
export interface EmailMessage {
  to: string;
  subject: string;
  text: string;
  html: string;
  /** `<step id@sender domain>`: the same step always gets the same Message-ID. */
  messageId: string;
  headers: Record<string, string>;
  link: string;
}

/**
 * Our own words around the organization's template, in the organization's locale (the step's `locale`;
 * any locale other than Russian gets English). The defaults serve a step that arrives without a template.
 */
const CHROME = {
  en: {
    subject: 'How was your visit to {{location}}?',
    body: 'Hello {{name}}, thank you for visiting {{location}}. Please rate your visit: {{link}}',
    leaveReview: 'Leave a review:',
    button: 'Rate your visit',
    whyThisEmail: (location: string) => (location ? `You got this email after a visit to ${location}.` : 'You got this email after a visit to us.'),
    unsubscribe: 'Unsubscribe',
  },
  ru: {
    subject: 'Как прошёл ваш визит в {{location}}?',
    body: 'Здравствуйте, {{name}}! Спасибо, что выбрали {{location}}. Пожалуйста, оцените визит: {{link}}',
    leaveReview: 'Оставить отзыв:',
    button: 'Оценить визит',
    whyThisEmail: (location: string) => (location ? `Вы получили это письмо после визита в ${location}.` : 'Вы получили это письмо после визита к нам.'),
    unsubscribe: 'Отписаться',
  },
} as const;

function emailChrome(locale: string): (typeof CHROME)['en' | 'ru'] {
  return locale.toLowerCase().startsWith('ru') ? CHROME.ru : CHROME.en;
}

function domainOf(from: string): string {
  const match = /@([^>\s]+)>?\s*$/.exec(from);
  return match ? match[1] : 'localhost';
}

/**
 * Subject and text from the organization's template, in our own layout: an HTML part and a text part,
 * both with the personal link and the unsubscribe link; RFC 8058 one-click unsubscribe headers.
 */
export function renderEmail(step: busV1.StepDue, from: string): EmailMessage {
  const chrome = emailChrome(step.locale);
  const subject = fillTemplate(step.template?.subject || chrome.subject, step).replace(/[\r\n]+/g, ' ').trim();
  const body = fillTemplate(step.template?.body || chrome.body, step).trim();
  const link = step.reviewUrl;
  const unsubscribe = step.unsubscribeUrl;
  const location = step.location?.name ?? '';

  const textParts = [body];
  if (!body.includes(link)) textParts.push(`${chrome.leaveReview} ${link}`);
  if (unsubscribe) textParts.push(`--\n${chrome.whyThisEmail(location)} ${chrome.unsubscribe}: ${unsubscribe}`);
  const text = textParts.join('\n\n') + '\n';

  // The link in the template text becomes a real anchor; every other character is escaped.
  const paragraphs = body
    .split(/\n{2,}/)
    .map((paragraph) => `<p style="margin:0 0 16px">${escapeHtml(paragraph).split(escapeHtml(link)).join(`<a href="${escapeHtml(link)}">${escapeHtml(link)}</a>`).replace(/\n/g, '<br>')}</p>`)
    .join('\n');
  const html = `<!doctype html>
<html lang="${step.locale.toLowerCase().startsWith('ru') ? 'ru' : 'en'}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escapeHtml(subject)}</title></head>
<body style="margin:0;padding:0;background:#f4f4f5;font-family:Arial,Helvetica,sans-serif;color:#18181b">
<table role="presentation" width="100%" cellpadding="0" cellspacing="0"><tr><td align="center" style="padding:24px">
<table role="presentation" width="560" cellpadding="0" cellspacing="0" style="max-width:560px;background:#ffffff;border-radius:8px;padding:32px">
<tr><td style="font-size:13px;color:#71717a;padding-bottom:16px">${escapeHtml(location)}</td></tr>
<tr><td style="font-size:16px;line-height:1.5">
${paragraphs}
<p style="margin:24px 0"><a href="${escapeHtml(link)}" style="display:inline-block;background:#2563eb;color:#ffffff;text-decoration:none;padding:12px 24px;border-radius:6px">${escapeHtml(chrome.button)}</a></p>
</td></tr>
${unsubscribe ? `<tr><td style="font-size:12px;color:#71717a;padding-top:24px;border-top:1px solid #e4e4e7">${escapeHtml(chrome.whyThisEmail(location))} <a href="${escapeHtml(unsubscribe)}" style="color:#71717a">${escapeHtml(chrome.unsubscribe)}</a></td></tr>` : ''}
</table></td></tr></table></body></html>
`;
  const headers: Record<string, string> = {};
  if (unsubscribe) {
    headers['List-Unsubscribe'] = `<${unsubscribe}>`;
    headers['List-Unsubscribe-Post'] = 'List-Unsubscribe=One-Click';
  }
  return { to: step.recipient?.email ?? '', subject, text, html, messageId: `<${step.stepId}@${domainOf(from)}>`, headers, link };
}
