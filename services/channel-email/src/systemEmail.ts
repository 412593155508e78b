import { busV1, isOneOf, SYSTEM_EMAIL_DURABLE, SYSTEM_EMAIL_KINDS, SYSTEM_EMAIL_SUBJECT, systemEmailBusV1, systemEmailMsgId } from '@rrs/proto';
import type { Bus, BusMessage, Logger, Subscription } from '@rrs/runtime';
import {
  alertWordsOf, digestText, escapeHtml, PermanentSendError, ratingAlertSubject, ratingAlertText, ratingLines, RetryableSendError, StepOutcome, type AlertedRatingText, type ProviderChain, type SendLog,
} from '@rrs/sender-kit';
import type { EmailMessage } from './message';

/*
 * System emails (docs/channels.md, "System emails"): the service's own emails — an invitation to the
 * console, a password reset link, a rating alert, a daily digest (to the organization's people), a
 * member's reply to a customer — as opposed to a cascade's steps. They
 * arrive on `steps.system.email` (SystemEmail), go out through the same providers as the steps (the dev
 * inbox in `npm start`) and share the send log, keyed `system-email:<id>`: an email whose outcome is
 * recorded is never sent again, however often the bus delivers it. No step result is reported: no
 * cascade waits for these.
 */

const WORDS = {
  en: {
    invitation: {
      subject: (org: string) => `You are invited to ${org} on Reviews`,
      body: (org: string, role: string) => `You are invited to join ${org} in the review console as ${role}. Open the link to set your name and password:`,
      button: 'Accept the invitation',
    },
    password_reset: {
      subject: () => 'Reset your password',
      body: (org: string) => `Someone asked to reset the password of your ${org} console account. Open the link to set a new one:`,
      button: 'Set a new password',
    },
    expires: (when: string) => `The link works once, until ${when}. If you did not expect this email, ignore it.`,
  },
  ru: {
    invitation: {
      subject: (org: string) => `Приглашение в ${org}`,
      body: (org: string, role: string) => `Вас пригласили в консоль отзывов ${org} с ролью ${role}. Откройте ссылку, чтобы задать имя и пароль:`,
      button: 'Принять приглашение',
    },
    password_reset: {
      subject: () => 'Сброс пароля',
      body: (org: string) => `Кто-то попросил сбросить пароль вашей учётной записи консоли ${org}. Откройте ссылку, чтобы задать новый:`,
      button: 'Задать новый пароль',
    },
    expires: (when: string) => `Ссылка действует один раз, до ${when}. Если вы не ждали это письмо, не обращайте на него внимания.`,
  },
} as const;


function domainOf(from: string): string {
  const match = /@([^>\s]+)>?\s*$/.exec(from);
  return match ? match[1] : 'localhost';
}

/** The email of one SystemEmail, in the organization's language (Russian for `ru…`, else English). */
export function renderSystemEmail(email: systemEmailBusV1.SystemEmail, from: string): EmailMessage {
  if (!isOneOf(SYSTEM_EMAIL_KINDS, email.kind)) throw new PermanentSendError('unknown_system_email', `unknown system email kind ${email.kind}`);
  if (email.kind === 'rating_alert' || email.kind === 'rating_digest') return renderAlertEmail(email, from);
  if (email.kind === 'customer_reply') return renderCustomerReply(email, from);
  const ru = email.locale.toLowerCase().startsWith('ru');
  const words = ru ? WORDS.ru : WORDS.en;
  const kind = words[email.kind];
  const org = email.organizationName || (ru ? 'организации' : 'your organization');
  const subject = kind.subject(org).replace(/[\r\n]+/g, ' ');
  const intro = kind.body(org, email.role);
  const expires = email.expiresAt ? words.expires(email.expiresAt.toISOString().replace('T', ' ').slice(0, 16) + ' UTC') : '';
  const text = `${intro}\n\n${email.link}\n\n${expires}\n`;
  const html = `<!doctype html>
<html lang="${ru ? 'ru' : 'en'}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escapeHtml(subject)}</title></head>
<body style="margin:0;padding:24px;background:#f4f4f5;font-family:Arial,Helvetica,sans-serif;color:#18181b">
<div style="max-width:560px;margin:0 auto;background:#ffffff;border-radius:8px;padding:32px;font-size:16px;line-height:1.5">
<p style="margin:0 0 16px">${escapeHtml(intro)}</p>
<p style="margin:24px 0"><a href="${escapeHtml(email.link)}" style="display:inline-block;background:#2563eb;color:#ffffff;text-decoration:none;padding:12px 24px;border-radius:6px">${escapeHtml(kind.button)}</a></p>
<p style="margin:0 0 16px;word-break:break-all"><a href="${escapeHtml(email.link)}">${escapeHtml(email.link)}</a></p>
<p style="margin:0;font-size:13px;color:#71717a">${escapeHtml(expires)}</p>
</div></body></html>
`;
  return { to: email.to, subject, text, html, messageId: `<${systemEmailMsgId(email.id)}@${domainOf(from)}>`, headers: {}, link: email.link };
}

