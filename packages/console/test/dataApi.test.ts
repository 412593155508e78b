import { waitFor } from '@rrs/testkit';
import { addMember, DEMO_PASSWORD, signIn, startConsoleStack, type ConsoleStack, type Signed } from './consoleStack';

/**
 * The account API of the console's data pages on the real all-in-one: the ratings' handled marks
 * (owners and admins only), the date and location filters, the dry-run check of a send by hand, the
 * funnel's clicked stage and the cascade's opened times; every refusal with its status and code, and
 * nothing changed by it.
 */
describe('account API: data pages', () => {
  let stack: ConsoleStack;
  let base: string;
  let owner: Signed;
  let viewer: Signed;
  let locationId: string;

  beforeAll(async () => {
    stack = await startConsoleStack('data-api');
    base = stack.aio.url;
    owner = await signIn(base, 'demo@example.com', DEMO_PASSWORD);
    viewer = await addMember(stack, stack.aio.demo.organizationId, 'data-viewer@example.com', 'viewer');
    locationId = (await owner.call('GET', '/locations')).body.locations[0].id;
  }, 60_000);
  afterAll(() => stack.close());

  const cascadeCount = async () => (await owner.call('GET', '/cascades?limit=100')).body.cascades.length as number;

  /** Sends to one customer and rates their link through the form's pages, as the customer would. */
  async function ratedRequest(email: string, rating: number): Promise<{ cascadeId: string; token: string }> {
    const started = await owner.call('POST', '/cascades', { body: { locationId, externalId: `data-${email}`, recipients: [{ name: 'Rita', email }] } });
    expect(started.status).toBe(202);
    const link = await waitFor(async () => {
      const { messages } = (await (await fetch(`${base}/dev/messages`)).json()) as { messages: Array<{ channel: string; to: string; link: string }> };
      return messages.find((m) => m.channel === 'EMAIL' && m.to === email)?.link;
    }, { what: "the review request's email in the dev inbox" });
    const path = new URL(link).pathname;
    const form = await fetch(`${base}${path}`);
    const cookie = form.headers.get('set-cookie')!.split(';')[0];
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(await form.text())![1];
    const rated = await fetch(`${base}${path}/rating`, { method: 'POST', redirect: 'manual', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: `csrf=${csrf}&rating=${rating}` });
    expect(rated.status).toBe(303);
    return { cascadeId: started.body.id, token: path.split('/r/')[1] };
  }

  it('marks a rating handled (owner), keeps the first mark, clears it; the inbox filters by the mark', async () => {
    const { token } = await ratedRequest('handled@example.com', 2);
    const [rating] = (await owner.call('GET', '/ratings?handled=unhandled')).body.ratings;
    expect(rating).toMatchObject({ rating: 2, handledAt: null, handledBy: null });

    const marked = await owner.call('PUT', `/ratings/${rating.reviewRequestId}/handled`);
    expect(marked.status).toBe(200);
    expect(marked.body.rating).toMatchObject({ reviewRequestId: rating.reviewRequestId, handledAt: expect.any(String), handledBy: (await owner.call('GET', '/session')).body.member.id });
    expect((await owner.call('PUT', `/ratings/${rating.reviewRequestId}/handled`)).body.rating.handledAt).toBe(marked.body.rating.handledAt);
    expect((await owner.call('GET', '/ratings?handled=handled')).body.ratings.map((r: { reviewRequestId: string }) => r.reviewRequestId)).toEqual([rating.reviewRequestId]);
    expect((await owner.call('GET', '/ratings?handled=unhandled')).body.ratings).toEqual([]);

    const cleared = await owner.call('DELETE', `/ratings/${rating.reviewRequestId}/handled`);
    expect([cleared.status, cleared.body.rating.handledAt]).toEqual([200, null]);
    expect(token).toMatch(/^[0-9A-Za-z]{22}$/);
  });

  it('refuses a viewer the mark with 403 read_only_role, and an unknown or foreign rating with 404; nothing changes', async () => {
    const [rating] = (await owner.call('GET', '/ratings')).body.ratings;
    const refused = await viewer.call('PUT', `/ratings/${rating.reviewRequestId}/handled`);
    expect([refused.status, refused.body.code]).toEqual([403, 'read_only_role']);
    const refusedClear = await viewer.call('DELETE', `/ratings/${rating.reviewRequestId}/handled`);
    expect([refusedClear.status, refusedClear.body.code]).toEqual([403, 'read_only_role']);
    const noCsrf = await owner.call('PUT', `/ratings/${rating.reviewRequestId}/handled`, { csrf: null });
    expect([noCsrf.status, noCsrf.body.code]).toEqual([403, 'invalid_csrf_token']);
    expect((await viewer.call('GET', '/ratings')).body.ratings[0]).toMatchObject({ reviewRequestId: rating.reviewRequestId, handledAt: null });

    const unknown = await owner.call('PUT', '/ratings/0190e0e0-0000-7000-8000-00000000dead/handled');
    expect([unknown.status, unknown.body.code]).toEqual([404, 'not_found']);
    // Like every id of another organization or none: 404, whatever its form.
    const malformed = await owner.call('PUT', '/ratings/not-an-id/handled');
    expect([malformed.status, malformed.body.code]).toEqual([404, 'not_found']);
    // Another organization's owner cannot mark this organization's rating.
    const org = await stack.admin('POST', '/organizations', { name: 'Data Other', plan: 'standard', emailConfirmed: true });
    const other = await addMember(stack, org.body.organization.id, 'data-other@example.com', 'owner');
    const foreign = await other.call('PUT', `/ratings/${rating.reviewRequestId}/handled`);
    expect([foreign.status, foreign.body.code]).toEqual([404, 'not_found']);
    expect((await owner.call('GET', '/ratings?handled=handled')).body.ratings).toEqual([]);
  });

  it('filters ratings and cascades by days and location; a malformed or backwards range is 400 invalid_request', async () => {
    const today = new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Moscow', year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());
    expect((await owner.call('GET', `/ratings?from=${today}&to=${today}`)).body.ratings.length).toBeGreaterThan(0);
    expect((await owner.call('GET', '/ratings?to=2020-01-01')).body.ratings).toEqual([]);
    expect((await owner.call('GET', `/cascades?from=${today}&locationId=${locationId}`)).body.cascades.length).toBe(await cascadeCount());
    expect((await owner.call('GET', '/cascades?locationId=no-such-location')).body.cascades).toEqual([]);
    expect((await owner.call('GET', '/cascades?from=2020-01-01&to=2020-01-31')).body.cascades).toEqual([]);
    for (const path of ['/ratings?handled=maybe', '/ratings?from=2026-1-1', '/ratings?from=2026-02-01&to=2026-01-01', '/cascades?to=yesterday', '/cascades?from=2026-02-01&to=2026-01-01', '/cascades?from=2026-02-30', '/overview?from=2026-02-30&to=2026-03-01']) {
      const res = await owner.call('GET', path);
      expect({ path, status: res.status, code: res.body.code }).toEqual({ path, status: 400, code: 'invalid_request' });
    }
  });

  it('checks a send by hand without sending (POST /cascades/check): row errors by pointer, a viewer 403, nothing created', async () => {
    const before = await cascadeCount();
    const good = await owner.call('POST', '/cascades/check', { body: { locationId, recipients: [{ email: 'a@example.com' }, { phone: '+7 916 000-00-02', consentAt: '2026-05-01T12:00:00+03:00' }] } });
    expect([good.status, good.body]).toEqual([200, { recipients: 2 }]);
    const bad = await owner.call('POST', '/cascades/check', { body: { locationId, recipients: [{ email: 'a@example.com' }, { email: 'not-an-email' }, { phone: '12' }, { email: 'c@example.com', consentAt: 'yesterday' }] } });
    expect([bad.status, bad.body.code]).toEqual([400, 'invalid_request']);
    expect(bad.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual(['/recipients/1/email', '/recipients/3/consentAt']);
    // The phone is the scheduler's rule (the organization's region): checked once the body's shape is right.
    const phone = await owner.call('POST', '/cascades/check', { body: { locationId, recipients: [{ email: 'a@example.com' }, { phone: '12' }] } });
    expect([phone.status, phone.body.errors?.[0]?.pointer]).toEqual([400, '/recipients/1/phone']);
    const tooMany = await owner.call('POST', '/cascades/check', { body: { locationId, recipients: Array.from({ length: 501 }, (_, i) => ({ email: `r${i}@example.com` })) } });
    expect([tooMany.status, tooMany.body.code]).toEqual([400, 'invalid_request']);
    const nowhere = await owner.call('POST', '/cascades/check', { body: { locationId: 'no-such-location', recipients: [{ email: 'a@example.com' }] } });
    expect([nowhere.status, nowhere.body.code]).toEqual([404, 'not_found']);
    const refused = await viewer.call('POST', '/cascades/check', { body: { locationId, recipients: [{ email: 'a@example.com' }] } });
    expect([refused.status, refused.body.code]).toEqual([403, 'read_only_role']);
    expect(await cascadeCount()).toBe(before);
  });

  it('counts a public link click in the funnel and by channel, and shows when each recipient opened the form', async () => {
    const { cascadeId, token } = await ratedRequest('clicker@example.com', 5);
    const go = await fetch(`${base}/r/${token}/go/1`, { redirect: 'manual' });
    expect([go.status, go.headers.get('location'), go.headers.get('referrer-policy')]).toEqual([302, 'https://yandex.ru/maps/org/0/reviews/', 'no-referrer']);
    await fetch(`${base}/r/${token}/go/2`, { redirect: 'manual' });
    const overview = (await owner.call('GET', '/overview')).body;
    expect(overview.total).toMatchObject({ rated: 2, publicLinksShown: 2, publicLinkClicked: 1 });
    // The all-in-one's email sink reports no deliveries: "not reported", never a funnel that rises.
    expect(overview.byChannel).toEqual([{ channel: 'EMAIL', sent: overview.total.sent, delivered: null, receipts: false, opened: 2, rated: 2, clicked: 1 }]);
    expect(overview.total.delivered).toBeNull();
    const cascade = (await owner.call('GET', `/cascades/${cascadeId}`)).body;
    expect(cascade.recipients[0]).toMatchObject({ openedAt: expect.any(String), ratedAt: expect.any(String), rating: 5 });
    expect(cascade.recipients[0].steps[0]).toMatchObject({ channel: 'EMAIL', status: 'sent', provider: expect.any(String) });
  });
});
