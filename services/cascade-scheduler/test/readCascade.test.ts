import type { Pool } from '@rrs/runtime';
import { readCascade } from '../src/readCascade';
import { LOCATION, ORG, OTHER_ORG, startHarness, type Harness } from './harness';

/**
 * GET /cascades/{id} (readCascade.ts): the cascade, its recipients with their steps and its counts come
 * back from one statement, with every time as node-postgres reads it, and counts equal to the list's.
 * The recipients here have no contact, so each finished `unreachable` at intake with its steps skipped:
 * nothing else changes them while a test rewrites their rows.
 */
describe('reading a cascade', () => {
  let h: Harness;
  let flowId: string;

  beforeAll(async () => {
    h = await startHarness();
    flowId = (await h.scheduler.flows.create({ organizationId: ORG, name: 'email-then-sms-read', isDefault: false, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 60 }] })).id;
  });
  afterAll(() => h.close());

  async function startUnreachable(externalId: string, recipients: number): Promise<string> {
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: '', flowId, channel: '', externalId, recipients: Array.from({ length: recipients }, (_, i) => ({ name: `Nobody ${i}`, email: '', phone: '' })),
    });
    return result.id;
  }

  /** h.pool, counting the statements sent through it and through the clients it hands out. */
  function countingPool(): { pool: Pool; statements: () => number } {
    let statements = 0;
    const counted = <T extends object>(target: T): T =>
      new Proxy(target, {
        get(object, key) {
          const value = Reflect.get(object, key, object) as unknown;
          if (key === 'query') return (...args: unknown[]) => { statements++; return (value as (...a: unknown[]) => unknown).apply(object, args); };
          if (key === 'connect') return async () => counted(await (value as () => Promise<object>).call(object));
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(object) : value;
        },
      });
    return { pool: counted(h.pool), statements: () => statements };
  }

  it('is one statement: one request to PostgreSQL whatever the number of recipients', async () => {
    const id = await startUnreachable('read-one-statement', 40);
    const { pool, statements } = countingPool();
    const cascade = await readCascade(pool, ORG, id);
    expect(cascade.recipients).toHaveLength(40);
    expect(cascade.recipients.every((r) => r.steps.length === 2)).toBe(true);
    expect(statements()).toBe(1);
    await expect(readCascade(h.pool, OTHER_ORG, id)).rejects.toMatchObject({ kind: 'not_found' });
  });

  it("shows each time as the driver reads it (to the millisecond, truncated), recipients in position order, one without steps with none", async () => {
    const id = await startUnreachable('read-times', 3);
    await h.pool.query(
      `UPDATE recipient_steps s SET skipped_at = timestamptz '2026-05-01 12:00:01.999999+00', sent_at = timestamptz '1969-12-31 23:59:59.9995+00',
              delivered_at = timestamptz '2026-05-01 15:00:00.0005+03', dispatched_at = now(), due_at = now() + interval '1.5 ms'
         FROM recipients r WHERE r.id = s.recipient_id AND r.cascade_id = $1`,
      [id],
    );
    await h.pool.query(`UPDATE recipients SET finished_at = timestamptz '2026-05-01 12:00:00.000999+00', window_closes_at = now(), rated_at = now() - interval '0.7 ms' WHERE cascade_id = $1`, [id]);
    await h.pool.query(`UPDATE review_requests rr SET opened_at = now() + interval '0.3 ms' FROM recipients r WHERE r.review_request_id = rr.id AND r.cascade_id = $1`, [id]);
    await h.pool.query(`DELETE FROM recipient_steps s USING recipients r WHERE r.id = s.recipient_id AND r.cascade_id = $1 AND r.position = 1`, [id]);

    const cascade = await readCascade(h.pool, ORG, id);
    const { rows: recipients } = await h.pool.query(
      `SELECT r.id, r.rated_at, r.finished_at, r.window_closes_at, rr.opened_at FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1 ORDER BY r.position`,
      [id],
    );
    const { rows: steps } = await h.pool.query(
      `SELECT s.due_at, s.sent_at, s.skipped_at, s.dispatched_at, s.delivered_at FROM recipient_steps s JOIN recipients r ON r.id = s.recipient_id WHERE r.cascade_id = $1 AND r.position = 0 ORDER BY s.step_order`,
      [id],
    );
    expect(cascade.recipients.map((r) => [r.id, r.ratedAt, r.finishedAt, r.windowClosesAt, r.openedAt])).toEqual(recipients.map((r) => [r.id, r.rated_at, r.finished_at, r.window_closes_at, r.opened_at]));
    expect(cascade.recipients[0].steps.map((s) => [s.dueAt, s.sentAt, s.skippedAt, s.dispatchedAt, s.deliveredAt])).toEqual(steps.map((s) => [s.due_at, s.sent_at, s.skipped_at, s.dispatched_at, s.delivered_at]));
    expect(cascade.recipients[0].steps.map((s) => [s.skippedAt?.toISOString(), s.sentAt?.toISOString(), s.deliveredAt?.toISOString()])).toEqual([
      ['2026-05-01T12:00:01.999Z', '1969-12-31T23:59:59.999Z', '2026-05-01T12:00:00.000Z'],
      ['2026-05-01T12:00:01.999Z', '1969-12-31T23:59:59.999Z', '2026-05-01T12:00:00.000Z'],
    ]);
    expect(cascade.recipients[0].finishedAt?.toISOString()).toBe('2026-05-01T12:00:00.000Z');
    expect(cascade.recipients[1].steps).toEqual([]);
  });

  it('counts as the cascade list counts, each recipient and step once', async () => {
    const id = await startUnreachable('read-counts', 6);
    // A mix: two rated (one with feedback, one opened), one canceled; steps sent, delivered, undelivered, failed, pending.
    await h.pool.query(
      `UPDATE recipients SET finish_reason = CASE position WHEN 0 THEN 'rated' WHEN 1 THEN 'rated' WHEN 2 THEN 'canceled' ELSE finish_reason END,
              status = CASE position WHEN 5 THEN 'running' ELSE status END, feedback = CASE position WHEN 0 THEN 'cold coffee' WHEN 1 THEN '' END
        WHERE cascade_id = $1`,
      [id],
    );
    await h.pool.query(`UPDATE review_requests rr SET opened_at = now() FROM recipients r WHERE r.review_request_id = rr.id AND r.cascade_id = $1 AND r.position = 1`, [id]);
    await h.pool.query(
      `UPDATE recipient_steps s SET status = CASE WHEN r.position = 0 THEN 'sent' WHEN r.position = 1 AND s.step_order = 1 THEN 'failed' WHEN r.position = 5 THEN 'scheduled' ELSE s.status END,
              delivered_at = CASE WHEN r.position = 0 AND s.step_order = 1 THEN now() END,
              reason = CASE WHEN r.position = 0 AND s.step_order = 2 THEN 'undelivered: blocked' ELSE s.reason END
         FROM recipients r WHERE r.id = s.recipient_id AND r.cascade_id = $1`,
      [id],
    );
    const counts = Object.fromEntries((await readCascade(h.pool, ORG, id)).counts.map((c) => [c.key, c.value]));
    const listed = (await h.scheduler.cascades.list({ organizationId: ORG, limit: 0, after: '', externalId: 'read-counts', status: '', withCounts: true })).cascades[0];
    expect(Object.fromEntries(listed.counts.map((c) => [c.key, c.value]))).toEqual(counts);
    expect(counts).toEqual({
      recipients: 6, queued: 0, skipped: 6, running: 1, waiting: 0, finished: 5, rated: 2, exhausted: 0, unreachable: 3, unsubscribed: 0, canceled: 1, cooldown: 0, noConsent: 0,
      opened: 1, feedback: 1, stepsSent: 2, stepsFailed: 1, stepsSkipped: 7, stepsPending: 2, stepsDelivered: 1, stepsUndelivered: 1,
    });
  });
});
