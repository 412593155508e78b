/*
 * Every date and time in the console is written in the organization's time zone (its settings), not the
 * browser's, in the console's language: a manager abroad and the shop see the same "14:05".
 */
import type { SessionInfo } from './api';

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterOf(timeZone: string, options: Intl.DateTimeFormatOptions): Intl.DateTimeFormat {
  const locale = document.documentElement.lang === 'ru' ? 'ru-RU' : 'en-GB';
  const key = `${locale}|${timeZone}|${JSON.stringify(options)}`;
  let formatter = formatters.get(key);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat(locale, { timeZone, ...options });
    formatters.set(key, formatter);
  }
  return formatter;
}

export const zoneOf = (session: SessionInfo) => session.organization.timeZone || 'UTC';

/** A moment (an ISO string) as date and time in the organization's zone; '—' for none. */
export function formatWhen(session: SessionInfo, iso: string | null | undefined): string {
  if (!iso) return '—';
  return formatterOf(zoneOf(session), { dateStyle: 'medium', timeStyle: 'short', hourCycle: 'h23' }).format(new Date(iso));
}

/** A moment as its date alone, in the organization's zone. */
export function formatDay(session: SessionInfo, iso: string | null | undefined): string {
  if (!iso) return '—';
  return formatterOf(zoneOf(session), { dateStyle: 'medium' }).format(new Date(iso));
}
