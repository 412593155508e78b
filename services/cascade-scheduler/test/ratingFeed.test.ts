import { schedulerV1 } from '@rrs/proto';
import { createGrpcClient, inTransaction, type GrpcClientHandle } from '@rrs/runtime';
import { waitFor } from '@rrs/testkit';
import { takeFeedPosition } from '../src/ratingFeed';
import { LOCATION, ORG, OTHER_ORG, rejection, startHarness, type Harness } from './harness';

/**
 * The ratings feed (ListRatingFeed): every rating of the organization in the order it was recorded,
 * read page by page from a position; a reader resuming from its last position misses nothing and gets
 * nothing twice, also while ratings are being recorded.
 */
describe('the ratings feed', () => {
  let h: Harness;
  let grpc: GrpcClientHandle<schedulerV1.CascadeSchedulerServiceClient>;

  beforeAll(async () => {
    h = await startHarness({ minuteMs: 40, sender: { channels: ['EMAIL'] }, feedbackWindowMinutes: 1 });
    grpc = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, `127.0.0.1:${h.scheduler.grpcPort}`);
  });
  afterAll(async () => {
    grpc.close();
    await h.close();
  });

  const reviewRequest = async (contact = 'lev@example.com') =>
    (await grpc.client.createReviewRequest({ organizationId: ORG, locationId: LOCATION, customerName: 'Lev', contact })).reviewRequest!;
  const feed = (after: number, limit = 0, organizationId = ORG) => grpc.client.listRatingFeed({ organizationId, after, limit });
  /** Reads the whole feed from `after`, `limit` at a time; returns the ratings and the last position. */
  async function readAll(after: number, limit: number): Promise<{ ratings: schedulerV1.RatingFeedItem[]; last: number }> {
    const ratings: schedulerV1.RatingFeedItem[] = [];
    let position = after;
    for (let page = 0; page < 1000; page++) {
      const r = await feed(position, limit);
      ratings.push(...r.ratings);
      position = r.last;
      if (!r.hasMore) return { ratings, last: position };
    }
    throw new Error('the feed did not end');
  }

  it('lists cascade ratings, review-request ratings and a late one in the order recorded, with what their events carry', async () => {
    const start = (await feed(0, 500)).last;
    // A cascade whose one email goes out and whose recipient finishes at once (no response window): a rating after it is late.
    const flowId = (await h.scheduler.flows.create({ organizationId: ORG, name: 'One email', isDefault: false, steps: [{ channel: 'EMAIL', delayMinutes: 0 }], responseWindowMinutes: 0 })).id;
    const late = await grpc.client.startCascade({
      organizationId: ORG, locationId: LOCATION, name: '', flowId, channel: '', externalId: 'order-9', ignoreCooldown: true, dryRun: false, contact: undefined, contactIdempotencyKey: '', contactIdempotencyFingerprint: '',
      recipients: [{ name: 'Anna', email: 'anna-feed@example.com', phone: '+79160000021', contactId: '', contactExternalId: 'crm-anna' }],
    });
    const recipient = await waitFor(async () => {
      const r = (await grpc.client.getCascade({ organizationId: ORG, id: late.id })).cascade!.recipients[0];
      return r.status === 'finished' ? r : undefined;
    }, { what: 'the recipient finished exhausted' });
    const token = (await h.pool.query<{ token: string }>('SELECT token FROM review_requests WHERE id = $1', [recipient.reviewRequestId])).rows[0].token;

    const first = await reviewRequest('+79160000022');
    await grpc.client.submitRating({ token: first.token, rating: 5 });
    await grpc.client.submitRating({ token, rating: 4 });
    const second = await reviewRequest('kira@example.com');
    await grpc.client.submitRating({ token: second.token, rating: 2 });
    // Another organization's rating, recorded in between, is not in this feed (nor does it take one of its positions).
    await inTransaction(h.pool, async (client) => {
      await client.query(`INSERT INTO review_requests (id, organization_id, token, location_id) VALUES ('0190e0e0-0000-7000-8000-00000000feed', $1, 'feedfeedfeedfeedfeedfe', 'elsewhere')`, [OTHER_ORG]);
      await client.query(`INSERT INTO ratings (review_request_id, organization_id, rating) VALUES ('0190e0e0-0000-7000-8000-00000000feed', $1, 1)`, [OTHER_ORG]);
      await takeFeedPosition(client, OTHER_ORG, '0190e0e0-0000-7000-8000-00000000feed');
    });
    expect((await feed(0, 10, OTHER_ORG)).ratings.map((r) => [r.reviewRequestId, r.position])).toEqual([['0190e0e0-0000-7000-8000-00000000feed', 1]]);

    const { ratings, last } = await readAll(start, 2);
    expect(ratings.map((r) => [r.reviewRequestId, r.rating, r.late])).toEqual([[first.id, 5, false], [recipient.reviewRequestId, 4, true], [second.id, 2, false]]);
    expect(ratings.map((r) => r.position)).toEqual([start + 1, start + 2, start + 3]);
    expect(last).toBe(start + 3);
    expect(ratings[0]).toMatchObject({ cascadeId: '', recipientId: '', name: 'Lev', email: '', phone: '+79160000022', locationId: LOCATION, feedback: '', feedbackAt: undefined, publicLinksShown: [{ provider: 'google', url: 'https://g.example/review' }] });
    expect(ratings[1]).toMatchObject({ cascadeId: late.id, cascadeExternalId: 'order-9', hasCascadeExternalId: true, recipientId: recipient.id, contactExternalId: 'crm-anna', name: 'Anna', email: 'anna-feed@example.com', phone: '+79160000021' });
    expect(ratings[0].ratedAt!.getTime()).toBeLessThanOrEqual(ratings[1].ratedAt!.getTime());

    // The low rating's feedback moves it to the end of the feed, now with the feedback: a reader that read it before gets it once more, complete.
    await grpc.client.submitFeedback({ token: second.token, text: 'Cold coffee' });
    const after = await readAll(last, 10);
    expect(after.ratings.map((r) => [r.reviewRequestId, r.feedback, r.position])).toEqual([[second.id, 'Cold coffee', start + 4]]);
    expect(after.ratings[0].feedbackAt).toBeInstanceOf(Date);
    // Read from the start, it is there once, at its new place.
    expect((await readAll(start, 500)).ratings.map((r) => r.reviewRequestId)).toEqual([first.id, recipient.reviewRequestId, second.id]);
  });

  it('a reader paging while ratings are recorded at the same time misses none and gets none twice', async () => {
    const start = (await feed(0, 500)).last;
    const links = await Promise.all(Array.from({ length: 40 }, (_, i) => reviewRequest(`busy${i}@example.com`)));
    const seen: schedulerV1.RatingFeedItem[] = [];
    let position = start;
    let rating = true;
    const rate = (async () => {
      // Eight at a time: their transactions overlap, and commit in any order.
      for (let i = 0; i < links.length; i += 8) await Promise.all(links.slice(i, i + 8).map((l, k) => grpc.client.submitRating({ token: l.token, rating: 1 + ((i + k) % 5) })));
      rating = false;
    })();
    for (let reads = 0; reads < 5000 && (rating || seen.length < links.length); reads++) {
      const r = await feed(position, 3);
      seen.push(...r.ratings);
      position = r.last;
    }
    await rate;
    const rest = await readAll(position, 3);
    seen.push(...rest.ratings);
    expect(seen.map((r) => r.reviewRequestId).sort()).toEqual(links.map((l) => l.id).sort());
    expect(seen.map((r) => r.position)).toEqual(Array.from({ length: links.length }, (_, i) => start + 1 + i));
  });

  it('a rating whose transaction took its position and has not committed hides every later one until it commits', async () => {
    const start = (await feed(0, 500)).last;
    const held = await reviewRequest('held@example.com');
    const next = await reviewRequest('next@example.com');
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let positioned!: () => void;
    const hasPosition = new Promise<void>((resolve) => (positioned = resolve));
    // A rating recorded by hand, as submitRating records one, whose commit waits for the test.
    const slow = inTransaction(h.pool, async (client) => {
      await client.query('INSERT INTO ratings (review_request_id, organization_id, rating) VALUES ($1, $2, 3)', [held.id, ORG]);
      await takeFeedPosition(client, ORG, held.id);
      positioned();
      await released;
    });
    await hasPosition;
    const quick = grpc.client.submitRating({ token: next.token, rating: 5 });
    // The quick rating waits for the counter the held one holds: nothing of either is visible yet.
    await waitFor(async () => (await h.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0].n > 0, { what: 'the second rating waiting' });
    expect((await feed(start, 10)).ratings).toEqual([]);
    release();
    await slow;
    await quick;
    expect((await feed(start, 10)).ratings.map((r) => [r.reviewRequestId, r.position])).toEqual([[held.id, start + 1], [next.id, start + 2]]);
  });

  it('refuses a page size over 500 and a negative position; an empty page answers the position it was asked from', async () => {
    expect(await rejection(feed(0, 501))).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(await rejection(feed(-1))).toMatchObject({ status: 400, code: 'invalid_request' });
    const end = (await feed(0, 500)).last;
    expect(await feed(end + 1000)).toEqual({ ratings: [], last: end + 1000, hasMore: false });
    expect(await feed(0, 0, 'not-an-organization')).toEqual({ ratings: [], last: 0, hasMore: false });
  });
});