/** The card every system email is laid out in: paragraphs of escaped text, an optional button. */
function layout(options: { lang: string; subject: string; paragraphs: string[]; button?: { text: string; link: string }; footer: string }): string {
  const paragraphs = options.paragraphs.map((text) => `<p style="margin:0 0 16px;white-space:pre-line">${escapeHtml(text)}</p>`).join('\n');
  const button = options.button
    ? `<p style="margin:24px 0"><a href="${escapeHtml(options.button.link)}" style="display:inline-block;background:#2563eb;color:#ffffff;text-decoration:none;padding:12px 24px;border-radius:6px">${escapeHtml(options.button.text)}</a></p>\n`
    : '';
  return `<!doctype html>
<html lang="${options.lang}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${escapeHtml(options.subject)}</title></head>
<body style="margin:0;padding:24px;background:#f4f4f5;font-family:Arial,Helvetica,sans-serif;color:#18181b">
<div style="max-width:560px;margin:0 auto;background:#ffffff;border-radius:8px;padding:32px;font-size:16px;line-height:1.5">
${paragraphs}
${button}<p style="margin:0;font-size:13px;color:#71717a">${escapeHtml(options.footer)}</p>
</div></body></html>
`;
}

const alertedOf = (rating: systemEmailBusV1.AlertedRating): AlertedRatingText => ({
  rating: rating.rating, feedback: rating.feedback, customerName: rating.customerName, locationName: rating.locationName, ratedAt: rating.ratedAt, link: rating.link,
});

/**
 * A rating alert or a daily digest, to a member of the organization (never to the customer): the same
 * words as the staff chats get (sender-kit `alertText.ts`), with a button to the inbox.
 */
function renderAlertEmail(email: systemEmailBusV1.SystemEmail, from: string): EmailMessage {
  const words = alertWordsOf(email.locale);
  const lang = email.locale.toLowerCase().startsWith('ru') ? 'ru' : 'en';
  const options = { locale: email.locale, timeZone: email.timeZone, organizationName: email.organizationName };
  const ratings = email.ratings.map(alertedOf);
  let subject: string;
  let text: string;
  let paragraphs: string[];
  if (email.kind === 'rating_alert') {
    if (!ratings[0]) throw new PermanentSendError('unknown_system_email', 'a rating alert without its rating');
    subject = ratingAlertSubject(ratings[0], email.locale, email.organizationName);
    text = ratingAlertText(ratings[0], options);
    paragraphs = [words.alertIntro(email.organizationName), ratingLines(ratings[0], email.locale, email.timeZone).join('\n')];
  } else {
    const totals = email.digest ?? { day: '', ratings: 0, average: 0, actionable: 0, open: 0, overdue: 0 };
    subject = words.digestSubject(email.organizationName, totals.day).replace(/[\r\n]+/g, ' ');
    text = digestText(totals, ratings, { ...options, link: email.link });
    paragraphs = [words.digestIntro(email.organizationName, totals.day), words.digestTotals(totals), ...(ratings.length === 0 ? [words.digestNone] : ratings.map((r) => ratingLines(r, email.locale, email.timeZone).join('\n')))];
  }
  const html = layout({ lang, subject, paragraphs, button: { text: email.kind === 'rating_alert' ? words.open : words.openInbox, link: email.link }, footer: words.why(email.organizationName) });
  return { to: email.to, subject, text: `${text}\n\n${words.why(email.organizationName)}\n`, html, messageId: `<${systemEmailMsgId(email.id)}@${domainOf(from)}>`, headers: {}, link: email.link };
}

