/**
 * Send windows: the local hours when a step may go out (docs/customer-respect.md). Written once here:
 * the admin API validates with `sendWindowProblems`, the directory stores what passed, and the
 * scheduler holds a due step with `sendWindowOpensAt` until its window opens.
 */

/** `HH:MM` on a 24-hour clock. */
export const SEND_WINDOW_TIME_PATTERN = /^([01]\d|2[0-3]):[0-5]\d$/;

/** The channels a window holds when it names none: the phone channels (an email waits in the inbox; a text wakes people). */
export const SEND_WINDOW_DEFAULT_CHANNELS = ['SMS', 'MAX', 'TELEGRAM'] as const;

export interface SendWindow {
  /** `HH:MM` local: the window opens. */
  start: string;
  /** `HH:MM` local: the window closes; before `start` = the window crosses midnight. */
  end: string;
  /** ISO weekdays (1 = Monday … 7 = Sunday) a window opens on; absent or empty = every day. */
  days?: number[];
  /** Channel keys the window holds; absent or empty = SMS, MAX and TELEGRAM. */
  channels?: string[];
}

/** What a new organization gets: 09:00–21:00 every day for SMS, MAX and TELEGRAM; email at any time. */
export const DEFAULT_SEND_WINDOW: SendWindow = { start: '09:00', end: '21:00' };

/**
 * Documented examples (docs/customer-respect.md), not legal advice: the US federal TCPA quiet hours
 * (no calls or texts before 8:00 or after 21:00 local; some states are stricter) and the Russian
 * custom of not messaging at night (the law on advertising, art. 18, requires prior consent; night
 * sending is the commonest complaint to the regulator).
 */
export const SEND_WINDOW_PRESETS: Record<'us_federal' | 'russia', SendWindow> = {
  us_federal: { start: '08:00', end: '21:00' },
  russia: { start: '09:00', end: '21:00' },
};

/** Minutes since midnight of an `HH:MM`. */
export const minutesOf = (time: string) => Number(time.slice(0, 2)) * 60 + Number(time.slice(3, 5));

/** What is wrong with a window, as (field, detail) pairs; empty when it is valid. */
export function sendWindowProblems(window: SendWindow, isChannelKey: (key: string) => boolean): Array<{ field: 'start' | 'end' | 'days' | 'channels'; detail: string }> {
  const problems: Array<{ field: 'start' | 'end' | 'days' | 'channels'; detail: string }> = [];
  for (const field of ['start', 'end'] as const) {
    if (!SEND_WINDOW_TIME_PATTERN.test(window[field] ?? '')) problems.push({ field, detail: 'must be a local time HH:MM (00:00–23:59)' });
  }
  if (problems.length === 0 && window.start === window.end) problems.push({ field: 'end', detail: 'must differ from start (a window of no time would hold steps forever)' });
  const days = window.days ?? [];
  if (days.some((day) => !Number.isInteger(day) || day < 1 || day > 7)) problems.push({ field: 'days', detail: 'must be ISO weekdays, 1 (Monday) to 7 (Sunday)' });
  else if (new Set(days).size !== days.length) problems.push({ field: 'days', detail: 'must not repeat a day' });
  const channels = window.channels ?? [];
  if (channels.some((channel) => !isChannelKey(channel))) problems.push({ field: 'channels', detail: 'must be channel keys such as EMAIL, SMS, MAX, TELEGRAM' });
  else if (new Set(channels).size !== channels.length) problems.push({ field: 'channels', detail: 'must not repeat a channel' });
  return problems;
}

/** True when the window holds steps of this channel. */
export function sendWindowHolds(window: SendWindow, channel: string): boolean {
  const channels = window.channels && window.channels.length > 0 ? window.channels : SEND_WINDOW_DEFAULT_CHANNELS;
  return (channels as readonly string[]).includes(channel);
}

export interface LocalTime {
  year: number;
  month: number;
  day: number;
  /** Minutes since local midnight. */
  minutes: number;
  /** ISO weekday, 1 = Monday. */
  weekday: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterOf(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

/** The wall-clock reading of an instant in a zone. */
export function localTime(instant: Date, timeZone: string): LocalTime {
  const parts: Record<string, number> = {};
  for (const part of formatterOf(timeZone).formatToParts(instant)) if (part.type !== 'literal') parts[part.type] = Number(part.value);
  const weekday = new Date(Date.UTC(parts.year, parts.month - 1, parts.day)).getUTCDay() || 7;
  return { year: parts.year, month: parts.month, day: parts.day, minutes: parts.hour * 60 + parts.minute, weekday };
}

/** The zone's offset from UTC at an instant, in ms (local = UTC + offset). */
function offsetAt(instant: number, timeZone: string): number {
  const parts: Record<string, number> = {};
  for (const part of formatterOf(timeZone).formatToParts(new Date(instant))) if (part.type !== 'literal') parts[part.type] = Number(part.value);
  const asUtc = Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute, parts.second);
  return asUtc - Math.floor(instant / 1000) * 1000;
}

/**
 * The instant a local wall-clock time happens in the zone. A time skipped by a daylight-saving jump
 * (02:30 on the spring-forward night) is taken as the first instant after the jump with the same wall
 * reading shifted forward; a time that happens twice (autumn) is its first occurrence.
 */
export function instantOfLocal(year: number, month: number, day: number, minutes: number, timeZone: string): number {
  const wall = Date.UTC(year, month - 1, day, Math.floor(minutes / 60), minutes % 60);
  const first = wall - offsetAt(wall, timeZone);
  const second = wall - offsetAt(first, timeZone);
  // Both guesses agree except around a jump; the earlier one that reads right locally is the first occurrence.
  const candidates = [Math.min(first, second), Math.max(first, second)];
  for (const candidate of candidates) if (candidate + offsetAt(candidate, timeZone) === wall) return candidate;
  return Math.max(first, second);
}

function opensOn(window: SendWindow, weekday: number): boolean {
  return !window.days || window.days.length === 0 || window.days.includes(weekday);
}

/**
 * When a step of `channel` due at `now` may go out: null when it may go now (the window does not hold
 * the channel, or is open), else the instant the window next opens in `timeZone`. A window that crosses
 * midnight belongs to the day it opens on (`days` counts that day).
 */
export function sendWindowOpensAt(window: SendWindow | null | undefined, timeZone: string, channel: string, now: Date): Date | null {
  if (!window || !sendWindowHolds(window, channel)) return null;
  const start = minutesOf(window.start);
  const end = minutesOf(window.end);
  const local = localTime(now, timeZone);
  const yesterday = ((local.weekday + 5) % 7) + 1;
  const open =
    start < end
      ? opensOn(window, local.weekday) && local.minutes >= start && local.minutes < end
      : (opensOn(window, local.weekday) && local.minutes >= start) || (opensOn(window, yesterday) && local.minutes < end);
  if (open) return null;
  // The next opening: today's if it is still ahead, else the first allowed day after (at most a week on).
  for (let ahead = 0; ahead <= 7; ahead++) {
    const date = new Date(Date.UTC(local.year, local.month - 1, local.day + ahead));
    const weekday = date.getUTCDay() || 7;
    if (!opensOn(window, weekday)) continue;
    const opening = instantOfLocal(date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate(), start, timeZone);
    if (opening > now.getTime()) return new Date(opening);
  }
  // Unreachable for a valid window (every week has an allowed day); never hold a step forever.
  return null;
}
