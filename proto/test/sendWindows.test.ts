import { isChannelKey, sendWindowOpensAt, sendWindowProblems, type SendWindow } from '../src';

const at = (iso: string) => new Date(iso);
const DAY = { start: '09:00', end: '21:00' } satisfies SendWindow;

describe('a send window', () => {
  it('lets a step go at once inside the window, and holds one outside it until the window opens the same or the next day', () => {
    // Moscow is UTC+3 all year.
    expect(sendWindowOpensAt(DAY, 'Europe/Moscow', 'SMS', at('2026-11-23T10:00:00Z'))).toBeNull(); // 13:00 local
    expect(sendWindowOpensAt(DAY, 'Europe/Moscow', 'SMS', at('2026-11-23T03:00:00Z'))).toEqual(at('2026-11-23T06:00:00Z')); // 06:00 → 09:00 today
    expect(sendWindowOpensAt(DAY, 'Europe/Moscow', 'SMS', at('2026-11-23T18:00:00Z'))).toEqual(at('2026-11-24T06:00:00Z')); // 21:00 → 09:00 tomorrow
    expect(sendWindowOpensAt(DAY, 'Europe/Moscow', 'SMS', at('2026-11-23T05:59:59Z'))).toEqual(at('2026-11-23T06:00:00Z'));
    expect(sendWindowOpensAt(DAY, 'Europe/Moscow', 'SMS', at('2026-11-23T06:00:00Z'))).toBeNull();
  });

  it('holds only the channels it names, and by default the phone channels but not email', () => {
    const night = at('2026-11-23T23:00:00Z'); // 02:00 in Moscow
    for (const channel of ['SMS', 'MAX', 'TELEGRAM']) expect(sendWindowOpensAt(DAY, 'Europe/Moscow', channel, night)).not.toBeNull();
    expect(sendWindowOpensAt(DAY, 'Europe/Moscow', 'EMAIL', night)).toBeNull();
    expect(sendWindowOpensAt({ ...DAY, channels: ['EMAIL'] }, 'Europe/Moscow', 'EMAIL', night)).not.toBeNull();
    expect(sendWindowOpensAt({ ...DAY, channels: ['EMAIL'] }, 'Europe/Moscow', 'SMS', night)).toBeNull();
    expect(sendWindowOpensAt(null, 'Europe/Moscow', 'SMS', night)).toBeNull();
  });

  it('crosses midnight when it ends before it starts, and belongs to the day it opens on', () => {
    const evening = { start: '18:00', end: '02:00', days: [5] } satisfies SendWindow; // opens Fridays
    // Friday 2026-11-27 23:30 and Saturday 01:30 local (UTC+3) are inside; Saturday 02:00 is not.
    expect(sendWindowOpensAt(evening, 'Europe/Moscow', 'SMS', at('2026-11-27T20:30:00Z'))).toBeNull();
    expect(sendWindowOpensAt(evening, 'Europe/Moscow', 'SMS', at('2026-11-27T22:30:00Z'))).toBeNull();
    expect(sendWindowOpensAt(evening, 'Europe/Moscow', 'SMS', at('2026-11-27T23:00:00Z'))).toEqual(at('2026-12-04T15:00:00Z'));
    // Thursday 01:00 is after Wednesday's (not allowed) evening: wait for Friday 18:00.
    expect(sendWindowOpensAt(evening, 'Europe/Moscow', 'SMS', at('2026-11-25T22:00:00Z'))).toEqual(at('2026-11-27T15:00:00Z'));
  });

  it('opens at the local hour across a daylight-saving change (spring forward and fall back)', () => {
    // New York: EST (UTC-5) until 2026-03-08 02:00, then EDT (UTC-4).
    expect(sendWindowOpensAt(DAY, 'America/New_York', 'SMS', at('2026-03-08T03:00:00Z'))).toEqual(at('2026-03-08T13:00:00Z')); // Sat 22:00 EST → Sun 09:00 EDT
    // Back to EST on 2026-11-01 02:00.
    expect(sendWindowOpensAt(DAY, 'America/New_York', 'SMS', at('2026-11-01T02:00:00Z'))).toEqual(at('2026-11-01T14:00:00Z')); // Sat 22:00 EDT → Sun 09:00 EST
    // A window opening inside the skipped hour opens right after the jump, not an hour early.
    expect(sendWindowOpensAt({ start: '02:30', end: '05:00' }, 'America/New_York', 'SMS', at('2026-03-08T05:00:00Z'))).toEqual(at('2026-03-08T07:30:00Z'));
  });

  it('skips the days it does not open on', () => {
    const weekdays = { ...DAY, days: [1, 2, 3, 4, 5] } satisfies SendWindow;
    // Saturday 2026-11-28 12:00 Moscow → Monday 09:00.
    expect(sendWindowOpensAt(weekdays, 'Europe/Moscow', 'SMS', at('2026-11-28T09:00:00Z'))).toEqual(at('2026-11-30T06:00:00Z'));
  });

  it.each([
    [{ start: '9:00', end: '21:00' }, 'start'],
    [{ start: '09:00', end: '24:00' }, 'end'],
    [{ start: '09:00', end: '09:00' }, 'end'],
    [{ start: '09:00', end: '21:00', days: [0] }, 'days'],
    [{ start: '09:00', end: '21:00', days: [1, 1] }, 'days'],
    [{ start: '09:00', end: '21:00', channels: ['sms'] }, 'channels'],
  ] as Array<[SendWindow, string]>)('refuses %j, naming %s', (window, field) => {
    expect(sendWindowProblems(window, isChannelKey).map((problem) => problem.field)).toEqual([field]);
  });
});
