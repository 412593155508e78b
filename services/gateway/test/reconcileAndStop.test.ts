import { openApiChecker, waitFor, type OpenApiChecker } from '@rrs/testkit';
import { startCascadeStack, type CascadeStack } from './cascadeStack';

/**
 * What an integrator needs to reconcile and stop, over real HTTP → gateway → gRPC → cascade-scheduler
 * → PostgreSQL + JetStream, every answer checked against the OpenAPI document: canceling a cascade (by
 * id, by externalId) and a review request and what the customer's link does then; finding cascades
 * (GET /cascades: filters, cursor pages stable under inserts); the ratings feed (GET /ratings: complete
 * after a gap, nothing twice); and the refusals of each, which change nothing.
 */
describe('integrators reconcile and stop', () => {
  let stack: CascadeStack;
  let api: OpenApiChecker;

  let otherLocationId: string;

  beforeAll(async () => {
    stack = await startCascadeStack();
    api = await openApiChecker(`${stack.base}/api/v1/openapi.json`);
    // The other organization starts cascades too (tenant isolation of the lists and cancels).
    otherLocationId = (await stack.contacts.directory.createLocation({ organizationId: stack.orgIds.other, name: 'Arbat', address: 'Arbat 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [] })).id;
    await stack.scheduler.flows.create({ organizationId: stack.orgIds.other, name: 'Email', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 1440 }] });
  });
  afterAll(() => stack.close());

  type Who = keyof CascadeStack['keys'];
  const call = (method: string, path: string, body?: unknown, who: Who = 'paid', headers: Record<string, string> = {}) =>
    api.fetch(`${stack.base}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.keys[who]}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const start = async (externalId: string, email: string, who: Who = 'paid') => {
    const res = await call('POST', '/cascades', { locationId: who === 'other' ? otherLocationId : stack.locationId, externalId, recipients: [{ name: 'Anna', email, phone: '+79161234567' }] }, who);
    expect(res.status).toBe(202);
    return (res.body as { id: string }).id;
  };
  const tokenOf = async (cascadeId: string) => (await waitFor(() => stack.sender.received.find((s) => s.cascadeId === cascadeId), { what: `the email of ${cascadeId}` })).reviewUrl.split('/r/')[1];
  const emailSent = (cascadeId: string) =>
    waitFor(async () => ((await call('GET', `/cascades/${cascadeId}`)).body as { recipients: Array<{ steps: Array<{ status: string }> }> }).recipients[0].steps[0].status === 'sent', { what: 'the email sent' });
  const outboxRows = async () => (await stack.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox')).rows[0].n;
  /** The review form's CSRF cookie and value, as a customer's browser holds them once the page was opened. */
  const openForm = async (token: string) => {
    const page = await fetch(`${stack.base}/r/${token}`);
    expect(page.status).toBe(200);
    return { cookie: (page.headers.get('set-cookie') ?? '').split(';')[0], csrf: /name="csrf" value="([0-9a-f]{32})"/.exec(await page.text())![1] };
  };
  const submitRating = (token: string, form: { cookie: string; csrf: string }, rating: number) =>
    fetch(`${stack.base}/r/${token}/rating`, { method: 'POST', headers: { cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: `rating=${rating}&csrf=${form.csrf}`, redirect: 'manual' });
  const ratingsOf = async (token: string) => (await stack.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ratings ra JOIN review_requests rr ON rr.id = ra.review_request_id WHERE rr.token = $1', [token])).rows[0].n;

  describe('POST /cascades/{id}/cancel', () => {
    it('200 with the cascade as GET shows it: the recipient finished canceled, its SMS canceled, the finish event written; the link says "no longer active" and takes no rating', async () => {
      const id = await start('refund-1001', 'refund@example.com');
      const token = await tokenOf(id);
      await emailSent(id);
      const form = await openForm(token);
      const events = await outboxRows();

      const res = await call('POST', `/cascades/${id}/cancel`);
      expect(res.status).toBe(200);
      expect(res.headers.get('idempotent-replayed')).toBeNull();
      expect(res.body).toMatchObject({
        id, status: 'finished', externalId: 'refund-1001',
        counts: { recipients: 1, running: 0, finished: 1, canceled: 1, stepsSent: 1, stepsPending: 0 },
        recipients: [{ status: 'finished', finishReason: 'canceled', rating: null, steps: [{ order: 1, status: 'sent' }, { order: 2, status: 'canceled' }] }],
      });
      expect((await call('GET', `/cascades/${id}`)).body).toEqual(res.body);
      const { rows } = await stack.pool.query('SELECT o.subject FROM outbox o JOIN recipients r ON r.id = o.recipient_id WHERE r.cascade_id = $1', [id]);
      expect(rows.map((r) => r.subject)).toEqual([expect.stringMatching(/cascade\.recipient\.finished$/)]);
      expect(await outboxRows()).toBe(events + 1);

      // The customer's link: a polite page in the organization's language, 410, and a rating is refused.
      const page = await fetch(`${stack.base}/r/${token}`);
      expect(page.status).toBe(410);
      expect(await page.text()).toContain('This request is no longer active');
      const rated = await submitRating(token, form, 2);
      expect(rated.status).toBe(410);
      expect(await ratingsOf(token)).toBe(0);
    });

    it('idempotent: a second cancel answers the same and writes nothing; the same Idempotency-Key replays; after a finish the outcome stays', async () => {
      const id = await start('refund-1002', 'twice@example.com');
      await emailSent(id);
      const first = await call('POST', `/cascades/${id}/cancel`, undefined, 'paid', { 'idempotency-key': 'refund-1002' });
      const rows = await outboxRows();
      const again = await call('POST', `/cascades/${id}/cancel`);
      expect([again.status, again.body]).toEqual([200, first.body]);
      const replay = await call('POST', `/cascades/${id}/cancel`, undefined, 'paid', { 'idempotency-key': 'refund-1002' });
      expect([replay.status, replay.headers.get('idempotent-replayed'), replay.body]).toEqual([200, 'true', first.body]);
      expect(await outboxRows()).toBe(rows);

      // A cascade whose recipient rated: canceling changes nothing.
      const ratedId = await start('rated-1003', 'rated@example.com');
      const token = await tokenOf(ratedId);
      expect((await submitRating(token, await openForm(token), 5)).status).toBe(303);
      await waitFor(async () => ((await call('GET', `/cascades/${ratedId}`)).body as { status: string }).status === 'finished', { what: 'the rated cascade finished' });
      const before = (await call('GET', `/cascades/${ratedId}`)).body;
      const ratedRows = await outboxRows();
      const canceled = await call('POST', `/cascades/${ratedId}/cancel`);
      expect([canceled.status, canceled.body]).toEqual([200, before]);
      expect((canceled.body as { recipients: Array<{ finishReason: string; rating: number }> }).recipients[0]).toMatchObject({ finishReason: 'rated', rating: 5 });
      expect(await outboxRows()).toBe(ratedRows);
      expect((await fetch(`${stack.base}/r/${token}`)).status).toBe(200);
    });

    it("404 not_found for an unknown id and another organization's cascade; nothing changes", async () => {
      const id = await start('not-yours', 'not-yours@example.com');
      for (const [path, who] of [[`/cascades/${id}/cancel`, 'other'], ['/cascades/0190e0e0-0000-7000-8000-0000000000aa/cancel', 'paid'], ['/cascades/nope/cancel', 'paid']] as Array<[string, Who]>) {
        const res = await call('POST', path, undefined, who);
        expect([path, res.status, (res.body as { code: string }).code]).toEqual([path, 404, 'not_found']);
      }
      expect(((await call('GET', `/cascades/${id}`)).body as { status: string }).status).toBe('running');
    });
  });

  describe('POST /cascades/cancel', () => {
    it('cancels every running cascade of the externalId (200 {canceled}), none of another organization; a repeat and an unknown externalId answer []', async () => {
      const a = await start('order-2001', 'o1@example.com');
      const b = await start('order-2001', 'o2@example.com');
      const mine = await start('order-2002', 'o3@example.com');
      const theirs = await start('order-2001', 'o4@example.com', 'other');
      const res = await call('POST', '/cascades/cancel', { externalId: 'order-2001' });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ canceled: [a, b].sort() });
      expect(((await call('GET', `/cascades/${mine}`)).body as { status: string }).status).toBe('running');
      expect(((await call('GET', `/cascades/${theirs}`, undefined, 'other')).body as { status: string }).status).toBe('running');
      expect((await call('POST', '/cascades/cancel', { externalId: 'order-2001' })).body).toEqual({ canceled: [] });
      expect((await call('POST', '/cascades/cancel', { externalId: 'no-such-order' })).body).toEqual({ canceled: [] });
    });

    it.each([
      ['no externalId', {}, '/externalId'],
      ['an empty one', { externalId: '' }, '/externalId'],
      ['a number', { externalId: 2001 }, '/externalId'],
      ['an unknown field', { externalId: 'order-2002', id: 'x' }, '/id'],
    ])('400 invalid_request for %s, nothing canceled', async (_what, body, pointer) => {
      const id = await start(`order-400-${pointer.length}-${JSON.stringify(body).length}`, `bad${JSON.stringify(body).length}@example.com`);
      const res = await call('POST', '/cascades/cancel', body);
      expect([res.status, (res.body as { code: string }).code]).toEqual([400, 'invalid_request']);
      expect(((res.body as { errors: Array<{ pointer: string }> }).errors).map((e) => e.pointer)).toContain(pointer);
      expect(((await call('GET', `/cascades/${id}`)).body as { status: string }).status).toBe('running');
    });
  });

  describe('POST /review-requests/{id}/cancel', () => {
    const create = async () => (await call('POST', '/review-requests', { locationId: stack.locationId, customerName: 'Lev', contact: 'lev@example.com' })).body as { id: string; token: string; url: string; status: string };

    it('200 status canceled; the link shows the "no longer active" page and takes no rating; a repeat answers the same', async () => {
      const rr = await create();
      const form = await openForm(rr.token);
      const res = await call('POST', `/review-requests/${rr.id}/cancel`);
      expect([res.status, res.body]).toEqual([200, { ...rr, status: 'canceled' }]);
      expect((await call('POST', `/review-requests/${rr.id}/cancel`)).body).toEqual(res.body);
      const page = await fetch(`${stack.base}/r/${rr.token}`);
      expect(page.status).toBe(410);
      expect(await page.text()).toContain('This request is no longer active');
      expect((await submitRating(rr.token, form, 1)).status).toBe(410);
      expect(await ratingsOf(rr.token)).toBe(0);
    });

    it('a rated one keeps its rating; 404 for an unknown id, another organization, or a cascade recipient', async () => {
      const rr = await create();
      expect((await submitRating(rr.token, await openForm(rr.token), 4)).status).toBe(303);
      expect((await call('POST', `/review-requests/${rr.id}/cancel`)).body).toEqual({ ...rr, status: 'rated' });
      expect((await fetch(`${stack.base}/r/${rr.token}`)).status).toBe(200);

      const open = await create();
      const cascadeId = await start('rr-of-cascade', 'rr-cascade@example.com');
      await tokenOf(cascadeId);
      const recipientRequest = (await stack.pool.query<{ id: string }>('SELECT review_request_id AS id FROM recipients WHERE cascade_id = $1', [cascadeId])).rows[0].id;
      for (const [id, who] of [[open.id, 'other'], ['0190e0e0-0000-7000-8000-0000000000ab', 'paid'], [recipientRequest, 'paid']] as Array<[string, Who]>) {
        const res = await call('POST', `/review-requests/${id}/cancel`, undefined, who);
        expect([res.status, (res.body as { code: string }).code]).toEqual([404, 'not_found']);
      }
      expect((await fetch(`${stack.base}/r/${open.token}`)).status).toBe(200);
    });
  });

  describe('GET /cascades', () => {
    type Page = { cascades: Array<{ id: string; status: string; externalId: string | null; locationId: string; createdAt: string; finishedAt: string | null; counts: Record<string, number> }>; nextCursor: string | null };
    const list = async (query: Record<string, string>, who: Who = 'paid') => {
      const res = await call('GET', `/cascades?${new URLSearchParams(query)}`, undefined, who);
      expect(res.status).toBe(200);
      return res.body as Page;
    };

    it('finds the cascade of an order by externalId, with the counts GET /cascades/{id} shows; another organization sees none of them', async () => {
      const id = await start('order-3001', 'find-me@example.com');
      await emailSent(id);
      const page = await list({ externalId: 'order-3001' });
      const full = (await call('GET', `/cascades/${id}`)).body as { counts: Record<string, number> };
      expect(page).toEqual({
        cascades: [{ id, status: 'running', externalId: 'order-3001', locationId: stack.locationId, createdAt: expect.any(String), finishedAt: null, counts: full.counts }],
        nextCursor: null,
      });
      expect(await list({ externalId: 'order-3001' }, 'other')).toEqual({ cascades: [], nextCursor: null });
      expect((await list({ externalId: 'order-3001', status: 'finished' })).cascades).toEqual([]);
      expect((await list({ externalId: 'order-3001', locationId: 'elsewhere' })).cascades).toEqual([]);
      const createdAt = page.cascades[0].createdAt;
      expect((await list({ externalId: 'order-3001', createdFrom: createdAt })).cascades.map((c) => c.id)).toEqual([id]);
      expect((await list({ externalId: 'order-3001', createdTo: createdAt })).cascades).toEqual([]);
      expect((await list({ externalId: 'order-3001', createdFrom: '2020-01-01T00:00:00+03:00', createdTo: new Date(Date.now() + 60_000).toISOString() })).cascades.map((c) => c.id)).toEqual([id]);
    });

    it('pages newest first by cursor; cascades created between pages come before the first page, never inside a later one', async () => {
      const made: string[] = [];
      for (let i = 0; i < 7; i++) made.push(await start('paged', `paged${i}@example.com`));
      const seen: string[] = [];
      let cursor: string | null = null;
      for (let pages = 0; pages < 10; pages++) {
        const page: Page = await list({ externalId: 'paged', limit: '3', ...(cursor ? { cursor } : {}) });
        seen.push(...page.cascades.map((c) => c.id));
        // Inserts while paging: newer than anything listed so far.
        if (pages < 2) made.push(await start('paged', `paged-late${pages}@example.com`));
        cursor = page.nextCursor;
        if (!cursor) break;
      }
      expect(seen).toEqual(made.slice(0, 7).reverse());
      expect(new Set(seen).size).toBe(seen.length);
      // A fresh walk sees all of them, newest first.
      expect((await list({ externalId: 'paged', limit: '100' })).cascades.map((c) => c.id)).toEqual([...made].reverse());
    });

    it.each([
      ['a malformed cursor', { cursor: 'not-a-cursor' }, 'cursor'],
      ["a cursor of the ratings feed", { cursor: Buffer.from('ratings:5').toString('base64url') }, 'cursor'],
      ['an unknown status', { status: 'paused' }, 'status'],
      ['a limit of 0', { limit: '0' }, 'limit'],
      ['a limit over 100', { limit: '101' }, 'limit'],
      ['a limit that is no number', { limit: 'ten' }, 'limit'],
      ['a createdFrom that is no time', { createdFrom: 'yesterday' }, 'createdFrom'],
      ['createdTo before createdFrom', { createdFrom: '2026-05-02T00:00:00Z', createdTo: '2026-05-01T00:00:00Z' }, 'createdTo'],
    ])('400 invalid_request naming the parameter for %s', async (_what, query, parameter) => {
      const res = await call('GET', `/cascades?${new URLSearchParams(query)}`);
      expect([res.status, (res.body as { code: string }).code]).toEqual([400, 'invalid_request']);
      expect(((res.body as { errors: Array<{ parameter?: string }> }).errors).map((e) => e.parameter)).toContain(parameter);
    });
  });

  describe('GET /ratings', () => {
    type Feed = { ratings: Array<{ reviewRequestId: string; source: string; cascadeId: string | null; cascadeExternalId: string | null; rating: number; feedback: string | null; late: boolean; publicLinksShown: unknown[] }>; nextCursor: string; hasMore: boolean };
    const page = async (query: Record<string, string>, who: Who = 'paid') => {
      const res = await call('GET', `/ratings?${new URLSearchParams(query)}`, undefined, who);
      expect(res.status).toBe(200);
      return res.body as Feed;
    };
    /** Everything after `since`, `limit` at a time, as a receiver catching up would read it. */
    const catchUp = async (since: string | undefined, limit: number) => {
      const ratings: Feed['ratings'] = [];
      let cursor = since;
      for (let pages = 0; pages < 100; pages++) {
        const p = await page({ limit: String(limit), ...(cursor ? { since: cursor } : {}) });
        ratings.push(...p.ratings);
        cursor = p.nextCursor;
        if (!p.hasMore) return { ratings, cursor };
      }
      throw new Error('the feed did not end');
    };

    it('a receiver that was down resumes from its last cursor and gets every rating since, cascade and review-request ones, once each', async () => {
      const { cursor: before } = await catchUp(undefined, 500);
      // While "down": a cascade rating, a review-request rating, and a low one whose feedback comes later.
      const cascadeId = await start('feed-4001', 'feed@example.com');
      const cascadeToken = await tokenOf(cascadeId);
      expect((await submitRating(cascadeToken, await openForm(cascadeToken), 5)).status).toBe(303);
      const rr = (await call('POST', '/review-requests', { locationId: stack.locationId, customerName: 'Lev', contact: 'lev@example.com' })).body as { id: string; token: string };
      expect((await submitRating(rr.token, await openForm(rr.token), 2)).status).toBe(303);

      const back = await catchUp(before, 1);
      expect(back.ratings.map((r) => [r.source, r.cascadeId, r.cascadeExternalId, r.rating, r.late])).toEqual([
        ['cascade', cascadeId, 'feed-4001', 5, false],
        ['review_request', null, null, 2, false],
      ]);
      expect(back.ratings[0].publicLinksShown).toEqual([{ provider: 'google', url: 'https://g.example/r' }]);
      // Up to date: the same cursor gives nothing, and says so.
      expect(await page({ since: back.cursor })).toEqual({ ratings: [], nextCursor: back.cursor, hasMore: false });
      // The feedback comes: the rating comes once more, with it; nothing else does.
      const form = await openForm(rr.token);
      const feedback = await fetch(`${stack.base}/r/${rr.token}/feedback`, { method: 'POST', headers: { cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: `text=Cold&csrf=${form.csrf}`, redirect: 'manual' });
      expect(feedback.status).toBe(303);
      const later = await catchUp(back.cursor, 10);
      expect(later.ratings.map((r) => [r.reviewRequestId, r.feedback])).toEqual([[rr.id, 'Cold']]);
      // Another organization's feed has none of them.
      expect((await catchUp(undefined, 500)).ratings.length).toBeGreaterThanOrEqual(2);
      expect((await page({}, 'other')).ratings).toEqual([]);
    });

    it.each([
      ['a malformed cursor', { since: '!!' }, 'since'],
      ['a cursor of the cascade list', { since: Buffer.from('cascades:0190e0e0-0000-7000-8000-000000000004').toString('base64url') }, 'since'],
      ['a position that is no number', { since: Buffer.from('ratings:abc').toString('base64url') }, 'since'],
      ['a limit over 500', { limit: '501' }, 'limit'],
      ['a negative limit', { limit: '-1' }, 'limit'],
    ])('400 invalid_request naming the parameter for %s', async (_what, query, parameter) => {
      const res = await call('GET', `/ratings?${new URLSearchParams(query)}`);
      expect([res.status, (res.body as { code: string }).code]).toEqual([400, 'invalid_request']);
      expect(((res.body as { errors: Array<{ parameter?: string }> }).errors).map((e) => e.parameter)).toEqual([parameter]);
    });
  });
});
