/*
 * The ratings inbox as a workflow and its alerts (docs/console.md, "The ratings inbox" and "Rating
 * alerts"): the rules the scheduler applies, the gateway validates and the console shows, written once.
 */
import { instantOfLocal, localTime, minutesOf, SEND_WINDOW_TIME_PATTERN } from './sendWindows';

/** A rating's state in the inbox: resolved once handled, in progress while a member has it, else new. */
export const RATING_STATUSES = ['new', 'in_progress', 'resolved'] as const;
export type RatingStatus = (typeof RATING_STATUSES)[number];
/** The inbox's status filter: a status, `open` (new or in progress) or `overdue` (open and past its target). */
export const RATING_STATUS_FILTERS = [...RATING_STATUSES, 'open', 'overdue'] as const;

/** What a member does to a rating of the inbox. */
export const RATING_ACTIONS = ['assign', 'unassign', 'resolve', 'reopen', 'note'] as const;
export type RatingAction = (typeof RATING_ACTIONS)[number];

/** Kinds of a rating's history entries. */
export const RATING_HISTORY_KINDS = ['feedback', 'alerted', 'assigned', 'unassigned', 'resolved', 'reopened', 'noted', 'replied'] as const;

/** A member's choice of alerts by email. */
export const ALERT_EMAIL_CHOICES = ['instant', 'digest', 'off'] as const;
export type AlertEmailChoice = (typeof ALERT_EMAIL_CHOICES)[number];

/** Alerts work from the first day: owners and admins get each alert by email until they choose otherwise. */
export function defaultAlertChoice(role: string): AlertEmailChoice {
  return role === 'owner' || role === 'admin' ? 'instant' : 'off';
}

/** Ratings up to this alert and are the inbox's items (with any private feedback), unless the organization or location says otherwise. */
export const DEFAULT_ALERT_THRESHOLD = 3;
/** Minutes of working hours to respond to an item. */
export const DEFAULT_RESPONSE_TARGET_MINUTES = 120;
/** A response target of at most 30 days of working minutes. */
export const MAX_RESPONSE_TARGET_MINUTES = 30 * 24 * 60;
/** The hours a response target counts in, until the organization sets its own: 09:00–21:00 every day. */
export const DEFAULT_WORKING_HOURS: WorkingHours = { start: '09:00', end: '21:00', days: [] };
/** A note, a resolution note. */
export const MAX_NOTE_LENGTH = 2_000;
/** A reply to a customer. */
export const MAX_REPLY_LENGTH = 5_000;
export const MAX_REPLY_SUBJECT_LENGTH = 200;
/** How long after a low rating its alert waits for the private feedback that usually follows (then goes without it). */
export const DEFAULT_ALERT_HOLD_MS = 30_000;
/** The local time a daily digest goes out, about the day before. */
export const DIGEST_LOCAL_TIME = '08:00';
/** Ratings listed in one digest email (the totals count them all). */
export const MAX_DIGEST_RATINGS = 50;

export interface WorkingHours {
  /** `HH:MM` local. */
  start: string;
  /** `HH:MM` local; before `start` = the hours cross midnight. */
  end: string;
  /** ISO weekdays (1 = Monday … 7 = Sunday); empty = every day. */
  days: number[];
}

/** What is wrong with working hours, by field; empty when they are valid. */
export function workingHoursProblems(hours: WorkingHours): Array<{ field: 'start' | 'end' | 'days'; detail: string }> {
  const problems: Array<{ field: 'start' | 'end' | 'days'; detail: string }> = [];
  for (const field of ['start', 'end'] as const) if (!SEND_WINDOW_TIME_PATTERN.test(hours[field] ?? '')) problems.push({ field, detail: 'must be a local time HH:MM (00:00–23:59)' });
  if (problems.length === 0 && hours.start === hours.end) problems.push({ field: 'end', detail: 'must differ from start' });
  if (hours.days.some((day) => !Number.isInteger(day) || day < 1 || day > 7)) problems.push({ field: 'days', detail: 'must be ISO weekdays, 1 (Monday) to 7 (Sunday)' });
  else if (new Set(hours.days).size !== hours.days.length) problems.push({ field: 'days', detail: 'must not repeat a day' });
  return problems;
}

/**
 * The instant `minutes` of working time after `from`: the clock runs only inside the working hours (in
 * `timeZone`), so a rating at 20:30 with a 2-hour target and hours 09:00–21:00 is due at 10:30 the next
 * working day. Hours crossing midnight belong to the day they open on.
 */
export function addWorkingMinutes(from: Date, minutes: number, hours: WorkingHours, timeZone: string): Date {
  let remainingMs = Math.max(0, minutes) * 60_000;
  let cursor = from.getTime();
  const start = minutesOf(hours.start);
  const end = minutesOf(hours.end);
  const local = localTime(from, timeZone);
  // From the day before (its hours may cross into today) through at most a year and a bit of days.
  for (let ahead = -1; ahead <= 400; ahead++) {
    const date = new Date(Date.UTC(local.year, local.month - 1, local.day + ahead));
    const weekday = date.getUTCDay() || 7;
    if (hours.days.length > 0 && !hours.days.includes(weekday)) continue;
    const [year, month, day] = [date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate()];
    const opens = instantOfLocal(year, month, day, start, timeZone);
    const closes = start < end ? instantOfLocal(year, month, day, end, timeZone) : instantOfLocal(year, month, day + 1, end, timeZone);
    if (closes <= cursor) continue;
    cursor = Math.max(cursor, opens);
    if (remainingMs <= closes - cursor) return new Date(cursor + remainingMs);
    remainingMs -= closes - cursor;
    cursor = closes;
  }
  // Unreachable for valid hours (every week has working time); never leave an item without a target.
  return new Date(cursor + remainingMs);
}

/** `YYYY-MM-DD` of an instant in a zone. */
export function localDay(instant: Date, timeZone: string): string {
  const local = localTime(instant, timeZone);
  return `${local.year}-${String(local.month).padStart(2, '0')}-${String(local.day).padStart(2, '0')}`;
}

/** The instant a local day's `HH:MM` happens in a zone (`day` is `YYYY-MM-DD`). */
export function instantOfLocalDay(day: string, time: string, timeZone: string): Date {
  const [year, month, date] = day.split('-').map(Number);
  return new Date(instantOfLocal(year, month, date, minutesOf(time), timeZone));
}
