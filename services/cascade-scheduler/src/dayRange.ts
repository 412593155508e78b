import type { FieldProblem } from '@rrs/runtime';

export const DAY_MS = 24 * 60 * 60 * 1000;
const DAY = /^\d{4}-\d{2}-\d{2}$/;

/** The UTC midnight of a YYYY-MM-DD day, or null when the text is not a day (2026-02-30 is not: the parse must give the same day back). */
export function dayOf(text: string): number | null {
  if (!DAY.test(text)) return null;
  const ms = Date.parse(`${text}T00:00:00Z`);
  return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 10) === text ? ms : null;
}

/** An optional range of days (either side may be empty): problems for a malformed day or a backwards range. */
export function optionalDayRangeProblems(fromDay: string, toDay: string): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const from = fromDay ? dayOf(fromDay) : 0;
  const to = toDay ? dayOf(toDay) : 0;
  if (from === null) problems.push({ parameter: 'from', detail: 'must be a day, YYYY-MM-DD' });
  if (to === null) problems.push({ parameter: 'to', detail: 'must be a day, YYYY-MM-DD' });
  if (fromDay && toDay && from !== null && to !== null && to < from) problems.push({ parameter: 'to', detail: 'must not be before `from`' });
  return problems;
}

/**
 * SQL condition that `column` falls within the days `$from`..`$to` (both included, in the zone `$zone`),
 * each side skipped when its parameter is ''. The placeholders are the caller's parameter numbers.
 */
export function dayRangeSql(column: string, from: number, to: number, zone: number): string {
  // nullif: an empty side is never cast to a date (the planner may fold the cast before the OR).
  return `($${from} = '' OR ${column} >= (nullif($${from}, '')::date)::timestamp AT TIME ZONE $${zone})
      AND ($${to} = '' OR ${column} < (nullif($${to}, '')::date + 1)::timestamp AT TIME ZONE $${zone})`;
}
