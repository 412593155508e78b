import { ConfigError } from '@rrs/runtime';
import { buildConfig, engine } from '../src';
import { reviewToken, tokenBatch, UuidArray } from '../src/ids';

const { applyResult, fire, rate, resultTimedOut, scheduleNext, start } = engine;
const MIN = 1000;
const at = (ms: number) => new Date(Date.UTC(2026, 0, 1) + ms);

function recipient(email: string, phone: string, steps: Array<[string, number]>): engine.RecipientState {
  return {
    recipient: { id: 'r', cascadeId: 'c', organizationId: 'o', name: '', email, phone, status: 'running', finishReason: null, rating: null, ratedAt: null, feedback: null, finishedAt: null, windowClosesAt: null },
    steps: steps.map(([channel, delayMinutes], i) => ({
      id: `s${i + 1}`, order: i + 1, channel, delayMinutes, status: 'pending', sentChannel: channel, attempt: 0,
      dueAt: null, dispatchedAt: null, sentAt: null, skippedAt: null, deliveredAt: null, reason: null, reroutes: [],
    })),
  };
}
const all = { configured: () => true, optedOut: () => false, phoneRefused: () => false, windowOpensAt: () => null };

/** The pure transitions behind the timing rules (the integration tests run the same rules on Postgres + NATS). */
describe('engine', () => {
  it("a delivery takes the receipt's own time, kept within [sent, now], and only the first one counts", () => {
    const delivered = (occurredAt: Date | undefined, now: Date) => {
      const s = recipient('a@x', '', [['EMAIL', 0]]);
      start(s, { now: at(0), minuteMs: MIN });
      fire(s, s.steps[0], all, { now: at(10), minuteMs: MIN });
      applyResult(s, s.steps[0], 's1:1', 'SENT', '', { now: at(20), minuteMs: MIN });
      applyResult(s, s.steps[0], 's1:1', 'DELIVERED', 'delivered', { now, minuteMs: MIN }, '', occurredAt);
      return s.steps[0];
    };
    expect(delivered(at(500), at(900)).deliveredAt).toEqual(at(500));
    expect(delivered(undefined, at(900)).deliveredAt).toEqual(at(900));
    expect(delivered(at(5), at(900)).deliveredAt).toEqual(at(20));
    expect(delivered(at(5_000), at(900)).deliveredAt).toEqual(at(900));
    const step = delivered(at(500), at(900));
    applyResult(recipient('a@x', '', []), step, 's1:1', 'DELIVERED', 'read', { now: at(1_000), minuteMs: MIN }, '', at(300));
    expect(step.deliveredAt).toEqual(at(500));
  });

  it('step 1 is due at start whatever its delay; step 2 is due its delay after the send', () => {
    const s = recipient('a@x', '', [['EMAIL', 30], ['EMAIL', 5]]);
    start(s, { now: at(0), minuteMs: MIN });
    expect(s.steps[0]).toMatchObject({ status: 'scheduled', dueAt: at(0) });
    const d = fire(s, s.steps[0], all, { now: at(10), minuteMs: MIN });
    expect(d).toMatchObject({ attemptId: 's1:1', channel: 'EMAIL' });
    applyResult(s, s.steps[0], 's1:1', 'SENT', '', { now: at(20), minuteMs: MIN });
    expect(s.steps[1]).toMatchObject({ status: 'scheduled', dueAt: at(20 + 5 * MIN) });
  });

  it('a step due outside its send window waits for the window, then goes out; the next delay counts from the actual send', () => {
    const s = recipient('', '+79990000000', [['SMS', 0], ['SMS', 5]]);
    start(s, { now: at(0), minuteMs: MIN });
    const opens = at(3 * MIN);
    const closed = { ...all, windowOpensAt: () => opens };
    expect(fire(s, s.steps[0], closed, { now: at(10), minuteMs: MIN })).toBeNull();
    expect(s.steps[0]).toMatchObject({ status: 'scheduled', dueAt: opens, reason: 'send_window', attempt: 0 });
    expect(s.recipient.status).toBe('running');
    const dispatch = fire(s, s.steps[0], all, { now: opens, minuteMs: MIN });
    expect(dispatch).toMatchObject({ attemptId: 's1:1', channel: 'SMS' });
    expect(s.steps[0]).toMatchObject({ status: 'dispatched', reason: null });
    applyResult(s, s.steps[0], 's1:1', 'SENT', '', { now: at(3 * MIN + 20), minuteMs: MIN });
    expect(s.steps[1]).toMatchObject({ status: 'scheduled', dueAt: at(3 * MIN + 20 + 5 * MIN) });
  });

  it('a timed-out step fires again as the next attempt; only that attempt\'s result counts', () => {
    const s = recipient('a@x', '', [['EMAIL', 0], ['EMAIL', 5]]);
    start(s, { now: at(0), minuteMs: MIN });
    fire(s, s.steps[0], all, { now: at(0), minuteMs: MIN });
    resultTimedOut(s, s.steps[0], false, { now: at(100), minuteMs: MIN });
    expect(s.steps[0]).toMatchObject({ status: 'scheduled', dueAt: at(100), attempt: 1 });
    expect(fire(s, s.steps[0], all, { now: at(101), minuteMs: MIN })).toMatchObject({ attemptId: 's1:2' });
    applyResult(s, s.steps[0], 's1:1', 'SENT', '', { now: at(102), minuteMs: MIN });
    expect(s.steps[0]).toMatchObject({ status: 'dispatched', sentAt: null });
    applyResult(s, s.steps[0], 's1:2', 'SENT', '', { now: at(103), minuteMs: MIN });
    expect(s.steps[0]).toMatchObject({ status: 'sent', sentAt: at(103) });
    expect(s.steps[1]).toMatchObject({ status: 'scheduled', dueAt: at(103 + 5 * MIN) });
  });

  it('on its last attempt a timed-out step fails no_result and the next step is due at once; a late SENT makes it sent (never both failed and sent)', () => {
    const s = recipient('a@x', '', [['EMAIL', 0], ['EMAIL', 5]]);
    start(s, { now: at(0), minuteMs: MIN });
    fire(s, s.steps[0], all, { now: at(0), minuteMs: MIN });
    resultTimedOut(s, s.steps[0], true, { now: at(100), minuteMs: MIN });
    expect(s.steps[0]).toMatchObject({ status: 'failed', reason: 'no_result' });
    expect(s.steps[1]).toMatchObject({ status: 'scheduled', dueAt: at(100) });
    applyResult(s, s.steps[0], 's1:1', 'SENT', '', { now: at(150), minuteMs: MIN });
    expect(s.steps[0]).toMatchObject({ status: 'sent', reason: null, sentAt: at(150) });
    // The recipient's course does not change: the next step was already due.
    expect(s.steps[1]).toMatchObject({ status: 'scheduled', dueAt: at(100) });
    // A step that is no longer dispatched is left alone.
    resultTimedOut(s, s.steps[0], false, { now: at(200), minuteMs: MIN });
    expect(s.steps[0].status).toBe('sent');
  });

  it('a step whose message went out is reported sent whatever the order of its result and the rating', () => {
    // The rating cancels a step waiting for its next attempt although its first attempt went out.
    const s = recipient('a@x', '', [['EMAIL', 0], ['EMAIL', 5]]);
    start(s, { now: at(0), minuteMs: MIN });
    fire(s, s.steps[0], all, { now: at(0), minuteMs: MIN });
    resultTimedOut(s, s.steps[0], false, { now: at(100), minuteMs: MIN });
    rate(s, 5, { now: at(110), minuteMs: MIN });
    expect(s.steps[0].status).toBe('canceled');
    s.finishedNow = false;
    applyResult(s, s.steps[0], 's1:1', 'SENT', '', { now: at(120), minuteMs: MIN });
    expect(s.steps[0]).toMatchObject({ status: 'sent', sentAt: at(120) });
    expect(s.steps[1].status).toBe('canceled');
    expect(s.finishEventStale).toBe(true);
    // In flight when the rating came: the result still makes it sent, and the finish event is refreshed.
    const t = recipient('b@x', '', [['EMAIL', 0]]);
    start(t, { now: at(0), minuteMs: MIN });
    fire(t, t.steps[0], all, { now: at(0), minuteMs: MIN });
    rate(t, 2, { now: at(5), minuteMs: MIN });
    expect(t.steps[0].status).toBe('dispatched');
    applyResult(t, t.steps[0], 's1:1', 'SENT', '', { now: at(9), minuteMs: MIN });
    expect(t.steps[0]).toMatchObject({ status: 'sent', sentAt: at(9) });
    expect(t.recipient).toMatchObject({ status: 'finished', finishReason: 'rated' });
    expect(t.finishEventStale).toBe(true);
  });

  it("a SENT result read against the step as it was before its dispatch committed, of a recipient canceled since, makes it sent and changes nothing else", () => {
    // The result's read began before the dispatcher committed (the step still scheduled, attempt 0) and
    // waited for a cancel that finished the recipient: the message went out, and is reported so.
    const s = recipient('a@x', '', [['EMAIL', 0], ['EMAIL', 5]]);
    start(s, { now: at(0), minuteMs: MIN });
    engine.stop(s, 'canceled', { now: at(3), minuteMs: MIN });
    s.steps[0].status = 'scheduled';
    s.finishedNow = false;
    applyResult(s, s.steps[0], 's1:1', 'SENT', '', { now: at(9), minuteMs: MIN }, 'smtp');
    expect(s.steps[0]).toMatchObject({ status: 'sent', sentAt: at(9), attempt: 1, provider: 'smtp' });
    expect(s.steps[1].status).toBe('canceled');
    expect(s.recipient).toMatchObject({ status: 'finished', finishReason: 'canceled' });
    expect(s.finishEventStale).toBe(true);
    // A result of another attempt, or a failure, changes nothing.
    const t = recipient('b@x', '', [['EMAIL', 0]]);
    start(t, { now: at(0), minuteMs: MIN });
    engine.stop(t, 'canceled', { now: at(3), minuteMs: MIN });
    t.steps[0].status = 'scheduled';
    applyResult(t, t.steps[0], 's1:2', 'SENT', '', { now: at(9), minuteMs: MIN });
    applyResult(t, t.steps[0], 's1:1', 'FAILED', 'bounced', { now: at(9), minuteMs: MIN });
    expect(t.steps[0]).toMatchObject({ status: 'scheduled', sentAt: null, attempt: 0 });
  });

  it('skips at fire time and moves on at once when nothing was sent', () => {
    const s = recipient('', '+79161234567', [['EMAIL', 0], ['SMS', 60]]);
    start(s, { now: at(0), minuteMs: MIN });
    expect(fire(s, s.steps[0], all, { now: at(5), minuteMs: MIN })).toBeNull();
    expect(s.steps[0]).toMatchObject({ status: 'skipped', reason: 'no_contact', skippedAt: at(5) });
    expect(s.steps[1]).toMatchObject({ status: 'scheduled', dueAt: at(5) });
  });

  it('finishes exhausted after the last step, unreachable when nothing could be sent, unsubscribed when opted out', () => {
    const a = recipient('a@x', '', [['EMAIL', 0]]);
    start(a, { now: at(0), minuteMs: MIN });
    fire(a, a.steps[0], all, { now: at(0), minuteMs: MIN });
    applyResult(a, a.steps[0], 's1:1', 'SENT', '', { now: at(1), minuteMs: MIN });
    expect(a.recipient).toMatchObject({ status: 'finished', finishReason: 'exhausted', finishedAt: at(1) });
    expect(a.finishedNow).toBe(true);
    const b = recipient('', '', [['EMAIL', 0], ['SMS', 0]]);
    start(b, { now: at(0), minuteMs: MIN });
    fire(b, b.steps[0], all, { now: at(0), minuteMs: MIN });
    fire(b, b.steps[1], all, { now: at(0), minuteMs: MIN });
    expect(b.recipient.finishReason).toBe('unreachable');
    const c = recipient('a@x', '', [['EMAIL', 0]]);
    start(c, { now: at(0), minuteMs: MIN });
    fire(c, c.steps[0], { configured: () => true, optedOut: () => true, phoneRefused: () => false, windowOpensAt: () => null }, { now: at(0), minuteMs: MIN });
    expect(c.recipient.finishReason).toBe('unsubscribed');
  });

  it('skips every phone step to a number the phone channels refuse (phone_not_allowed), on every hop, and goes on with email', () => {
    const refused = { ...all, phoneRefused: () => true };
    const r = recipient('a@x', '+449098790000', [['SMS', 0], ['MAX', 0], ['EMAIL', 0]]);
    const t = { now: at(0), minuteMs: MIN };
    start(r, t);
    expect(fire(r, r.steps[0], refused, t)).toBeNull();
    expect(r.steps[0]).toMatchObject({ status: 'skipped', reason: 'phone_not_allowed' });
    expect(fire(r, r.steps[1], refused, t)).toBeNull();
    expect(r.steps[1]).toMatchObject({ status: 'skipped', reason: 'phone_not_allowed' });
    expect(fire(r, r.steps[2], refused, t)).toMatchObject({ channel: 'EMAIL' });
    const only = recipient('', '+449098790000', [['TELEGRAM', 0]]);
    start(only, t);
    fire(only, only.steps[0], refused, t);
    expect(only.recipient).toMatchObject({ status: 'finished', finishReason: 'unreachable' });
  });

  it('reroutes SMS → MAX → TELEGRAM as new attempts, then fails unreachable', () => {
    const s = recipient('', '+79161234567', [['SMS', 0]]);
    const t = { now: at(0), minuteMs: MIN };
    start(s, t);
    fire(s, s.steps[0], all, t);
    applyResult(s, s.steps[0], 's1:1', 'NO_BALANCE', '', t);
    expect(fire(s, s.steps[0], all, t)).toMatchObject({ attemptId: 's1:2', channel: 'MAX' });
    applyResult(s, s.steps[0], 's1:2', 'UNREACHABLE', '', t);
    expect(fire(s, s.steps[0], all, t)).toMatchObject({ attemptId: 's1:3', channel: 'TELEGRAM' });
    applyResult(s, s.steps[0], 's1:3', 'UNREACHABLE', '', t);
    expect(s.steps[0]).toMatchObject({ status: 'failed', reason: 'unreachable' });
    expect(s.steps[0].reroutes.map((r) => `${r.from}>${r.to}:${r.reason}`)).toEqual(['SMS>MAX:no_balance', 'MAX>TELEGRAM:unreachable']);
    expect(s.recipient.finishReason).toBe('unreachable');
  });

  it('records a messenger account that cannot send as the reroute reason `account_unavailable`, a number not on the messenger as `unreachable`', () => {
    const s = recipient('', '+79161234567', [['MAX', 0]]);
    const t = { now: at(0), minuteMs: MIN };
    start(s, t);
    fire(s, s.steps[0], all, t);
    applyResult(s, s.steps[0], 's1:1', 'UNREACHABLE', 'account_blocked', t);
    expect(fire(s, s.steps[0], all, t)).toMatchObject({ attemptId: 's1:2', channel: 'TELEGRAM' });
    expect(s.steps[0].reroutes.map((r) => `${r.from}>${r.to}:${r.reason}`)).toEqual(['MAX>TELEGRAM:account_unavailable']);
    const n = recipient('', '+79161234567', [['MAX', 0]]);
    start(n, t);
    fire(n, n.steps[0], all, t);
    applyResult(n, n.steps[0], 's1:1', 'UNREACHABLE', 'not_registered', t);
    expect(n.steps[0].reroutes.map((r) => `${r.from}>${r.to}:${r.reason}`)).toEqual(['MAX>TELEGRAM:unreachable']);
  });

  it('ignores a stale or duplicate result; applies the result of an attempt whose dispatcher died before committing', () => {
    const s = recipient('a@x', '', [['EMAIL', 0], ['EMAIL', 0]]);
    const t = { now: at(0), minuteMs: MIN };
    start(s, t);
    // Published as s1:1, never committed: the step is still scheduled with attempt 0.
    applyResult(s, s.steps[0], 's1:1', 'SENT', '', t);
    expect(s.steps[0]).toMatchObject({ status: 'sent', attempt: 1 });
    applyResult(s, s.steps[0], 's1:1', 'FAILED', 'late', t);
    expect(s.steps[0].status).toBe('sent');
    applyResult(s, s.steps[1], 's2:7', 'SENT', '', t);
    expect(s.steps[1].status).toBe('scheduled');
  });

  it('a rating cancels pending and scheduled steps once; a dispatched step stays in flight', () => {
    const s = recipient('a@x', '', [['EMAIL', 0], ['EMAIL', 60], ['EMAIL', 60]]);
    const t = { now: at(0), minuteMs: MIN };
    start(s, t);
    fire(s, s.steps[0], all, t);
    expect(rate(s, 4, t)).toBe(true);
    expect(rate(s, 1, t)).toBe(false);
    expect(s.steps.map((x) => x.status)).toEqual(['dispatched', 'canceled', 'canceled']);
    expect(s.recipient).toMatchObject({ rating: 4, finishReason: 'rated' });
    applyResult(s, s.steps[0], 's1:1', 'SENT', '', t);
    expect(s.steps.map((x) => x.status)).toEqual(['sent', 'canceled', 'canceled']);
    scheduleNext(s, t);
    expect(s.steps[1].status).toBe('canceled');
  });
});

