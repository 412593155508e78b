import { collapseRepeats, type Logger, type Pool } from '@rrs/runtime';
import { providerFetch, providerJson, RetryableSendError, type StepResultPublisher } from '@rrs/sender-kit';
import type { SmscOptions } from './provider';
import { applyInboundSms, type SmsRecipients } from './replies';

/** One inbound message as SMSC's `get_answers` lists it (fmt=3). */
interface SmscAnswerEntry {
  id?: number | string;
  phone?: string;
  message?: string;
  to_phone?: string;
  sent?: string;
}

/** The first read, with no cursor yet, looks back this far (SMSC's `hour` parameter). */
const FIRST_READ_HOURS = 24;

const E164_DIGITS = /^[1-9]\d{6,14}$/;

/** An inbound message's sender as E.164, or null when it is not a phone number (a short code, a name). */
function senderPhone(phone: string | undefined): string | null {
  const digits = (phone ?? '').replace(/[\s()+-]/g, '');
  return E164_DIGITS.test(digits) ? `+${digits}` : null;
}

/**
 * SMSC.ru's inbox: `POST {base}/sys/get.php` with `get_answers=1` (https://smsc.ru/api/http/get_data/inbox)
 * lists the SMS people sent to the account's numbers (`id`, `phone` the sender, `to_phone`, `sent`,
 * `message`), after `after_id` or within the last `hour` hours. The request carries our own credentials,
 * so nothing in it can be forged by a third party; a wrong login is SMSC's error 2.
 */
export async function readSmscInbox(options: SmscOptions, afterId: number | null): Promise<Array<{ id: number; phone: string | null; text: string }>> {
  const form = new URLSearchParams({ get_answers: '1', login: options.login, psw: options.password, fmt: '3', charset: 'utf-8' });
  if (afterId === null) form.set('hour', String(FIRST_READ_HOURS));
  else form.set('after_id', String(afterId));
  const res = await providerFetch(`${options.baseUrl.replace(/\/$/, '')}/sys/get.php`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: form }, { provider: 'smsc', timeoutMs: options.timeoutMs });
  if (!res.ok) {
    await res.body?.cancel();
    throw new RetryableSendError('provider_bad_response', `smsc inbox: HTTP ${res.status}`);
  }
  const answer = await providerJson<SmscAnswerEntry[] | { error?: string; error_code?: number }>(res, 'smsc');
  if (!Array.isArray(answer)) {
    throw new RetryableSendError(answer.error_code === 2 ? 'provider_auth_failed' : 'provider_error', `smsc inbox error ${answer.error_code ?? ''}: ${answer.error ?? ''}`);
  }
  return answer
    .filter((entry) => entry.id !== undefined && /^\d+$/.test(String(entry.id)))
    .map((entry) => ({ id: Number(entry.id), phone: senderPhone(entry.phone), text: entry.message ?? '' }))
    .sort((a, b) => a.id - b.id);
}

/**
 * Reads SMSC's inbox every `intervalMs` and applies each message (STOP replies become opt-outs). The
 * cursor (`inbox_cursors`) moves past a message only once it is applied, so a failure reads it again
 * next time; replicas reading the same messages report the same opt-outs, which count once.
 */
export function startSmscInbox(options: { smsc: SmscOptions; pool: Pool; recipients: SmsRecipients; results: StepResultPublisher; intervalMs: number; logger: Logger }) {
  const failures = collapseRepeats(options.logger);
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;

  const pollOnce = async (): Promise<number> => {
    const { rows } = await options.pool.query<{ last_id: string }>(`SELECT last_id FROM inbox_cursors WHERE provider = 'smsc'`);
    const messages = await readSmscInbox(options.smsc, rows[0] ? Number(rows[0].last_id) : null);
    let applied = 0;
    let lastId: number | null = null;
    try {
      for (const message of messages) {
        if (message.phone) await applyInboundSms({ provider: 'smsc', phone: message.phone, text: message.text }, options);
        lastId = message.id;
        applied++;
      }
    } finally {
      if (lastId !== null) {
        await options.pool.query(
          `INSERT INTO inbox_cursors (provider, last_id) VALUES ('smsc', $1)
           ON CONFLICT (provider) DO UPDATE SET last_id = GREATEST(inbox_cursors.last_id, EXCLUDED.last_id), updated_at = now()`,
          [lastId],
        );
      }
    }
    return applied;
  };

  /** One read at a time: the timer's and a caller's never overlap. */
  const serially = (): Promise<number> => {
    const next = running.then(pollOnce);
    running = next.catch(() => undefined);
    return next;
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      serially()
        .catch((err: unknown) => failures.warn({ err, provider: 'smsc' }, 'reading the SMSC inbox failed; trying again at the next interval'))
        .finally(schedule);
    }, options.intervalMs);
  };
  schedule();

  return {
    /** Reads the inbox now; resolves with the messages read (tests). */
    pollOnce: serially,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running.catch(() => undefined);
      failures.flush();
    },
  };
}
