import { addWorkingMinutes, DEFAULT_WORKING_HOURS, defaultAlertChoice, instantOfLocalDay, localDay, workingHoursProblems } from '../src';

describe('the inbox rules', () => {
  it('a response target counts only working time, in the zone', () => {
    const hours = DEFAULT_WORKING_HOURS; // 09:00–21:00 every day
    // 10:00 Moscow (07:00 UTC) + 2 h = 12:00 Moscow.
    expect(addWorkingMinutes(new Date('2026-05-04T07:00:00Z'), 120, hours, 'Europe/Moscow').toISOString()).toBe('2026-05-04T09:00:00.000Z');
    // 20:30 Moscow + 2 h = 30 min that day, 90 min the next from 09:00 → 10:30 Moscow.
    expect(addWorkingMinutes(new Date('2026-05-04T17:30:00Z'), 120, hours, 'Europe/Moscow').toISOString()).toBe('2026-05-05T07:30:00.000Z');
    // Before opening: the clock starts at 09:00.
    expect(addWorkingMinutes(new Date('2026-05-04T03:00:00Z'), 60, hours, 'Europe/Moscow').toISOString()).toBe('2026-05-04T07:00:00.000Z');
  });

  it('skips days off, and hours across midnight belong to the day they open on', () => {
    // Mon–Fri 09:00–18:00 UTC; Friday 17:00 + 2 h → Monday 10:00.
    const weekdays = { start: '09:00', end: '18:00', days: [1, 2, 3, 4, 5] };
    expect(addWorkingMinutes(new Date('2026-05-08T17:00:00Z'), 120, weekdays, 'UTC').toISOString()).toBe('2026-05-11T10:00:00.000Z');
    // A bar open 18:00–02:00 on Fridays only: Saturday 01:00 is still Friday's shift.
    const nights = { start: '18:00', end: '02:00', days: [5] };
    expect(addWorkingMinutes(new Date('2026-05-09T01:00:00Z'), 30, nights, 'UTC').toISOString()).toBe('2026-05-09T01:30:00.000Z');
    expect(addWorkingMinutes(new Date('2026-05-09T01:30:00Z'), 60, nights, 'UTC').toISOString()).toBe('2026-05-15T18:30:00.000Z');
  });

  it('counts through a daylight-saving change by the wall clock', () => {
    // Berlin springs forward on 29 March 2026 at 02:00; 09:00 local is 07:00 UTC that day (08:00 UTC the day before).
    expect(addWorkingMinutes(new Date('2026-03-28T19:30:00Z'), 60, DEFAULT_WORKING_HOURS, 'Europe/Berlin').toISOString()).toBe('2026-03-29T07:30:00.000Z');
  });

  it('working hours are checked by field; days, the local day and the default choice', () => {
    expect(workingHoursProblems({ start: '9:00', end: '09:00', days: [0, 1] }).map((p) => p.field)).toEqual(['start', 'days']);
    expect(workingHoursProblems({ start: '09:00', end: '09:00', days: [] }).map((p) => p.field)).toEqual(['end']);
    expect(workingHoursProblems({ start: '09:00', end: '18:00', days: [1, 1] }).map((p) => p.field)).toEqual(['days']);
    expect(localDay(new Date('2026-05-04T22:30:00Z'), 'Europe/Moscow')).toBe('2026-05-05');
    expect(instantOfLocalDay('2026-05-05', '08:00', 'Europe/Moscow').toISOString()).toBe('2026-05-05T05:00:00.000Z');
    expect([defaultAlertChoice('owner'), defaultAlertChoice('admin'), defaultAlertChoice('viewer')]).toEqual(['instant', 'instant', 'off']);
  });
});