describe('config', () => {
  const env = { DATABASE_URL: 'postgres://x@127.0.0.1/db' };
  it('defaults to real minutes and accepts the fast clock outside production', () => {
    expect(buildConfig(env).minuteMs).toBe(60_000);
    expect(buildConfig({ ...env, DELAY_MINUTE_MS: '50', NODE_ENV: 'test' }).minuteMs).toBe(50);
  });
  it('refuses the fast clock when NODE_ENV=production, naming the variable', () => {
    expect(() => buildConfig({ ...env, DELAY_MINUTE_MS: '50', NODE_ENV: 'production' })).toThrow(ConfigError);
    expect(() => buildConfig({ ...env, DELAY_MINUTE_MS: '50', NODE_ENV: 'production' })).toThrow(/DELAY_MINUTE_MS/);
    expect(buildConfig({ ...env, NODE_ENV: 'production' }).minuteMs).toBe(60_000);
  });
  it('reads the result watchdog settings (30 minutes, 3 attempts by default) and refuses a zero', () => {
    expect(buildConfig(env)).toMatchObject({ stepResultTimeoutMinutes: 30, stepResultMaxAttempts: 3 });
    expect(buildConfig({ ...env, STEP_RESULT_TIMEOUT_MINUTES: '90', STEP_RESULT_MAX_ATTEMPTS: '5' })).toMatchObject({ stepResultTimeoutMinutes: 90, stepResultMaxAttempts: 5 });
    expect(() => buildConfig({ ...env, STEP_RESULT_TIMEOUT_MINUTES: '0' })).toThrow(/STEP_RESULT_TIMEOUT_MINUTES/);
    expect(() => buildConfig({ ...env, STEP_RESULT_MAX_ATTEMPTS: '0' })).toThrow(/STEP_RESULT_MAX_ATTEMPTS/);
  });
});

