import { RATING_SUBMITTED_SUBJECT, RATINGS_DURABLE, ratingMsgId, ratingsBusV1 } from '@rrs/proto';
import { createPool, registry } from '@rrs/runtime';
import { freePort, waitFor } from '@rrs/testkit';
import { RATING_MAX_DELIVER, ratingRedeliveryDelayMs } from '../src/ratingIntake';
import type { RecordRating } from '../src/ratingIntake';
import { LOCATION, ORG, startHarness, type Harness } from './harness';

const MINUTE = 50;

/** A metric's value (summed over labels matching `labels`), read from the process registry. */
async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const found = await registry.getSingleMetric(name)?.get();
  return (found?.values ?? []).filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l)).reduce((sum, v) => sum + v.value, 0);
}

/** The error a real PostgreSQL connection attempt fails with when no server listens. */
async function refusedConnectionError(): Promise<unknown> {
  const dead = createPool({ url: `postgres://postgres@127.0.0.1:${await freePort()}/postgres`, schema: 'public' });
  try {
    return await dead.query('SELECT 1').then(() => new Error('expected a refusal'), (err: unknown) => err);
  } finally {
    await dead.end();
  }
}

describe('ratings intake: ratings accepted on the RATINGS stream (Postgres + JetStream)', () => {
  let h: Harness;
  let flowId: string;
  /** While set, the intake waits for it before recording (a scheduler that cannot record yet). */
  let hold: Promise<void> | null = null;
  /** Errors the next recordings fail with, one per attempt (a database that is down). */
  const failures: unknown[] = [];
  const attempts: Array<{ token: string; at: number }> = [];

  beforeAll(async () => {
    const wrap = (record: RecordRating): RecordRating => async (token, rating) => {
      attempts.push({ token, at: Date.now() });
      if (hold) await hold;
      const failure = failures.shift();
      if (failure) throw failure;
      return record(token, rating);
    };
    h = await startHarness({ minuteMs: MINUTE, sender: { channels: ['EMAIL', 'SMS'] }, deps: { recordRating: wrap } });
    // The SMS reminder follows 20 flow minutes (1 s) after the email.
    flowId = (await h.scheduler.flows.create({ organizationId: ORG, name: 'email, then SMS', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 20 }] })).id;
  });
  afterAll(async () => {
    await h.close();
  });

  async function startOne(email: string) {
    const { result } = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId, channel: '', externalId: email, recipients: [{ name: 'Rita', email, phone: '+79000003001' }] });
    const { rows } = await h.pool.query('SELECT rr.token FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1', [result.id]);
    return { cascadeId: result.id, token: rows[0].token as string };
  }

  const publishRating = (token: string, rating: number) =>
    h.tb.bus.publish(RATING_SUBMITTED_SUBJECT, ratingsBusV1.RatingSubmitted.encode({ token, rating, submittedAt: new Date() }).finish(), { msgId: ratingMsgId(token) });

  const sentTo = (email: string) => h.sender.received.filter((s) => s.recipient?.email === email).map((s) => s.channel);

  it('no step is dispatched while a rating waits on the stream; once it is recorded, the rated customer gets no reminder', async () => {
    const rated = await startOne('waits@example.com');
    await waitFor(() => sentTo('waits@example.com').length === 1, { what: 'the email sent' });
    let release!: () => void;
    hold = new Promise((resolve) => (release = resolve));
    const heldBefore = await metric('scheduler_dispatch_held_for_ratings_total');
    await publishRating(rated.token, 4);
    await waitFor(() => attempts.some((a) => a.token === rated.token), { what: 'the intake took the rating' });

    // Another customer's first step is due at once, and the rated one's SMS comes due: the dispatcher is held.
    const other = { email: 'other@example.com', ...(await startOne('other@example.com')) };
    await waitFor(async () => (await metric('scheduler_dispatch_held_for_ratings_total')) > heldBefore, { what: 'a dispatch round held' });
    await waitFor(async () => (await h.pool.query(`SELECT 1 FROM recipient_steps WHERE cascade_id = $1 AND channel = 'SMS' AND due_at < now()`, [rated.cascadeId])).rowCount === 1, { what: 'the SMS due' });
    expect(sentTo(other.email)).toEqual([]);
    expect(sentTo('waits@example.com')).toEqual(['EMAIL']);
    expect(await h.tb.bus.pending('RATINGS', RATINGS_DURABLE)).toBe(1);

    hold = null;
    release();
    await waitFor(() => sentTo(other.email).length === 1, { what: 'dispatching resumed' });
    const recipient = (await h.scheduler.cascades.get(ORG, rated.cascadeId)).recipients[0];
    expect(recipient).toMatchObject({ rating: 4, finishReason: 'rated' });
    expect(recipient.steps.map((step) => step.status)).toEqual(['sent', 'canceled']);
    expect(sentTo('waits@example.com')).toEqual(['EMAIL']);
    expect(await h.tb.bus.pending('RATINGS', RATINGS_DURABLE)).toBe(0);
  });

  it('while the database cannot be reached the rating is redelivered, and recorded once it is back', async () => {
    const { token } = await startOne('outage@example.com');
    const refused = await refusedConnectionError();
    failures.push(refused, refused, refused);
    const retriesBefore = await metric('scheduler_ratings_intake_total', { outcome: 'retry' });
    await publishRating(token, 5);
    await waitFor(async () => (await h.pool.query('SELECT rating FROM recipients WHERE review_request_id = (SELECT id FROM review_requests WHERE token = $1)', [token])).rows[0].rating === 5, { what: 'the rating recorded', timeoutMs: 15_000 });
    const tries = attempts.filter((a) => a.token === token);
    expect(tries).toHaveLength(4);
    // Redelivered after the backoff: 0.5 s, then 1 s, then 2 s.
    expect(tries[3].at - tries[2].at).toBeGreaterThanOrEqual(ratingRedeliveryDelayMs(3) - 50);
    expect((await metric('scheduler_ratings_intake_total', { outcome: 'retry' })) - retriesBefore).toBe(3);
    await waitFor(async () => (await h.tb.bus.pending('RATINGS', RATINGS_DURABLE)) === 0, { what: 'the message acked' });
  });

  it('the first rating stands: a later one for the same link is acked and changes nothing', async () => {
    const { token } = await startOne('twice@example.com');
    await h.scheduler.reviews.submitRating(token, 2);
    const duplicatesBefore = await metric('scheduler_ratings_intake_total', { outcome: 'duplicate' });
    await publishRating(token, 5);
    await waitFor(async () => (await metric('scheduler_ratings_intake_total', { outcome: 'duplicate' })) > duplicatesBefore, { what: 'the duplicate taken' });
    const { rows } = await h.pool.query('SELECT r.rating FROM ratings r JOIN review_requests rr ON rr.id = r.review_request_id WHERE rr.token = $1', [token]);
    expect(rows).toEqual([{ rating: 2 }]);
    await waitFor(async () => (await h.tb.bus.pending('RATINGS', RATINGS_DURABLE)) === 0, { what: 'the message acked' });
  });

  it('a rating for a link that does not exist is dropped at once and holds nothing', async () => {
    const refusedBefore = await metric('scheduler_ratings_intake_total', { outcome: 'refused' });
    await publishRating('A'.repeat(22), 3);
    await waitFor(async () => (await metric('scheduler_ratings_intake_total', { outcome: 'refused' })) > refusedBefore, { what: 'the rating refused' });
    await waitFor(async () => (await h.tb.bus.pending('RATINGS', RATINGS_DURABLE)) === 0, { what: 'the message terminated' });
    await startOne('after-unknown@example.com');
    await waitFor(() => sentTo('after-unknown@example.com').length === 1, { what: 'dispatching goes on' });
  });

  it('redelivery backs off from 0.5 s to 10 s and keeps a rating through more than a day of outage', () => {
    expect([1, 2, 3, 5, 6, 100].map(ratingRedeliveryDelayMs)).toEqual([500, 1_000, 2_000, 8_000, 10_000, 10_000]);
    let total = 0;
    for (let n = 1; n < RATING_MAX_DELIVER; n++) total += ratingRedeliveryDelayMs(n);
    expect(total / 3_600_000).toBeGreaterThan(24);
  });
});
