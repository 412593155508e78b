import { eventsV1, LINK_INACTIVE_CODE, schedulerV1 } from '@rrs/proto';
import { MD_IDEMPOTENCY_FINGERPRINT, MD_IDEMPOTENCY_KEY } from '@rrs/idempotency';
import { createGrpcClient, type GrpcClientHandle } from '@rrs/runtime';
import { waitFor } from '@rrs/testkit';
import type { Dispatch } from '../src/engine';
import { LOCATION, ORG, OTHER_ORG, rejection, startHarness, type Harness } from './harness';

/**
 * Canceling over gRPC (CancelCascade, CancelCascadesByExternalId, CancelReviewRequest), on the real
 * dispatcher, bus and database: what stops, what is reported, what a review link does afterwards, and
 * the race with a dispatcher that is handing the step to its sender at that moment.
 */
describe('canceling cascades and review requests', () => {
  let h: Harness;
  let grpc: GrpcClientHandle<schedulerV1.CascadeSchedulerServiceClient>;
  /** Test hook: runs inside the dispatcher's transaction after it published a batch, before it commits. */
  let duringDispatch: ((dispatches: Dispatch[]) => Promise<void>) | undefined;

  beforeAll(async () => {
    h = await startHarness({
      minuteMs: 40,
      sender: { channels: ['EMAIL', 'SMS'] },
      collectEvents: true,
      deps: { afterPublish: async (_client, dispatches) => { await duringDispatch?.(dispatches); } },
    });
    grpc = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, `127.0.0.1:${h.scheduler.grpcPort}`);
  });
  afterAll(async () => {
    grpc.close();
    await h.close();
  });

  let flowSeq = 0;
  const flow = async (steps: Array<{ channel: string; delayMinutes: number }>, responseWindowMinutes?: number) =>
    (await h.scheduler.flows.create({ organizationId: ORG, name: `Flow ${++flowSeq}`, isDefault: false, steps, responseWindowMinutes })).id;
  const start = async (flowId: string, externalId: string, recipients = [{ name: 'Anna', email: `${externalId}@example.com`, phone: '+79160000001' }], organizationId = ORG) =>
    grpc.client.startCascade({
      organizationId, locationId: LOCATION, name: '', flowId, channel: '', externalId, ignoreCooldown: true, dryRun: false, contact: undefined, contactIdempotencyKey: '', contactIdempotencyFingerprint: '',
      recipients: recipients.map((r) => ({ ...r, contactId: '', contactExternalId: '' })),
    });
  const sentTo = (cascadeId: string) => h.sender.received.filter((s) => s.cascadeId === cascadeId);
  const finishEvents = (cascadeId: string) =>
    h.events.events.filter((e) => e.payload?.$case === 'cascadeRecipientFinished' && e.payload.cascadeRecipientFinished.cascadeId === cascadeId);
  const tokenOf = async (cascadeId: string) => (await h.pool.query<{ token: string }>('SELECT rr.token FROM review_requests rr JOIN recipients r ON r.review_request_id = rr.id WHERE r.cascade_id = $1', [cascadeId])).rows[0].token;
  const outboxRows = async () => (await h.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox')).rows[0].n;

  it('a running and a waiting recipient both finish canceled: no later step goes out, one finish event each with reason canceled', async () => {
    // Anna: EMAIL at once, SMS 100 flow minutes (4 s) later. Boris: one EMAIL, then he waits for a rating (the response window).
    const twoSteps = await flow([{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 100 }]);
    const oneStep = await flow([{ channel: 'EMAIL', delayMinutes: 0 }], 600);
    const running = await start(twoSteps, 'refund-1', [{ name: 'Anna', email: 'anna-refund@example.com', phone: '+79160000011' }]);
    const waiting = await start(oneStep, 'refund-2', [{ name: 'Boris', email: 'boris-refund@example.com', phone: '' }]);
    const recipientOf = async (id: string) => (await grpc.client.getCascade({ organizationId: ORG, id })).cascade!.recipients[0];
    await waitFor(async () => (await recipientOf(running.id)).steps[0].status === 'sent' && (await recipientOf(waiting.id)).status === 'waiting', { what: 'both emails sent, Boris waiting for a rating' });

    const answers = [await grpc.client.cancelCascade({ organizationId: ORG, id: running.id }), await grpc.client.cancelCascade({ organizationId: ORG, id: waiting.id })];
    expect(answers.map((a) => [a.canceled, a.idempotentReplayed, a.cascade!.status])).toEqual([[1, false, 'finished'], [1, false, 'finished']]);
    expect(answers.map((a) => a.cascade!.recipients.map((r) => [r.status, r.finishReason, r.windowClosesAt, r.steps.map((s) => s.status)]))).toEqual([
      [['finished', 'canceled', undefined, ['sent', 'canceled']]],
      [['finished', 'canceled', undefined, ['sent']]],
    ]);
    // The answer is the cascade as GetCascade shows it.
    for (const a of answers) expect((await grpc.client.getCascade({ organizationId: ORG, id: a.cascade!.id })).cascade).toEqual(a.cascade);
    expect(Object.fromEntries(answers[0].cascade!.counts.map((k) => [k.key, k.value]))).toMatchObject({ running: 0, waiting: 0, finished: 1, canceled: 1, stepsSent: 1, stepsPending: 0 });

    for (const id of [running.id, waiting.id]) await waitFor(() => finishEvents(id).length === 1, { what: 'the finish event' });
    expect([running.id, waiting.id].map((id) => (finishEvents(id)[0].payload as { cascadeRecipientFinished: eventsV1.CascadeRecipientFinished }).cascadeRecipientFinished.reason)).toEqual(['canceled', 'canceled']);

    // A cascade started after the cancel on the same flow gets its SMS; by then Anna's would have been long due.
    const control = await start(twoSteps, 'control-1', [{ name: 'Vera', email: 'vera-control@example.com', phone: '+79160000012' }]);
    await waitFor(() => sentTo(control.id).some((s) => s.channel === 'SMS'), { what: "the control cascade's SMS", timeoutMs: 20_000 });
    expect(sentTo(running.id).map((s) => s.channel)).toEqual(['EMAIL']);
  });

  it('is idempotent: a second cancel changes nothing and answers the same; the same Idempotency-Key replays, another body under it is refused', async () => {
    const flowId = await flow([{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 600 }]);
    const { id } = await start(flowId, 'twice');
    await waitFor(async () => (await grpc.client.getCascade({ organizationId: ORG, id })).cascade!.recipients[0].steps[0].status === 'sent', { what: 'the email sent' });
    const md = { [MD_IDEMPOTENCY_KEY]: 'refund-twice', [MD_IDEMPOTENCY_FINGERPRINT]: 'fp-cancel' };
    const first = await grpc.client.cancelCascade({ organizationId: ORG, id }, { metadata: md });
    await waitFor(() => finishEvents(id).length === 1, { what: 'the finish event' });
    const rows = await outboxRows();
    const again = await grpc.client.cancelCascade({ organizationId: ORG, id });
    expect(again).toEqual({ ...first, canceled: 0 });
    const replay = await grpc.client.cancelCascade({ organizationId: ORG, id }, { metadata: md });
    expect(replay).toEqual({ ...first, idempotentReplayed: true });
    expect(await rejection(grpc.client.cancelCascade({ organizationId: ORG, id }, { metadata: { ...md, [MD_IDEMPOTENCY_FINGERPRINT]: 'fp-other' } }))).toMatchObject({ status: 409, code: 'idempotency_key_reused' });
    expect(await outboxRows()).toBe(rows);
    expect(finishEvents(id)).toHaveLength(1);
  });

  it('after the finish: the rated recipient keeps its outcome, nothing is written, the answer is the cascade as it is', async () => {
    const flowId = await flow([{ channel: 'EMAIL', delayMinutes: 0 }], 600);
    const { id } = await start(flowId, 'rated-first');
    // The sender records the step before it publishes its result: wait for the result itself (the step sent),
    // or it could land between the two reads below and change the counts (stepsSent) under the comparison.
    await waitFor(async () => (await grpc.client.getCascade({ organizationId: ORG, id })).cascade!.recipients[0].steps[0].status === 'sent', { what: 'the email sent' });
    await h.scheduler.reviews.submitRating(await tokenOf(id), 5);
    await waitFor(() => finishEvents(id).length === 1, { what: 'the rated finish event' });
    const before = (await grpc.client.getCascade({ organizationId: ORG, id })).cascade!;
    const rows = await outboxRows();
    const answer = await grpc.client.cancelCascade({ organizationId: ORG, id });
    expect(answer).toMatchObject({ canceled: 0, cascade: before });
    expect(answer.cascade!.recipients[0]).toMatchObject({ finishReason: 'rated', rating: 5 });
    expect(await outboxRows()).toBe(rows);
    // Its link still shows the thank-you, with the rating.
    expect((await h.scheduler.reviews.getForm(await tokenOf(id), false)).rating).toBe(5);
  });

  it("a canceled recipient's link takes no rating: link_inactive, nothing recorded; its unsubscribe page still works", async () => {
    const flowId = await flow([{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 600 }]);
    const { id } = await start(flowId, 'closed-link');
    await waitFor(() => sentTo(id).length === 1, { what: 'the email' });
    const token = await tokenOf(id);
    await grpc.client.cancelCascade({ organizationId: ORG, id });
    for (const call of [grpc.client.getReviewForm({ token, recordOpen: true, forUnsubscribe: false, botChannels: [] }), grpc.client.submitRating({ token, rating: 2 })]) {
      expect(await rejection(call)).toMatchObject({ kind: 'not_found', code: LINK_INACTIVE_CODE, details: { locale: 'en' } });
    }
    const { rows } = await h.pool.query('SELECT rr.status, rr.opened_at, (SELECT count(*)::int FROM ratings ra WHERE ra.review_request_id = rr.id) AS ratings FROM review_requests rr WHERE rr.token = $1', [token]);
    expect(rows).toEqual([{ status: 'canceled', opened_at: null, ratings: 0 }]);
    expect((await grpc.client.getReviewForm({ token, recordOpen: false, forUnsubscribe: true, botChannels: [] })).form?.email).toBe('closed-link@example.com');
  });

  it('racing the dispatcher: the step being handed to its sender goes out (it is not recalled), the next one never does, one finish event says canceled', async () => {
    const flowId = await flow([{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 6 }]);
    let cancel: Promise<schedulerV1.CancelCascadeResponse> | undefined;
    duringDispatch = async (dispatches) => {
      if (cancel) return;
      const { rows } = await h.pool.query<{ cascade_id: string }>(
        `SELECT s.cascade_id FROM recipient_steps s JOIN cascades c ON c.id = s.cascade_id WHERE s.id = ANY($1::uuid[]) AND c.external_id = 'race'`,
        [dispatches.map((d) => d.step.id)],
      );
      if (!rows[0]) return;
      cancel = grpc.client.cancelCascade({ organizationId: ORG, id: rows[0].cascade_id });
      // The step is published and this transaction holds the recipient until it commits: hold the commit until the cancel waits for that lock.
      await waitFor(async () => (await h.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0].n > 0, { what: 'the cancel waiting for the recipient' });
    };
    let cascadeId: string;
    try {
      cascadeId = (await start(flowId, 'race')).id;
      await waitFor(() => cancel !== undefined, { what: 'the email dispatched while the cancel came' });
      const answer = await cancel!;
      expect(answer.canceled).toBe(1);
      expect(answer.cascade!.recipients[0].finishReason).toBe('canceled');
      expect(answer.cascade!.recipients[0].steps.map((s) => s.status)).toEqual([expect.stringMatching(/^(dispatched|sent)$/), 'canceled']);
    } finally {
      duringDispatch = undefined;
    }
    await waitFor(async () => (await grpc.client.getCascade({ organizationId: ORG, id: cascadeId })).cascade!.recipients[0].steps[0].status === 'sent', { what: "the email's result: sent" });
    const control = await start(flowId, 'race-control', [{ name: 'Gleb', email: 'gleb-race@example.com', phone: '+79160000013' }]);
    await waitFor(() => sentTo(control.id).some((s) => s.channel === 'SMS'), { what: "the control cascade's SMS" });
    expect(sentTo(cascadeId).map((s) => s.channel)).toEqual(['EMAIL']);
    await waitFor(() => finishEvents(cascadeId).length === 1, { what: 'the finish event' });
    expect((finishEvents(cascadeId)[0].payload as { cascadeRecipientFinished: eventsV1.CascadeRecipientFinished }).cascadeRecipientFinished.reason).toBe('canceled');
  });

  it("not_found for an unknown id and another organization's cascade; nothing changes", async () => {
    const flowId = await flow([{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 600 }]);
    const { id } = await start(flowId, 'someone-elses');
    for (const [organizationId, cascadeId] of [[OTHER_ORG, id], [ORG, '0190e0e0-0000-7000-8000-0000000000ee'], [ORG, 'not-an-id']]) {
      expect(await rejection(grpc.client.cancelCascade({ organizationId, id: cascadeId }))).toMatchObject({ status: 404, code: 'not_found' });
    }
    expect((await grpc.client.getCascade({ organizationId: ORG, id })).cascade!.recipients[0].status).not.toBe('finished');
  });

  it('by externalId: every running cascade of the organization with it, and only those; a repeat cancels nothing', async () => {
    const flowId = await flow([{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 600 }]);
    const a = await start(flowId, 'order-77');
    const b = await start(flowId, 'order-77', [{ name: 'Kira', email: 'kira-77@example.com', phone: '' }]);
    const finished = await start(flowId, 'order-77', [{ name: 'Nobody', email: '', phone: '' }]);
    const other = await start(flowId, 'order-78');
    expect(finished.status).toBe('finished');
    const answer = await grpc.client.cancelCascadesByExternalId({ organizationId: ORG, externalId: 'order-77' });
    expect(answer).toEqual({ canceled: [a.id, b.id].sort(), idempotentReplayed: false });
    for (const id of [a.id, b.id]) expect((await grpc.client.getCascade({ organizationId: ORG, id })).cascade!.recipients[0].finishReason).toBe('canceled');
    expect((await grpc.client.getCascade({ organizationId: ORG, id: finished.id })).cascade!.recipients[0].finishReason).toBe('unreachable');
    expect((await grpc.client.getCascade({ organizationId: ORG, id: other.id })).cascade!.status).toBe('running');
    expect(await grpc.client.cancelCascadesByExternalId({ organizationId: ORG, externalId: 'order-77' })).toEqual({ canceled: [], idempotentReplayed: false });
    expect(await grpc.client.cancelCascadesByExternalId({ organizationId: OTHER_ORG, externalId: 'order-78' })).toEqual({ canceled: [], idempotentReplayed: false });
    expect(await grpc.client.cancelCascadesByExternalId({ organizationId: ORG, externalId: 'no-such-order' })).toEqual({ canceled: [], idempotentReplayed: false });
    expect(await rejection(grpc.client.cancelCascadesByExternalId({ organizationId: ORG, externalId: '' }))).toMatchObject({ status: 400, details: { errors: [{ pointer: '/externalId' }] } });
  });

  it('a review request: canceled before a rating it takes none; a rated one keeps its rating; a cascade link is not one', async () => {
    const make = async () => (await grpc.client.createReviewRequest({ organizationId: ORG, locationId: LOCATION, customerName: 'Lev', contact: 'lev@example.com' })).reviewRequest!;
    const open = await make();
    const canceled = await grpc.client.cancelReviewRequest({ organizationId: ORG, id: open.id });
    expect(canceled).toEqual({ reviewRequest: { ...open, status: 'canceled' }, idempotentReplayed: false });
    expect(await grpc.client.cancelReviewRequest({ organizationId: ORG, id: open.id })).toEqual(canceled);
    expect(await rejection(grpc.client.submitRating({ token: open.token, rating: 1 }))).toMatchObject({ code: LINK_INACTIVE_CODE });
    expect((await h.pool.query('SELECT count(*)::int AS n FROM ratings WHERE review_request_id = $1', [open.id])).rows[0].n).toBe(0);

    const rated = await make();
    await grpc.client.submitRating({ token: rated.token, rating: 4 });
    expect(await grpc.client.cancelReviewRequest({ organizationId: ORG, id: rated.id })).toEqual({ reviewRequest: { ...rated, status: 'rated' }, idempotentReplayed: false });
    expect((await grpc.client.getReviewForm({ token: rated.token, recordOpen: false, forUnsubscribe: false, botChannels: [] })).form?.rating).toBe(4);

    const flowId = await flow([{ channel: 'EMAIL', delayMinutes: 0 }]);
    const { id } = await start(flowId, 'rr-of-cascade');
    const { rows } = await h.pool.query<{ id: string }>('SELECT review_request_id AS id FROM recipients WHERE cascade_id = $1', [id]);
    for (const [organizationId, reviewRequestId] of [[ORG, rows[0].id], [OTHER_ORG, open.id], [ORG, '0190e0e0-0000-7000-8000-0000000000ef']]) {
      expect(await rejection(grpc.client.cancelReviewRequest({ organizationId, id: reviewRequestId }))).toMatchObject({ status: 404, code: 'not_found' });
    }
  });

  it('a rating and a cancel of the same review request at once: either the rating stands (and the cancel leaves it) or the link is closed (and the rating is refused)', async () => {
    for (let round = 0; round < 5; round++) {
      const rr = (await grpc.client.createReviewRequest({ organizationId: ORG, locationId: LOCATION, customerName: '', contact: '' })).reviewRequest!;
      const [rating, cancel] = await Promise.allSettled([grpc.client.submitRating({ token: rr.token, rating: 3 }), grpc.client.cancelReviewRequest({ organizationId: ORG, id: rr.id })]);
      expect(cancel.status).toBe('fulfilled');
      const status = (cancel as PromiseFulfilledResult<schedulerV1.CancelReviewRequestResponse>).value.reviewRequest!.status;
      const { rows } = await h.pool.query('SELECT count(*)::int AS n FROM ratings WHERE review_request_id = $1', [rr.id]);
      if (rating.status === 'fulfilled') {
        expect([status, rows[0].n]).toEqual(['rated', 1]);
      } else {
        expect([status, rows[0].n, (rating.reason as { code: string }).code]).toEqual(['canceled', 0, LINK_INACTIVE_CODE]);
      }
    }
  });
});