describe('batch ids', () => {
  it('makes distinct, well-formed UUIDv7s carrying the time, and 22-character base62 tokens', () => {
    const now = Date.UTC(2026, 10, 21, 6, 0, 0);
    const batch = new UuidArray(1000, now);
    const ids = Array.from({ length: batch.length }, (_, i) => batch.at(i));
    expect(new Set(ids).size).toBe(1000);
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(ids[0].replace(/-/g, '').slice(0, 12), 16)).toBe(now);
    const tokens = tokenBatch(1000);
    expect(new Set(tokens).size).toBe(1000);
    for (const t of tokens) expect(t).toMatch(/^[0-9A-Za-z]{22}$/);
  });

  it('starts each token with the minute it was made, so later links sort after earlier ones, and keeps 18 random characters', () => {
    const minute = Date.UTC(2026, 10, 21, 6, 0, 0);
    const early = tokenBatch(500, minute);
    const sameMinute = tokenBatch(500, minute + 59_999);
    const later = tokenBatch(500, minute + 60_000);
    // 2026-11-21 06:00 UTC is 1 519 560 minutes after 2024-01-01: "6NJ2" in base62.
    for (const token of [...early, ...sameMinute]) expect(token.slice(0, 4)).toBe('6NJ2');
    for (const token of later) expect(token.slice(0, 4)).toBe('6NJ3');
    expect(new Set([...early, ...sameMinute, ...later]).size).toBe(1500);
    // Byte order (PostgreSQL's C collations): every later token after every earlier one.
    const byBytes = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'latin1'), Buffer.from(b, 'latin1'));
    expect([...later, ...early].sort(byBytes).slice(500)).toEqual(expect.arrayContaining(later));
    // The random part uses the whole alphabet.
    const characters = new Set(early.flatMap((token) => [...token.slice(4)]));
    expect(characters.size).toBe(62);
    expect(reviewToken(minute)).toMatch(/^6NJ2[0-9A-Za-z]{18}$/);
  });

  it("lays the ids out as PostgreSQL's binary uuid[]: one dimension, no NULLs, uuid elements of 16 bytes", () => {
    const batch = new UuidArray(3, Date.UTC(2026, 10, 21, 6, 0, 0));
    const header = [0, 4, 8, 12, 16].map((at) => batch.bytes.readInt32BE(at));
    expect(header).toEqual([1, 0, 2950, 3, 1]);
    expect(batch.bytes.length).toBe(20 + 3 * 20);
    for (let i = 0; i < 3; i++) {
      expect(batch.bytes.readInt32BE(20 + i * 20)).toBe(16);
      expect(batch.bytes.toString('hex', 24 + i * 20, 40 + i * 20)).toBe(batch.at(i).replace(/-/g, ''));
    }
  });
});