const REPLY_FOOTER = {
  en: (org: string) => `This is a reply from ${org} to the feedback you left. Answer this email to write back.`,
  ru: (org: string) => `Это ответ ${org} на ваш отзыв. Чтобы ответить, просто ответьте на это письмо.`,
};

/** A member's reply to a customer: their words, with the organization's Reply-To so the answer reaches the business. */
function renderCustomerReply(email: systemEmailBusV1.SystemEmail, from: string): EmailMessage {
  const lang = email.locale.toLowerCase().startsWith('ru') ? 'ru' : 'en';
  const footer = REPLY_FOOTER[lang](email.organizationName || (lang === 'ru' ? 'компании' : 'the business'));
  const subject = email.subject.replace(/[\r\n]+/g, ' ');
  const html = layout({ lang, subject, paragraphs: email.text.split(/\n{2,}/), footer });
  const headers: Record<string, string> = EMAIL.test(email.replyTo) ? { 'Reply-To': email.replyTo } : {};
  return { to: email.to, subject, text: `${email.text}\n\n${footer}\n`, html, messageId: `<${systemEmailMsgId(email.id)}@${domainOf(from)}>`, headers, link: '' };
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;
const RETRY_DELAY_MS = 5_000;

/** Reads `steps.system.email` and sends each email through the chain, at most once per id (the send log). */
export async function startSystemEmails(options: { bus: Bus; sendLog: SendLog; chain: ProviderChain<EmailMessage>; from: string; logger: Logger; ackWaitMs?: number }): Promise<Subscription> {
  const ackWaitMs = options.ackWaitMs ?? 60_000;
  const handle = async (msg: BusMessage) => {
    let email: systemEmailBusV1.SystemEmail;
    try {
      email = systemEmailBusV1.SystemEmail.decode(msg.data);
    } catch (err) {
      options.logger.error({ err }, 'undecodable system email dropped');
      msg.term('undecodable');
      return;
    }
    const key = systemEmailMsgId(email.id);
    // The send log's row of this email: its claim, lease and outcome, as for a step.
    const entry = busV1.StepDue.fromPartial({ stepId: key, attemptId: email.id, channel: 'EMAIL', organizationId: email.organizationId });
    const claim = await options.sendLog.claim(entry, ackWaitMs);
    if (claim.kind === 'done') return msg.ack();
    if (claim.kind === 'busy') return msg.nak(claim.retryInMs);
    try {
      const message = renderSystemEmail(email, options.from);
      if (!EMAIL.test(message.to)) throw new PermanentSendError('missing_contact', 'the system email has no valid address');
      const sent = await options.chain.send(message, { idempotencyKey: key, resumed: claim.resumed, maybeWith: claim.maybeWith });
      await options.sendLog.complete(key, { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId: sent.providerMessageId, provider: sent.provider });
      options.logger.info({ kind: email.kind, id: email.id, provider: sent.provider }, 'system email sent');
      msg.ack();
    } catch (err) {
      if (err instanceof PermanentSendError) {
        await options.sendLog.complete(key, { outcome: StepOutcome.STEP_OUTCOME_FAILED, reason: err.reason });
        options.logger.warn({ err, kind: email.kind, id: email.id }, 'system email failed');
        msg.term(err.reason);
        return;
      }
      const retryable = err instanceof RetryableSendError ? err : undefined;
      await options.sendLog.release(key, { maybeDelivered: retryable ? retryable.maybeDelivered : true, provider: retryable?.provider });
      options.logger.warn({ err, kind: email.kind, id: email.id, delivery: msg.deliveryCount }, 'system email not sent; retrying');
      msg.nak(retryable?.retryAfterMs ?? RETRY_DELAY_MS);
    }
  };
  return options.bus.consume({ stream: 'STEPS', durable: SYSTEM_EMAIL_DURABLE, filterSubject: SYSTEM_EMAIL_SUBJECT, concurrency: 4, ackWaitMs }, handle);
}
