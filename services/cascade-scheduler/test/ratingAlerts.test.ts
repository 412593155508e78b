import { STAFF_CHAT_SUBJECT, staffChatBusV1, SYSTEM_EMAIL_SUBJECT, systemEmailBusV1 } from '@rrs/proto';
import type { Subscription } from '@rrs/runtime';
import { waitFor } from '@rrs/testkit';
import { startRatingDigests } from '../src/ratingDigests';
import { LOCATION, ORG, OTHER_ORG, rejection, startHarness, type Harness } from './harness';

const OWNER = { id: 'member-owner', email: 'owner@coffee.example', name: 'Olga', role: 'owner' };
const ADMIN = { id: 'member-admin', email: 'admin@coffee.example', name: 'Artem', role: 'admin' };
const VIEWER = { id: 'member-viewer', email: 'viewer@coffee.example', name: 'Vera', role: 'viewer' };
const HOLD_MS = 600;
const ratingsQuery = { organizationId: ORG, maxRating: 0, withFeedback: false, locationId: '', limit: 0, after: '', handled: '', fromDay: '', toDay: '', timeZone: 'UTC', status: '', assignedTo: '' };

/**
 * Rating alerts, digests, staff chats and the inbox's workflow in the scheduler (Postgres + JetStream):
 * what is published on `steps.system.email` and `steps.system.bot`, once, to whom, and what the inbox
 * records. The senders' side (the emails and bot messages themselves) is tested in channel-email and
 * channel-messenger.
 */
