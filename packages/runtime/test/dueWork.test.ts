import { testLogger, waitFor } from '@rrs/testkit';
import { startDueWorkLoop, startHousekeepingRounds, Wakeable, type Notifier } from '../src';

/** The one due-work loop every background worker runs. */
describe('startDueWorkLoop', () => {
  it('goes again at once while a round says there is more, then waits for the next due time', async () => {
    const rounds: number[] = [];
    let more = 3;
    const loop = startDueWorkLoop({
      name: 'test', logger: testLogger(),
      round: async () => { rounds.push(Date.now()); return more-- > 0; },
      nextDueInMs: async () => 60_000,
    });
    await waitFor(() => rounds.length >= 4);
    await new Promise((r) => setTimeout(r, 100));
    expect(rounds.length).toBe(4);
    loop.wake();
    await waitFor(() => rounds.length === 5, { what: 'a round after wake()' });
    await loop.stop();
  });

  it('sleeps until the next due time it is told, and briefly when work is due now but held elsewhere', async () => {
    const rounds: number[] = [];
    let nextDue: number | null = 150;
    const loop = startDueWorkLoop({ name: 'test', logger: testLogger(), round: async () => { rounds.push(Date.now()); return false; }, nextDueInMs: async () => nextDue, contendedMs: 10 });
    await waitFor(() => rounds.length >= 2, { timeoutMs: 2_000 });
    expect(rounds[1] - rounds[0]).toBeGreaterThanOrEqual(140);
    nextDue = 0;
    loop.wake();
    const count = rounds.length;
    await waitFor(() => rounds.length >= count + 5, { timeoutMs: 2_000, what: 'contended rounds every 10 ms' });
    await loop.stop();
  });

  it('after a round that did some work, goes again at once if work is due now, and otherwise sleeps until it is due', async () => {
    const rounds: number[] = [];
    let nextDue: number | null = 0;
    // Work due now after every round: with 'some' each round follows the last at once, not contendedMs later.
    const loop = startDueWorkLoop({ name: 'test', logger: testLogger(), round: async () => { rounds.push(Date.now()); return 'some'; }, nextDueInMs: async () => nextDue, contendedMs: 60_000 });
    await waitFor(() => rounds.length >= 5, { timeoutMs: 2_000, what: 'rounds at once while work is due now' });
    nextDue = 60_000;
    const count = rounds.length;
    await new Promise((r) => setTimeout(r, 100));
    // Nothing due now: the loop sleeps (at most the round already under way when the answer changed).
    expect(rounds.length).toBeLessThanOrEqual(count + 1);
    await loop.stop();
  });

  it('counts the wait for the next due time from when it asked, not from when the answer came', async () => {
    // The answer takes 300 ms (a loaded database); the step is due 350 ms after the question. Counted from
    // the answer the next round came 650 ms after the first.
    const rounds: number[] = [];
    const loop = startDueWorkLoop({
      name: 'test', logger: testLogger(),
      round: async () => { rounds.push(Date.now()); return false; },
      nextDueInMs: async () => { await new Promise((r) => setTimeout(r, 300)); return 350; },
    });
    await waitFor(() => rounds.length >= 2, { timeoutMs: 5_000, what: 'the round at the due time' });
    await loop.stop();
    expect(rounds[1] - rounds[0]).toBeGreaterThanOrEqual(340);
    expect(rounds[1] - rounds[0]).toBeLessThan(600);
  });

  it('a round that read the next due time itself is not asked again: the loop waits on its reading, counted from when it was asked', async () => {
    const rounds: number[] = [];
    let asked = 0;
    // The reading says 200 ms from 100 ms ago (its request's send time): the next round comes ~100 ms on.
    const loop = startDueWorkLoop({
      name: 'test', logger: testLogger(),
      round: async () => { rounds.push(Date.now()); return { outcome: 'some', nextDueInMs: 200, askedAt: Date.now() - 100 }; },
      nextDueInMs: async () => { asked++; return 0; },
    });
    await waitFor(() => rounds.length >= 3, { timeoutMs: 3_000, what: 'rounds at the read due times' });
    await loop.stop();
    expect(asked).toBe(0);
    expect(rounds[1] - rounds[0]).toBeGreaterThanOrEqual(90);
    expect(rounds[1] - rounds[0]).toBeLessThan(190);
  });

  it('retries a failed round with backoff until it succeeds, logging the first failure and a count of the repeats', async () => {
    const logger = testLogger();
    let calls = 0;
    const loop = startDueWorkLoop({
      name: 'flaky', logger, backoff: { baseMs: 5, maxMs: 20 },
      round: async () => { calls++; if (calls < 4) throw new Error('database is down'); return false; },
    });
    await waitFor(() => calls >= 4);
    await loop.stop();
    const failures = logger.lines.filter((l) => l.includes('flaky round failed')).map((l) => JSON.parse(l) as { err?: { message: string }; repeated?: number });
    expect(failures).toHaveLength(2);
    expect(failures[0].err?.message).toBe('database is down');
    expect(failures[1]).toMatchObject({ repeated: 2 });
  });

  it('logs a round failing for a long time once per interval, not once per round', async () => {
    const logger = testLogger();
    let calls = 0;
    const loop = startDueWorkLoop({
      name: 'down', logger, backoff: { baseMs: 1, maxMs: 2 }, logIntervalMs: 150,
      round: async () => { calls++; throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }); },
    });
    // Over 50 failed rounds and at least two intervals, however slow the machine (a fixed 400 ms saw 36).
    const started = Date.now();
    await waitFor(() => calls > 50 && Date.now() - started >= 300, { what: 'over 50 failed rounds across two intervals' });
    await loop.stop();
    const elapsed = Date.now() - started;
    const failures = logger.lines.filter((l) => l.includes('down round failed')).map((l) => JSON.parse(l) as { err?: unknown; repeated?: number });
    // One full line, then one count line per 150 ms interval (and the rest on stop).
    expect(failures.filter((f) => f.err)).toHaveLength(1);
    expect(failures.length).toBeLessThanOrEqual(2 + Math.ceil(elapsed / 150));
    expect(failures.length).toBeLessThan(calls / 5);
    expect(failures.reduce((sum, f) => sum + (f.repeated ?? 0), 0)).toBe(calls - 1);
  });

  it('waits at the gate before each round, and stop() ends that wait and the round in flight', async () => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let rounds = 0;
    const loop = startDueWorkLoop({ name: 'gated', logger: testLogger(), beforeRound: () => gate, round: async () => { rounds++; return false; } });
    await new Promise((r) => setTimeout(r, 50));
    expect(rounds).toBe(0);
    open();
    await waitFor(() => rounds === 1);
    const stopped = startDueWorkLoop({ name: 'stuck', logger: testLogger(), beforeRound: () => new Promise(() => undefined), round: async () => true });
    await stopped.stop();
    await loop.stop();
  });

  it('runs several loops side by side', async () => {
    let inFlight = 0;
    let most = 0;
    const loop = startDueWorkLoop({
      name: 'parallel', logger: testLogger(), loops: 3,
      round: async () => { inFlight++; most = Math.max(most, inFlight); await new Promise((r) => setTimeout(r, 20)); inFlight--; return true; },
    });
    await waitFor(() => most === 3);
    await loop.stop();
    expect(inFlight).toBe(0);
  });

  it('wakeOne() wakes one sleeping loop, not all: the room one batch of results frees is one round\'s to take', async () => {
    let rounds = 0;
    const loop = startDueWorkLoop({ name: 'one', logger: testLogger(), loops: 3, idleMs: 60_000, round: async () => { rounds++; return false; }, nextDueInMs: async () => null });
    await waitFor(() => rounds === 3, { what: 'each loop’s first round' });
    loop.wakeOne();
    await waitFor(() => rounds >= 4, { what: 'a round after wakeOne()' });
    // A wake resolves every sleep it ends at once, so loops woken with it would have run by now; before, wake() woke all three.
    await new Promise((r) => setImmediate(r));
    expect(rounds).toBe(4);
    loop.wake();
    await waitFor(() => rounds === 7, { what: 'a round of every loop after wake()' });
    await loop.stop();
  });
  it('a notification wakes one sleeping loop, not all; a round that finds more wakes the next one, so a backlog has them all', async () => {
    const listeners: Array<(payload: string) => void> = [];
    const notifier = { on: (_channel: string, listener: (payload: string) => void) => listeners.push(listener), onReconnect: () => undefined } as unknown as Notifier;
    let rounds = 0;
    let more = 0;
    const loop = startDueWorkLoop({
      name: 'notified', logger: testLogger(), loops: 3, idleMs: 60_000, notifier, channels: ['due'], nextDueInMs: async () => null,
      round: async () => {
        rounds++;
        if (more === 0) return false;
        more--;
        return true;
      },
    });
    await waitFor(() => rounds === 3, { what: 'each loop’s first round' });
    listeners[0]('');
    await waitFor(() => rounds >= 4, { what: 'a round after the notification' });
    // Woken all, the other two would have run by now (a wake resolves every sleep it ends at once).
    await new Promise((r) => setImmediate(r));
    expect(rounds).toBe(4);
    // One round finds more: it goes again and wakes one other loop — three rounds, not the four of all woken.
    more = 1;
    listeners[0](String(Date.now()));
    await waitFor(() => rounds >= 7, { what: 'the round that found more, its next one and the loop it woke' });
    await new Promise((r) => setImmediate(r));
    expect(rounds).toBe(7);
    await loop.stop();
  });
});

