import { waitFor } from '@rrs/testkit';
import { LOCATION, ORG, OTHER_ORG, rejection, startHarness, type Harness } from './harness';

const OTHER_LOCATION = `${LOCATION}-b`;
const base = { limit: 0, after: '', externalId: '', status: '' };
const ratingsQuery = { organizationId: ORG, maxRating: 0, withFeedback: false, locationId: '', limit: 0, after: '', handled: '', fromDay: '', toDay: '', timeZone: 'UTC', status: '', assignedTo: '' };
const today = () => new Date().toISOString().slice(0, 10);

/**
 * What the console's data pages read and mark (Postgres + JetStream): cascades by location and date,
 * the ratings inbox's handled marks and dates, the public link clicks of the funnel and the overview's
 * stages by channel, a dry-run start, and migration 0012's indexes.
 */
describe('console data: filters, handled marks, public link clicks, overview by channel', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ sender: { channels: ['EMAIL'] } });
    await h.scheduler.flows.create({ organizationId: ORG, name: 'email', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] });
  });
  afterAll(async () => {
    await h.close();
  });

  async function startOne(email: string, locationId = LOCATION): Promise<{ cascadeId: string; token: string; reviewRequestId: string }> {
    const { result } = await h.scheduler.cascades.start({ organizationId: ORG, locationId, name: '', flowId: '', channel: '', externalId: `ext-${email}`, recipients: [{ name: 'Rita', email, phone: '' }] });
    await waitFor(async () => (await h.scheduler.cascades.get(ORG, result.id)).recipients[0].steps[0].status === 'sent', { what: 'step sent' });
    const { rows } = await h.pool.query('SELECT rr.token, rr.id FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1', [result.id]);
    return { cascadeId: result.id, token: rows[0].token, reviewRequestId: rows[0].id };
  }

  it('migration 0012: the inbox and externalId indexes, the handled columns and the clicks table', async () => {
    const { rows } = await h.pool.query(`SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN ('ratings_org_created', 'cascades_org_external_id') ORDER BY indexname`);
    expect(rows.map((r) => r.indexname)).toEqual(['cascades_org_external_id', 'ratings_org_created']);
    expect(rows[0].indexdef).toContain('(organization_id, external_id)');
    expect(rows[1].indexdef).toContain('(organization_id, created_at DESC)');
    const columns = await h.pool.query(`SELECT column_name FROM information_schema.columns WHERE table_name = 'ratings' AND column_name LIKE 'handled%' AND table_schema = current_schema() ORDER BY 1`);
    expect(columns.rows.map((r) => r.column_name)).toEqual(['handled_at', 'handled_by']);
  });

  it('ListCascades filters by location and by the days they were made', async () => {
    const here = await startOne('here@example.com');
    const there = await startOne('there@example.com', OTHER_LOCATION);
    const old = await startOne('old@example.com', OTHER_LOCATION);
    await h.pool.query(`UPDATE cascades SET created_at = '2026-01-10T12:00:00Z' WHERE id = $1`, [old.cascadeId]);
    const ids = async (over: Record<string, string>) => (await h.scheduler.cascades.list({ organizationId: ORG, ...base, ...over })).cascades.map((c) => c.id);
    expect(await ids({ locationId: OTHER_LOCATION })).toEqual([old.cascadeId, there.cascadeId]);
    expect(await ids({ locationId: LOCATION })).toEqual([here.cascadeId]);
    expect(await ids({ fromDay: '2026-01-10', toDay: '2026-01-10' })).toEqual([old.cascadeId]);
    expect(await ids({ fromDay: '2026-01-11', toDay: '2026-01-11' })).toEqual([]);
    // The day's bounds are the time zone's: 12:00 UTC is already the 11th in Kiritimati (UTC+14).
    expect(await ids({ fromDay: '2026-01-11', toDay: '2026-01-11', timeZone: 'Pacific/Kiritimati' })).toEqual([old.cascadeId]);
    expect(await ids({ fromDay: today(), locationId: OTHER_LOCATION })).toEqual([there.cascadeId]);
    expect(await ids({ toDay: '2026-01-10' })).toEqual([old.cascadeId]);
    // Another organization's filter sees none of them.
    expect((await h.scheduler.cascades.list({ organizationId: OTHER_ORG, ...base, locationId: OTHER_LOCATION })).cascades).toEqual([]);

    const bad = await rejection(h.scheduler.cascades.list({ organizationId: ORG, ...base, fromDay: '2026-13-01' }));
    expect(bad).toMatchObject({ status: 400, details: { errors: [{ parameter: 'from' }] } });
    const backwards = await rejection(h.scheduler.cascades.list({ organizationId: ORG, ...base, fromDay: '2026-02-01', toDay: '2026-01-01' }));
    expect(backwards).toMatchObject({ status: 400, details: { errors: [{ parameter: 'to' }] } });
  });

  it('ratings are marked handled once (first member and time kept), cleared, filtered by mark and day; another organization cannot mark', async () => {
    const first = await startOne('rated1@example.com');
    const second = await startOne('rated2@example.com');
    await h.scheduler.reviews.submitRating(first.token, 2);
    await h.scheduler.reviews.submitRating(second.token, 5);

    const marked = await h.scheduler.reviews.setRatingHandled({ organizationId: ORG, reviewRequestId: first.reviewRequestId, handled: true, memberId: 'member-a' });
    expect(marked.rating).toMatchObject({ reviewRequestId: first.reviewRequestId, rating: 2, handledBy: 'member-a', handledAt: expect.any(Date) });
    const again = await h.scheduler.reviews.setRatingHandled({ organizationId: ORG, reviewRequestId: first.reviewRequestId, handled: true, memberId: 'member-b' });
    expect(again.rating).toMatchObject({ handledBy: 'member-a', handledAt: marked.rating!.handledAt });

    const list = async (over: Partial<typeof ratingsQuery>) => (await h.scheduler.reviews.listRatings({ ...ratingsQuery, ...over })).ratings.map((r) => r.reviewRequestId);
    expect(await list({ handled: 'handled' })).toEqual([first.reviewRequestId]);
    expect(await list({ handled: 'unhandled' })).toEqual([second.reviewRequestId]);
    expect(await list({ fromDay: today(), toDay: today() })).toEqual([second.reviewRequestId, first.reviewRequestId]);
    expect(await list({ toDay: '2026-01-01' })).toEqual([]);

    // Another organization's mark: not found, and nothing changes.
    const foreign = await rejection(h.scheduler.reviews.setRatingHandled({ organizationId: OTHER_ORG, reviewRequestId: second.reviewRequestId, handled: true, memberId: 'intruder' }));
    expect(foreign).toMatchObject({ status: 404, code: 'not_found' });
    const unknown = await rejection(h.scheduler.reviews.setRatingHandled({ organizationId: ORG, reviewRequestId: 'not-an-id', handled: true, memberId: 'member-a' }));
    expect(unknown).toMatchObject({ status: 404 });
    expect(await list({ handled: 'unhandled' })).toEqual([second.reviewRequestId]);

    const cleared = await h.scheduler.reviews.setRatingHandled({ organizationId: ORG, reviewRequestId: first.reviewRequestId, handled: false, memberId: 'member-b' });
    expect(cleared.rating).toMatchObject({ handledBy: '', handledAt: undefined });
    expect(await list({ handled: 'handled' })).toEqual([]);
    expect(await rejection(h.scheduler.reviews.listRatings({ ...ratingsQuery, handled: 'maybe' }))).toMatchObject({ status: 400, details: { errors: [{ parameter: 'handled' }] } });
  });

  it('a public link click is recorded once per review request and site, only after a rating; the overview counts it, by channel too', async () => {
    const { token } = await startOne('clicker@example.com');
    const unrated = await rejection(h.scheduler.reviews.recordPublicLinkClick({ token, index: 0 }));
    expect(unrated).toMatchObject({ status: 404 });
    await h.scheduler.reviews.submitRating(token, 5);
    expect(await rejection(h.scheduler.reviews.recordPublicLinkClick({ token, index: 1 }))).toMatchObject({ status: 404 });
    expect(await rejection(h.scheduler.reviews.recordPublicLinkClick({ token: 'AAAAAAAAAAAAAAAAAAAAAA', index: 0 }))).toMatchObject({ status: 404 });
    const clicks = async () => (await h.pool.query('SELECT provider, url FROM public_link_clicks c JOIN review_requests rr ON rr.id = c.review_request_id WHERE rr.token = $1', [token])).rows;
    expect(await clicks()).toEqual([]);

    expect(await h.scheduler.reviews.recordPublicLinkClick({ token, index: 0 })).toEqual({ url: 'https://g.example/review', recorded: true });
    expect(await h.scheduler.reviews.recordPublicLinkClick({ token, index: 0 })).toEqual({ url: 'https://g.example/review', recorded: false });
    expect(await clicks()).toEqual([{ provider: 'google', url: 'https://g.example/review' }]);

    const overview = await h.scheduler.reviews.overview({ organizationId: ORG, fromDay: today(), toDay: today(), timeZone: 'UTC' });
    // Every request so far had its email sent; three were rated (two above, this one), one clicked.
    expect(overview.total).toMatchObject({ rated: 3, publicLinksShown: 3, publicLinkClicked: 1 });
    expect(overview.total!.requests).toBe(overview.total!.sent);
    const email = overview.byChannel.find((c) => c.channel === 'EMAIL');
    expect(email).toMatchObject({ rated: 3, clicked: 1 });
    expect(email!.opened).toBe(3);
    // A step's result applied after the customer had already opened, rated and clicked (a backlog of
    // results): the events still go to the channel that carried the message.
    await h.pool.query(`UPDATE recipient_steps SET sent_at = now() + interval '1 hour' WHERE sent_at IS NOT NULL AND recipient_id = (SELECT recipient_id FROM review_requests WHERE token = $1)`, [token]);
    const late = await h.scheduler.reviews.overview({ organizationId: ORG, fromDay: today(), toDay: today(), timeZone: 'UTC' });
    expect(late.byChannel.find((c) => c.channel === 'EMAIL')).toMatchObject({ opened: 3, rated: 3, clicked: 1 });
    const location = overview.byLocation.find((l) => l.locationId === LOCATION);
    expect(location?.counts).toMatchObject({ publicLinkClicked: 1 });
  });

  it('a dry-run start checks everything and creates nothing', async () => {
    const count = async () => (await h.pool.query('SELECT (SELECT count(*) FROM cascades)::int AS cascades, (SELECT count(*) FROM review_requests)::int AS links')).rows[0];
    const before = await count();
    const start = (recipients: Array<{ name: string; email: string; phone: string }>, locationId = LOCATION) =>
      h.scheduler.cascades.start({ organizationId: ORG, locationId, name: '', flowId: '', channel: '', externalId: '', recipients, dryRun: true });
    const ok = await start([{ name: 'A', email: 'dry@example.com', phone: '' }]);
    expect(ok).toMatchObject({ result: { id: '', queued: 0 }, replayed: false });
    const bad = await rejection(start([{ name: 'A', email: 'dry@example.com', phone: '' }, { name: 'B', email: '', phone: '12' }]));
    expect(bad).toMatchObject({ status: 400, details: { errors: [{ pointer: '/recipients/1/phone' }] } });
    expect(await rejection(start([{ name: 'A', email: 'dry@example.com', phone: '' }], 'nowhere'))).toMatchObject({ status: 404 });
    expect(await count()).toEqual(before);
  });
});
