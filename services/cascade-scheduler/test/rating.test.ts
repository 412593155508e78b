import { busV1, eventsV1 } from '@rrs/proto';
import { InvalidError } from '@rrs/runtime';
import { StepResultPublisher } from '@rrs/sender-kit';
import { waitFor } from '@rrs/testkit';
import { LOCATION, ORG, rejection, startHarness, type Harness } from './harness';

const MINUTE = 40;

describe('ratings, feedback and unsubscribe (Postgres + JetStream)', () => {
  let h: Harness;
  let flowId: string;

  beforeAll(async () => {
    h = await startHarness({ minuteMs: MINUTE, feedbackWindowMinutes: 100, sender: { channels: ['EMAIL', 'SMS'] }, collectEvents: true });
    // The SMS follows 10 flow minutes (400 ms) after the email.
    flowId = (await h.scheduler.flows.create({ organizationId: ORG, name: 'two', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 10 }] })).id;
  });
  afterAll(async () => {
    await h.close();
  });

  async function startOne(email: string, phone: string) {
    const { result } = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId, channel: '', externalId: `ext-${email}`, recipients: [{ name: 'Rita', email, phone }] });
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].steps[0].status === 'sent', { what: 'first step sent' });
    const { rows } = await h.pool.query('SELECT rr.token FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1', [result.id]);
    return { cascadeId: result.id, token: rows[0].token as string };
  }

  const finishEvents = (email: string) =>
    h.events.events.filter((e) => e.type === 'cascade.recipient.finished' && e.payload?.$case === 'cascadeRecipientFinished' && e.payload.cascadeRecipientFinished.recipient?.email === email);

  it('a rating cancels the pending steps and finishes the recipient; a second submit never counts twice', async () => {
    const { cascadeId, token } = await startOne('rate5@example.com', '+79000002001');
    const form = await h.scheduler.reviews.getForm(token, true);
    expect(form).toMatchObject({ locationName: 'Coffee on Tverskaya', rating: 0, locale: 'en', reviewLinks: [{ provider: 'google', url: 'https://g.example/review' }] });
    const first = await h.scheduler.reviews.submitRating(token, 5);
    expect(first).toMatchObject({ recorded: true, feedbackRequested: false, form: { rating: 5 } });
    const again = await h.scheduler.reviews.submitRating(token, 1);
    expect(again).toMatchObject({ recorded: false, form: { rating: 5 } });

    // Past the SMS's due time: nothing more is sent.
    await new Promise((r) => setTimeout(r, 12 * MINUTE));
    const c = await h.scheduler.cascades.get(ORG, cascadeId);
    expect(c.status).toBe('finished');
    expect(c.recipients[0]).toMatchObject({ status: 'finished', finishReason: 'rated', rating: 5 });
    expect(c.recipients[0].steps.map((s) => s.status)).toEqual(['sent', 'canceled']);
    expect(h.sender.received.filter((s) => s.recipient?.email === 'rate5@example.com').map((s) => s.channel)).toEqual(['EMAIL']);
    const { rows } = await h.pool.query('SELECT count(*)::int AS n FROM ratings r JOIN review_requests rr ON rr.id = r.review_request_id WHERE rr.token = $1', [token]);
    expect(rows[0].n).toBe(1);
    const { rows: rr } = await h.pool.query('SELECT status, opened_at, rated_at, public_links_shown_at FROM review_requests WHERE token = $1', [token]);
    expect(rr[0]).toMatchObject({ status: 'rated', opened_at: expect.any(Date), rated_at: expect.any(Date), public_links_shown_at: expect.any(Date) });
    const ev = await waitFor(() => finishEvents('rate5@example.com')[0], { what: 'finish event' });
    expect(ev.payload?.$case === 'cascadeRecipientFinished' && ev.payload.cascadeRecipientFinished).toMatchObject({ rating: 5, reason: 'rated', cascadeExternalId: 'ext-rate5@example.com' });
    expect(finishEvents('rate5@example.com')).toHaveLength(1);
  });

  it('a step in flight when the customer rated is reported sent when its result comes, in the API and in the finish event not yet out', async () => {
    // No sender takes MAX here, so the step stays dispatched until the result below.
    const { result } = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: 'MAX', externalId: '', recipients: [{ name: 'Ina', email: '', phone: '+79000002099' }] });
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].steps[0].status === 'dispatched', { what: 'MAX step dispatched' });
    const { rows } = await h.pool.query<{ token: string; step_id: string; attempt: number }>(
      'SELECT rr.token, s.id AS step_id, s.attempt FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id JOIN recipient_steps s ON s.recipient_id = r.id WHERE r.cascade_id = $1',
      [result.id],
    );
    const { token, step_id: stepId, attempt } = rows[0];
    // A low rating: the finish event is held for the feedback, so it is still in the outbox.
    await h.scheduler.reviews.submitRating(token, 2);
    const heldEvent = async () => {
      const { rows: outbox } = await h.pool.query<{ payload: Buffer }>('SELECT o.payload FROM outbox o JOIN recipients r ON r.id = o.recipient_id WHERE r.cascade_id = $1 AND o.published_at IS NULL', [result.id]);
      const event = eventsV1.Event.decode(outbox[0].payload);
      return event.payload?.$case === 'cascadeRecipientFinished' ? event.payload.cascadeRecipientFinished : undefined;
    };
    expect((await heldEvent())?.steps[0].status).toBe('dispatched');

    await new StepResultPublisher(h.tb.bus).publish({ stepId, attemptId: `${stepId}:${attempt}`, channel: 'MAX' } as busV1.StepDue, { outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, reason: '', parts: 1 });
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].steps[0].status === 'sent', { what: 'the step reported sent' });
    expect((await h.scheduler.cascades.get(ORG, result.id)).recipients[0]).toMatchObject({ status: 'finished', finishReason: 'rated', rating: 2 });
    expect((await heldEvent())?.steps[0]).toMatchObject({ status: 'sent', sentAt: expect.any(Date) });
  });

  it('a low rating asks for private feedback, still records the public links as shown, and its finish event carries the feedback', async () => {
    const { token } = await startOne('low@example.com', '+79000002002');
    const res = await h.scheduler.reviews.submitRating(token, 2);
    expect(res).toMatchObject({ recorded: true, feedbackRequested: true, form: { rating: 2, lowRatingThreshold: 3 } });
    expect(res.form?.reviewLinks).toHaveLength(1);
    // The event waits for the feedback.
    await new Promise((r) => setTimeout(r, 300));
    expect(finishEvents('low@example.com')).toHaveLength(0);
    const fb = await h.scheduler.reviews.submitFeedback(token, '  The coffee was cold  ');
    expect(fb).toMatchObject({ recorded: true, form: { feedbackGiven: true } });
    expect((await h.scheduler.reviews.submitFeedback(token, 'again')).recorded).toBe(false);
    const ev = await waitFor(() => finishEvents('low@example.com')[0], { what: 'finish event' });
    expect(ev.payload?.$case === 'cascadeRecipientFinished' && ev.payload.cascadeRecipientFinished).toMatchObject({ rating: 2, feedback: 'The coffee was cold', reason: 'rated' });
    const { rows } = await h.pool.query('SELECT status, feedback_at, public_links_shown_at FROM review_requests WHERE token = $1', [token]);
    expect(rows[0]).toMatchObject({ status: 'feedback', feedback_at: expect.any(Date), public_links_shown_at: expect.any(Date) });
  });

  it('the organization threshold decides what is low', async () => {
    await h.scheduler.reviews.setSettings(ORG, 4);
    try {
      const { token } = await startOne('four@example.com', '');
      expect((await h.scheduler.reviews.submitRating(token, 4)).feedbackRequested).toBe(true);
    } finally {
      await h.scheduler.reviews.setSettings(ORG, 3);
    }
    expect(await rejection(h.scheduler.reviews.setSettings(ORG, 6))).toMatchObject({ status: 400, code: 'invalid_request' });
  });

  it('a rating after the recipient finished is recorded and reported as cascade.recipient.rated, once', async () => {
    const { result } = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: 'EMAIL', externalId: 'late-1', recipients: [{ name: 'Lena', email: 'late@example.com', phone: '' }] });
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].status === 'finished', { what: 'recipient finished' });
    const finished = await waitFor(() => finishEvents('late@example.com')[0], { what: 'finish event' });
    expect(finished.payload?.$case === 'cascadeRecipientFinished' && finished.payload.cascadeRecipientFinished).toMatchObject({ reason: 'exhausted', rating: 0 });
    const { rows } = await h.pool.query('SELECT rr.token FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1', [result.id]);
    expect(await h.scheduler.reviews.submitRating(rows[0].token, 5)).toMatchObject({ recorded: true });
    expect(await h.scheduler.reviews.submitRating(rows[0].token, 2)).toMatchObject({ recorded: false });
    const lateEvents = () => h.events.events.filter((e) => e.type === 'cascade.recipient.rated' && e.payload?.$case === 'cascadeRecipientFinished' && e.payload.cascadeRecipientFinished.recipient?.email === 'late@example.com');
    const rated = await waitFor(() => lateEvents()[0], { what: 'cascade.recipient.rated' });
    expect(rated.payload?.$case === 'cascadeRecipientFinished' && rated.payload.cascadeRecipientFinished).toMatchObject({ rating: 5, reason: 'exhausted', cascadeExternalId: 'late-1', steps: [{ status: 'sent' }] });
    expect(rated.id).not.toBe(finished.id);
    expect((await h.scheduler.cascades.get(ORG, result.id)).recipients[0]).toMatchObject({ status: 'finished', finishReason: 'exhausted', rating: 5 });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(lateEvents()).toHaveLength(1);
    expect(finishEvents('late@example.com')).toHaveLength(1);
  });

  it('a review-request link behaves like a cascade link', async () => {
    const { result } = await h.scheduler.reviews.create({ organizationId: ORG, locationId: LOCATION, customerName: 'Ivan', contact: 'ivan@example.com' });
    const rr = result.reviewRequest!;
    expect(rr).toMatchObject({ status: 'created', url: `http://reviews.test/r/${rr.token}` });
    expect((await h.scheduler.reviews.getForm(rr.token, true)).locationName).toBe('Coffee on Tverskaya');
    const res = await h.scheduler.reviews.submitRating(rr.token, 1);
    expect(res).toMatchObject({ recorded: true, feedbackRequested: true });
    expect((await h.scheduler.reviews.submitRating(rr.token, 5)).recorded).toBe(false);
    await h.scheduler.reviews.submitFeedback(rr.token, 'rude staff');
    const { rows } = await h.pool.query('SELECT status, opened_at IS NOT NULL AS opened FROM review_requests WHERE id = $1', [rr.id]);
    expect(rows[0]).toEqual({ status: 'feedback', opened: true });
    // Reported as review_request.rated, held for the feedback and carrying it, once.
    const rated = await waitFor(() => h.events.events.find((e) => e.type === 'review_request.rated' && e.payload?.$case === 'reviewRequestRated' && e.payload.reviewRequestRated.reviewRequestId === rr.id), { what: 'review_request.rated' });
    expect(rated.payload?.$case === 'reviewRequestRated' && rated.payload.reviewRequestRated).toMatchObject({ rating: 1, feedback: 'rude staff', customerName: 'Ivan', contact: 'ivan@example.com', locationId: LOCATION });
    expect(h.events.events.filter((e) => e.type === 'review_request.rated' && e.payload?.$case === 'reviewRequestRated' && e.payload.reviewRequestRated.reviewRequestId === rr.id)).toHaveLength(1);
    expect(await rejection(h.scheduler.reviews.create({ organizationId: ORG, locationId: 'nope', customerName: '', contact: '' }))).toMatchObject({ status: 404, code: 'not_found' });
  });

  it('rejects a bad rating, feedback before a rating, and unknown or malformed tokens, changing nothing', async () => {
    const { token } = await startOne('bad@example.com', '');
    expect(await rejection(h.scheduler.reviews.submitRating(token, 0))).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(await rejection(h.scheduler.reviews.submitRating(token, 6))).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(await rejection(h.scheduler.reviews.submitFeedback(token, 'x'))).toMatchObject({ status: 409, code: 'not_rated' });
    await expect(h.scheduler.reviews.submitFeedback(token, '')).rejects.toBeInstanceOf(InvalidError);
    for (const bad of ['short', 'A'.repeat(22), "'; DROP TABLE x; --aaaaaaa"]) {
      expect(await rejection(h.scheduler.reviews.getForm(bad, true))).toMatchObject({ status: 404, code: 'not_found' });
      expect(await rejection(h.scheduler.reviews.submitRating(bad, 5))).toMatchObject({ status: 404, code: 'not_found' });
    }
    const { rows } = await h.pool.query('SELECT rr.status, r.status AS recipient FROM review_requests rr JOIN recipients r ON r.id = rr.recipient_id WHERE rr.token = $1', [token]);
    expect(rows[0]).toEqual({ status: 'created', recipient: 'running' });
  });

  it('unsubscribe opts the email out for the organization, finishes the recipient unsubscribed, and later cascades skip it', async () => {
    const { cascadeId, token } = await startOne('unsub@example.com', '+79000002003');
    const res = await h.scheduler.reviews.unsubscribe({ token, oneClick: false });
    expect(res).toMatchObject({ recorded: true, form: { unsubscribed: true, email: 'unsub@example.com' } });
    const c = await h.scheduler.cascades.get(ORG, cascadeId);
    expect(c.recipients[0]).toMatchObject({ finishReason: 'unsubscribed' });
    expect(c.recipients[0].steps.map((s) => s.status)).toEqual(['sent', 'canceled']);
    const { result } = await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: '', channel: 'EMAIL', externalId: '', recipients: [{ name: '', email: 'Unsub@Example.com', phone: '' }] });
    const later = await waitFor(async () => {
      const x = await h.scheduler.cascades.get(ORG, result.id);
      return x.status === 'finished' ? x : undefined;
    }, { what: 'second cascade finished' });
    expect(later.recipients[0].steps[0]).toMatchObject({ status: 'skipped', reason: 'opted_out' });
    expect(h.sender.received.filter((s) => s.recipient?.email?.toLowerCase() === 'unsub@example.com')).toHaveLength(1);
  });
});