describe('startHousekeepingRounds', () => {
  it('while there is more, pauses at least three times as long as a round took, so a backlog takes at most a quarter of the time', async () => {
    const rounds: Array<{ start: number; end: number }> = [];
    let enough!: () => void;
    const done = new Promise<void>((resolve) => (enough = resolve));
    const loop = startHousekeepingRounds({
      name: 'test', logger: testLogger(), intervalMs: 60_000, pauseMs: 5,
      async round() {
        const start = performance.now();
        // A round that takes 60 ms (the work itself), then says there is more.
        await new Promise((resolve) => setTimeout(resolve, 60));
        rounds.push({ start, end: performance.now() });
        if (rounds.length === 3) enough();
        return { more: rounds.length < 3 };
      },
    });
    await done;
    await loop.stop();
    for (let i = 1; i < rounds.length; i++) {
      const took = rounds[i - 1].end - rounds[i - 1].start;
      // 2 ms of slack for the clocks: the loop counts the wait in Date.now()'s whole milliseconds from the
      // asking, and libuv starts a timer from its own cached whole-millisecond time, each up to 1 ms early
      // by performance.now() (a clean-clone CI run saw 178.78 against 3 × 59.94 − 1). The old loop paused
      // pauseMs (5 ms).
      expect(rounds[i].start - rounds[i - 1].end).toBeGreaterThanOrEqual(took * 3 - 2);
    }
  });
});

describe('Wakeable', () => {
  it('a wake before the sleep makes the next sleep return at once', async () => {
    const w = new Wakeable();
    w.wake();
    const started = Date.now();
    await w.sleep(10_000);
    expect(Date.now() - started).toBeLessThan(100);
  });

  it('a wake for a later time than the sleep ends changes nothing; an earlier one ends it then', async () => {
    const w = new Wakeable();
    const started = Date.now();
    const sleeping = w.sleep(300);
    w.wake(Date.now() + 10_000);
    w.wake(Date.now() + 50);
    await sleeping;
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(45);
    expect(took).toBeLessThan(250);
  });
});
