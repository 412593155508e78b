import { busV1, SYSTEM_EMAIL_DURABLE, SYSTEM_EMAIL_SUBJECT, systemEmailBusV1, systemEmailMsgId, type SystemEmailKind } from '@rrs/proto';
import type { Bus, BusMessage, Logger, Subscription } from '@rrs/runtime';
import { escapeHtml, PermanentSendError, RetryableSendError, StepOutcome, type ProviderChain, type SendLog } from '@rrs/sender-kit';
import type { EmailMessage } from './message';

/*
 * System emails (docs/channels.md, "System emails"): the service's own emails to the organization's
 * people — an invitation to the console, a password reset link — as opposed to a cascade's steps. They
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

const isKind = (kind: string): kind is SystemEmailKind => kind === 'invitation' || kind === 'password_reset';

function domainOf(from: string): string {
  const match = /@([^>\s]+)>?\s*$/.exec(from);
  return match ? match[1] : 'localhost';
}

/** The email of one SystemEmail, in the organization's language (Russian for `ru…`, else English). */
export function renderSystemEmail(email: systemEmailBusV1.SystemEmail, from: string): EmailMessage {
  if (!isKind(email.kind)) throw new PermanentSendError('unknown_system_email', `unknown system email kind ${email.kind}`);
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