describe('rating alerts and the ratings inbox workflow', () => {
  let h: Harness;
  const emails: systemEmailBusV1.SystemEmail[] = [];
  const chats: staffChatBusV1.StaffChatMessage[] = [];
  const subs: Subscription[] = [];
  let customer = 0;

  beforeAll(async () => {
    h = await startHarness({ sender: { channels: ['EMAIL'] }, config: { alertHoldMs: HOLD_MS } });
    h.profiles.members.set(ORG, [OWNER, ADMIN, VIEWER]);
    h.profiles.members.set(OTHER_ORG, [{ id: 'other-owner', email: 'boss@other.example', name: 'Boss', role: 'owner' }]);
    await h.scheduler.flows.create({ organizationId: ORG, name: 'email', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] });
    subs.push(
      await h.tb.bus.consume({ stream: 'STEPS', durable: 'test-system-email', filterSubject: SYSTEM_EMAIL_SUBJECT, concurrency: 8 }, async (msg) => {
        emails.push(systemEmailBusV1.SystemEmail.decode(msg.data));
        msg.ack();
      }),
      await h.tb.bus.consume({ stream: 'STEPS', durable: 'test-system-bot', filterSubject: STAFF_CHAT_SUBJECT, concurrency: 8 }, async (msg) => {
        chats.push(staffChatBusV1.StaffChatMessage.decode(msg.data));
        msg.ack();
      }),
    );
  });
  afterAll(async () => {
    for (const sub of subs) await sub.drain();
    await h.close();
  });

  /** A customer with a sent review request: its token and review request id. */
  async function customerWithLink(over: { email?: string; phone?: string; locationId?: string } = {}) {
    customer += 1;
    const email = over.email ?? `guest${customer}@example.com`;
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: over.locationId ?? LOCATION, name: '', flowId: '', channel: over.email === '' ? 'SMS' : 'EMAIL', externalId: `order-${customer}`,
      recipients: [{ name: `Guest ${customer}`, email, phone: over.phone ?? '' }],
    });
    const { rows } = await h.pool.query<{ token: string; id: string }>('SELECT rr.token, rr.id FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1', [result.id]);
    return { token: rows[0].token, reviewRequestId: rows[0].id, email };
  }

  const alertsOf = (reviewRequestId: string) => emails.filter((e) => e.kind === 'rating_alert' && e.ratings[0]?.link.endsWith(`/app/#/ratings/${reviewRequestId}`));
  const historyOf = async (reviewRequestId: string) => (await h.scheduler.reviews.getRating({ organizationId: ORG, reviewRequestId })).history;

  it('a low rating alerts each owner and admin by email once its hold passes (never the viewer, never the customer), logs it, and sets the response target', async () => {
    const { token, reviewRequestId, email } = await customerWithLink();
    const ratedAt = Date.now();
    await h.scheduler.reviews.submitRating(token, 2);
    const alerts = await waitFor(() => (alertsOf(reviewRequestId).length === 2 ? alertsOf(reviewRequestId) : undefined), { what: 'the alert emails' });
    expect(Date.now() - ratedAt).toBeGreaterThanOrEqual(HOLD_MS - 50);
    expect(alerts.map((a) => a.to).sort()).toEqual([ADMIN.email, OWNER.email]);
    expect(emails.some((e) => e.to === email || e.to === VIEWER.email)).toBe(false);
    expect(alerts[0]).toMatchObject({ organizationName: 'Coffee Co', locale: 'en', timeZone: 'UTC', ratings: [{ rating: 2, feedback: '', customerName: expect.stringMatching(/^Guest/), locationName: 'Coffee on Tverskaya', link: `http://reviews.test/app/#/ratings/${reviewRequestId}` }] });
    const history = await waitFor(async () => ((await historyOf(reviewRequestId)).length === 2 ? historyOf(reviewRequestId) : undefined), { what: 'the alerts logged' });
    expect(history.map((e) => [e.kind, e.target]).sort()).toEqual([['alerted', `email:${ADMIN.email}`], ['alerted', `email:${OWNER.email}`]]);
    const { rating } = await h.scheduler.reviews.getRating({ organizationId: ORG, reviewRequestId });
    // 2 hours of 09:00–21:00 working time, in UTC, from when it was rated.
    expect(rating).toMatchObject({ status: 'new', actionable: true, overdue: false, respondBy: expect.any(Date) });
    const { rows } = await h.pool.query('SELECT sent_to FROM rating_alerts WHERE review_request_id = $1', [reviewRequestId]);
    expect(rows[0].sent_to.sort()).toEqual([`email:${ADMIN.email}`, `email:${OWNER.email}`]);
  });

  it('feedback releases the waiting alert at once and it carries the feedback; feedback after the alert went is a second alert; a high rating alerts only for its feedback', async () => {
    await h.pool.query(`UPDATE organization_settings SET alert_threshold = 3 WHERE organization_id = $1`, [ORG]);
    const slow = await customerWithLink();
    // A hold far longer than the test: only the feedback can release it.
    await h.pool.query(`SELECT 1`);
    await h.scheduler.reviews.submitRating(slow.token, 1);
    await h.pool.query(`UPDATE rating_alerts SET due_at = now() + interval '1 hour' WHERE review_request_id = $1`, [slow.reviewRequestId]);
    await h.scheduler.reviews.submitFeedback(slow.token, 'The waiter was rude');
    const withFeedback = await waitFor(() => (alertsOf(slow.reviewRequestId).length === 2 ? alertsOf(slow.reviewRequestId) : undefined), { what: 'the released alerts' });
    expect(withFeedback.every((a) => a.ratings[0].feedback === 'The waiter was rude')).toBe(true);

    const late = await customerWithLink();
    await h.scheduler.reviews.submitRating(late.token, 3);
    await waitFor(() => alertsOf(late.reviewRequestId).length === 2 || undefined, { what: 'the rating alert' });
    await h.scheduler.reviews.submitFeedback(late.token, 'Cold coffee');
    const both = await waitFor(() => (alertsOf(late.reviewRequestId).length === 4 ? alertsOf(late.reviewRequestId) : undefined), { what: 'the feedback alert' });
    expect(both.filter((a) => a.ratings[0].feedback === 'Cold coffee')).toHaveLength(2);

    const happy = await customerWithLink();
    await h.scheduler.reviews.submitRating(happy.token, 5);
    const { rows } = await h.pool.query('SELECT count(*)::int AS n FROM rating_alerts WHERE review_request_id = $1', [happy.reviewRequestId]);
    expect(rows[0].n).toBe(0);
    expect((await h.scheduler.reviews.getRating({ organizationId: ORG, reviewRequestId: happy.reviewRequestId })).rating).toMatchObject({ actionable: false, respondBy: undefined });
    await h.scheduler.reviews.submitFeedback(happy.token, 'Lovely, but the music was loud');
    const forFeedback = await waitFor(() => (alertsOf(happy.reviewRequestId).length === 2 ? alertsOf(happy.reviewRequestId) : undefined), { what: "the high rating's feedback alert" });
    expect(forFeedback[0].ratings[0]).toMatchObject({ rating: 5, feedback: 'Lovely, but the music was loud' });
    expect((await h.scheduler.reviews.getRating({ organizationId: ORG, reviewRequestId: happy.reviewRequestId })).rating?.actionable).toBe(true);
  });

  it('an alert whose commit was lost is published again with the same ids, which the bus drops: each person gets it once', async () => {
    const { token, reviewRequestId } = await customerWithLink();
    await h.scheduler.reviews.submitRating(token, 1);
    await waitFor(() => alertsOf(reviewRequestId).length === 2 || undefined, { what: 'the alert' });
    await h.pool.query(`UPDATE rating_alerts SET sent_at = NULL WHERE review_request_id = $1`, [reviewRequestId]);
    await h.pool.query(`SELECT pg_notify('rrs_scheduler_alert', '0')`);
    await waitFor(async () => (await h.pool.query('SELECT sent_at FROM rating_alerts WHERE review_request_id = $1', [reviewRequestId])).rows[0].sent_at !== null || undefined, { what: 'sent again' });
    // A later alert's emails arrive after any copy of this one would have.
    const next = await customerWithLink();
    await h.scheduler.reviews.submitRating(next.token, 1);
    await waitFor(() => alertsOf(next.reviewRequestId).length === 2 || undefined, { what: 'the next alert' });
    expect(alertsOf(reviewRequestId)).toHaveLength(2);
  });

  it("the members' choices: instant, digest, off; a location's own threshold", async () => {
    await h.scheduler.reviews.setMemberAlerts({ organizationId: ORG, memberId: VIEWER.id, email: 'instant' });
    await h.scheduler.reviews.setMemberAlerts({ organizationId: ORG, memberId: ADMIN.id, email: 'off' });
    expect(await rejection(h.scheduler.reviews.setMemberAlerts({ organizationId: ORG, memberId: 'not-a-member', email: 'instant' }))).toMatchObject({ status: 400, details: { errors: [{ pointer: '/memberId' }] } });
    expect(await rejection(h.scheduler.reviews.setMemberAlerts({ organizationId: ORG, memberId: OWNER.id, email: 'sometimes' }))).toMatchObject({ status: 400, details: { errors: [{ pointer: '/email' }] } });
    // A location with a threshold of its own: a 4 alerts there, and only there.
    const strict = `${LOCATION}-strict`;
    const settings = await h.scheduler.reviews.getAlertSettings(ORG);
    await h.scheduler.reviews.setAlertSettings({ ...settings, locationThresholds: [{ locationId: strict, threshold: 4 }] });
    const there = await customerWithLink({ locationId: strict });
    const here = await customerWithLink();
    await h.scheduler.reviews.submitRating(there.token, 4);
    await h.scheduler.reviews.submitRating(here.token, 4);
    const alerts = await waitFor(() => (alertsOf(there.reviewRequestId).length === 2 ? alertsOf(there.reviewRequestId) : undefined), { what: 'the strict location alert' });
    expect(alerts.map((a) => a.to).sort()).toEqual([OWNER.email, VIEWER.email]);
    expect(alertsOf(here.reviewRequestId)).toEqual([]);
    await h.scheduler.reviews.setAlertSettings({ ...settings, locationThresholds: [] });
  });

  it('settings are refused by pointer with nothing changed: a threshold over 5, a zero target, bad hours, a bad reply-to, another organization’s location', async () => {
    const before = await h.scheduler.reviews.getAlertSettings(ORG);
    const refused = await rejection(
      h.scheduler.reviews.setAlertSettings({ ...before, threshold: 6, responseTargetMinutes: 0, workStart: '25:00', workDays: [8], replyTo: 'not an email', locationThresholds: [{ locationId: 'elsewhere', threshold: 2 }] }),
    );
    expect(refused.status).toBe(400);
    expect(refused.details.errors.map((e) => e.pointer).sort()).toEqual(['/replyTo', '/responseTargetMinutes', '/threshold', '/workingHours/days', '/workingHours/start']);
    const unknownLocation = await rejection(h.scheduler.reviews.setAlertSettings({ ...before, locationThresholds: [{ locationId: 'elsewhere', threshold: 2 }] }));
    expect(unknownLocation).toMatchObject({ status: 400, details: { errors: [{ pointer: '/locationThresholds/0/locationId' }] } });
    expect(await h.scheduler.reviews.getAlertSettings(ORG)).toEqual(before);
  });

  it('a daily digest goes once per member and local day, after 08:00, about the day before', async () => {
    await h.scheduler.reviews.setMemberAlerts({ organizationId: ORG, memberId: ADMIN.id, email: 'digest' });
    const { token, reviewRequestId } = await customerWithLink();
    await h.scheduler.reviews.submitRating(token, 2);
    await h.scheduler.reviews.submitFeedback(token, 'Too loud');
    await h.pool.query(`UPDATE ratings SET created_at = '2026-03-10T12:00:00Z', actionable_at = '2026-03-10T12:00:00Z' WHERE review_request_id = $1`, [reviewRequestId]);
    let clock = new Date('2026-03-11T07:59:00Z');
    const digests = startRatingDigests({ pool: h.pool, bus: h.tb.bus, logger: h.ctx.logger, profiles: h.profiles, publicBaseUrl: 'http://reviews.test', intervalMs: 3_600_000, now: () => clock });
    try {
      await digests.runOnce();
      clock = new Date('2026-03-11T08:01:00Z');
      await digests.runOnce();
      await digests.runOnce();
      const sent = await waitFor(() => {
        const found = emails.filter((e) => e.kind === 'rating_digest' && e.digest?.day === '2026-03-10');
        return found.length > 0 ? found : undefined;
      }, { what: 'the digest' });
      expect(sent).toHaveLength(1);
      expect(sent[0]).toMatchObject({ to: ADMIN.email, link: 'http://reviews.test/app/#/ratings', digest: { day: '2026-03-10', ratings: 1, average: 2, actionable: 1 } });
      expect(sent[0].ratings).toEqual([expect.objectContaining({ rating: 2, feedback: 'Too loud' })]);
      expect(emails.filter((e) => e.kind === 'rating_digest' && e.digest?.day === '2026-03-10' && e.to !== ADMIN.email)).toEqual([]);
    } finally {
      await digests.stop();
    }
    await h.scheduler.reviews.setMemberAlerts({ organizationId: ORG, memberId: ADMIN.id, email: 'instant' });
  });

  it('a staff chat linked with a code gets every alert through the bot until it is unlinked', async () => {
    const { code } = await h.scheduler.reviews.createStaffLinkCode({ organizationId: ORG, channel: 'TELEGRAM', memberId: OWNER.id });
    expect(await rejection(h.scheduler.reviews.claimBotLink({ code: code!.code, channel: 'MAX', chatId: '777' }))).toMatchObject({ status: 404, code: 'bot_link_invalid' });
    const claimed = await h.scheduler.reviews.claimBotLink({ code: code!.code, channel: 'TELEGRAM', chatId: '777' });
    expect(claimed).toMatchObject({ organizationId: ORG, staff: true, phone: '', locale: expect.any(String) });
    expect(await h.scheduler.reviews.claimBotLink({ code: code!.code, channel: 'TELEGRAM', chatId: '777' })).toEqual(claimed);
    expect(await rejection(h.scheduler.reviews.claimBotLink({ code: code!.code, channel: 'TELEGRAM', chatId: '778' }))).toMatchObject({ code: 'bot_link_invalid' });
    expect((await h.scheduler.reviews.listStaffChats(ORG)).chats).toEqual([expect.objectContaining({ channel: 'TELEGRAM', chatId: '777', linkedBy: OWNER.id })]);
    expect((await h.scheduler.reviews.listStaffChats(OTHER_ORG)).chats).toEqual([]);

    const { token, reviewRequestId } = await customerWithLink();
    await h.scheduler.reviews.submitRating(token, 1);
    await h.scheduler.reviews.submitFeedback(token, 'Never again');
    const message = await waitFor(() => chats.find((c) => c.ratings[0]?.link.endsWith(reviewRequestId)), { what: 'the staff chat alert' });
    expect(message).toMatchObject({ channel: 'TELEGRAM', chatId: '777', kind: 'rating_alert', organizationName: 'Coffee Co', ratings: [{ rating: 1, feedback: 'Never again' }] });
    await waitFor(async () => (await historyOf(reviewRequestId)).some((e) => e.kind === 'alerted' && e.target === 'TELEGRAM:777') || undefined, { what: 'the chat alert logged' });

    expect((await h.scheduler.reviews.unlinkStaffChat({ organizationId: OTHER_ORG, channel: 'TELEGRAM', chatId: '777' })).unlinked).toBe(0);
    expect((await h.scheduler.reviews.unlinkStaffChat({ organizationId: ORG, channel: 'TELEGRAM', chatId: '777' })).unlinked).toBe(1);
    const after = await customerWithLink();
    await h.scheduler.reviews.submitRating(after.token, 1);
    await h.scheduler.reviews.submitFeedback(after.token, 'Again');
    await waitFor(() => alertsOf(after.reviewRequestId).length > 0 || undefined, { what: 'the email alert' });
    expect(chats.some((c) => c.ratings[0]?.link.endsWith(after.reviewRequestId))).toBe(false);
  });

  it('the workflow: assign, note, resolve with a note, reopen; each change in the history with who; refusals change nothing', async () => {
    const { token, reviewRequestId } = await customerWithLink();
    await h.scheduler.reviews.submitRating(token, 2);
    const act = (over: Partial<Parameters<Harness['scheduler']['reviews']['updateRating']>[0]>) =>
      h.scheduler.reviews.updateRating({ organizationId: ORG, reviewRequestId, memberId: OWNER.id, action: 'note', assigneeId: '', note: '', ...over });
    expect(await rejection(act({ action: 'assign', assigneeId: 'stranger' }))).toMatchObject({ status: 400, details: { errors: [{ pointer: '/assigneeId' }] } });
    expect(await rejection(act({ action: 'resolve', note: '  ' }))).toMatchObject({ status: 400, details: { errors: [{ pointer: '/note' }] } });
    expect(await rejection(act({ action: 'reopen' }))).toMatchObject({ status: 409, code: 'rating_not_resolved' });
    expect(await rejection(act({ action: 'dance' }))).toMatchObject({ status: 400 });
    expect(await rejection(h.scheduler.reviews.updateRating({ organizationId: OTHER_ORG, reviewRequestId, memberId: 'other-owner', action: 'note', assigneeId: '', note: 'x' }))).toMatchObject({ status: 404 });
    expect((await historyOf(reviewRequestId)).filter((e) => e.kind !== 'alerted')).toEqual([]);

    expect((await act({ action: 'assign', assigneeId: ADMIN.id })).rating).toMatchObject({ status: 'in_progress', assignedTo: ADMIN.id });
    await act({ memberId: ADMIN.id, action: 'note', note: 'Called the customer' });
    expect((await h.scheduler.reviews.listRatings({ ...ratingsQuery, assignedTo: ADMIN.id })).ratings.map((r) => r.reviewRequestId)).toContain(reviewRequestId);
    expect((await act({ memberId: ADMIN.id, action: 'resolve', note: 'Apologised, free coffee next time' })).rating).toMatchObject({ status: 'resolved', handledBy: ADMIN.id, resolutionNote: 'Apologised, free coffee next time' });
    expect(await rejection(act({ action: 'assign', assigneeId: OWNER.id }))).toMatchObject({ status: 409, code: 'rating_resolved' });
    expect((await act({ action: 'reopen' })).rating).toMatchObject({ status: 'in_progress', handledAt: undefined, resolutionNote: '' });
    const history = (await historyOf(reviewRequestId)).filter((e) => e.kind !== 'alerted');
    expect(history.map((e) => [e.kind, e.memberId, e.text, e.target])).toEqual([
      ['assigned', OWNER.id, '', ADMIN.id],
      ['noted', ADMIN.id, 'Called the customer', ''],
      ['resolved', ADMIN.id, 'Apologised, free coffee next time', ''],
      ['reopened', OWNER.id, '', ''],
    ]);
    expect(history.every((e) => e.at instanceof Date)).toBe(true);
  });

  it('open and overdue items: the inbox filters and the overview counts them', async () => {
    const { token, reviewRequestId } = await customerWithLink();
    await h.scheduler.reviews.submitRating(token, 1);
    await h.scheduler.reviews.submitFeedback(token, 'Late order');
    await waitFor(async () => (await h.scheduler.reviews.getRating({ organizationId: ORG, reviewRequestId })).rating?.respondBy || undefined, { what: 'the target set' });
    const ids = async (status: string) => (await h.scheduler.reviews.listRatings({ ...ratingsQuery, status, limit: 100 })).ratings.map((r) => r.reviewRequestId);
    expect(await ids('open')).toContain(reviewRequestId);
    expect(await ids('overdue')).not.toContain(reviewRequestId);
    await h.pool.query(`UPDATE ratings SET respond_by = now() - interval '1 minute' WHERE review_request_id = $1`, [reviewRequestId]);
    expect(await ids('overdue')).toContain(reviewRequestId);
    expect((await h.scheduler.reviews.getRating({ organizationId: ORG, reviewRequestId })).rating?.overdue).toBe(true);
    const day = new Date().toISOString().slice(0, 10);
    const overview = await h.scheduler.reviews.overview({ organizationId: ORG, fromDay: day, toDay: day, timeZone: 'UTC' });
    const { rows } = await h.pool.query(`SELECT count(*) FILTER (WHERE handled_at IS NULL)::int AS open, count(*) FILTER (WHERE handled_at IS NULL AND respond_by < now())::int AS overdue FROM ratings WHERE organization_id = $1 AND actionable_at IS NOT NULL`, [ORG]);
    expect(overview).toMatchObject({ openItems: rows[0].open, overdueItems: rows[0].overdue });
    expect(overview.overdueItems).toBeGreaterThanOrEqual(1);
    await expect(ids('sideways')).rejects.toMatchObject({ kind: 'invalid' });
  });

  it('a reply to the customer goes by email with the Reply-To, once per reply id; refused with nothing sent when they left no email or opted out', async () => {
    const settings = await h.scheduler.reviews.getAlertSettings(ORG);
    await h.scheduler.reviews.setAlertSettings({ ...settings, replyTo: 'care@coffee.example' });
    const { token, reviewRequestId, email } = await customerWithLink();
    await h.scheduler.reviews.submitRating(token, 2);
    const reply = { organizationId: ORG, reviewRequestId, memberId: OWNER.id, memberEmail: OWNER.email, replyId: '0190e0e0-1111-7000-8000-000000000001', subject: '', text: 'We are sorry. The next coffee is on us.' };
    expect(await h.scheduler.reviews.replyToRating(reply)).toMatchObject({ to: email, sent: true });
    expect(await h.scheduler.reviews.replyToRating(reply)).toMatchObject({ to: email, sent: false });
    const sent = await waitFor(() => emails.find((e) => e.kind === 'customer_reply' && e.to === email), { what: 'the reply' });
    expect(sent).toMatchObject({ replyTo: 'care@coffee.example', text: 'We are sorry. The next coffee is on us.', subject: 'About your feedback on Coffee on Tverskaya', organizationName: 'Coffee Co' });
    expect((await historyOf(reviewRequestId)).filter((e) => e.kind === 'replied')).toEqual([expect.objectContaining({ memberId: OWNER.id, text: reply.text, target: email })]);

    const phoneOnly = await customerWithLink({ email: '', phone: '+79005550101' });
    await h.scheduler.reviews.submitRating(phoneOnly.token, 1);
    expect(await rejection(h.scheduler.reviews.replyToRating({ ...reply, reviewRequestId: phoneOnly.reviewRequestId, replyId: '0190e0e0-1111-7000-8000-000000000002' }))).toMatchObject({ status: 409, code: 'customer_has_no_email' });
    expect((await h.scheduler.reviews.getRating({ organizationId: ORG, reviewRequestId: phoneOnly.reviewRequestId })).replyRefusal).toBe('customer_has_no_email');

    const optedOut = await customerWithLink();
    await h.scheduler.reviews.submitRating(optedOut.token, 1);
    await h.scheduler.reviews.unsubscribe({ token: optedOut.token, oneClick: false });
    const refused = await rejection(h.scheduler.reviews.replyToRating({ ...reply, reviewRequestId: optedOut.reviewRequestId, replyId: '0190e0e0-1111-7000-8000-000000000003' }));
    expect(refused).toMatchObject({ status: 409, code: 'customer_opted_out' });
    expect((await historyOf(optedOut.reviewRequestId)).filter((e) => e.kind === 'replied')).toEqual([]);
    // Later alerts' emails have arrived; no reply went to either refused customer.
    await waitFor(() => alertsOf(optedOut.reviewRequestId).length > 0 || undefined, { what: 'a later email' });
    expect(emails.filter((e) => e.kind === 'customer_reply').map((e) => e.to)).toEqual([email]);
    await h.scheduler.reviews.setAlertSettings({ ...settings, replyTo: '' });
  });
});
