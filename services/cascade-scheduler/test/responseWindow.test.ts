import { waitFor } from '@rrs/testkit';
import { FakeProfiles, LOCATION, ORG, startHarness, type Harness } from './harness';

const MINUTE = 40;

/** The response window on PostgreSQL + JetStream with the fast clock: a recipient waits for a rating after its last step. */
describe('the response window (Postgres + JetStream)', () => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness({ minuteMs: MINUTE, feedbackWindowMinutes: 1, sender: { channels: ['EMAIL', 'SMS'] }, collectEvents: true });
    // The organization's window: 10 flow minutes (400 ms).
    h.profiles.byOrganization.set(ORG, FakeProfiles.profile(ORG, { responseWindowMinutes: 10 }));
  });
  afterAll(async () => {
    await h.close();
  });

  async function sendOne(email: string, options: { flowId?: string } = {}) {
    const { result } = await h.scheduler.cascades.start({
      organizationId: ORG, locationId: LOCATION, name: '', flowId: options.flowId ?? '', channel: options.flowId ? '' : 'EMAIL', externalId: email, recipients: [{ name: 'Vera', email, phone: '' }],
    });
    const { rows } = await h.pool.query('SELECT rr.token FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1', [result.id]);
    return { cascadeId: result.id, token: rows[0].token as string };
  }
  const recipientOf = async (cascadeId: string) => (await h.scheduler.cascades.get(ORG, cascadeId)).recipients[0];
  const eventsFor = (email: string, type: string) =>
    h.events.events.filter((e) => e.type === type && e.payload?.$case === 'cascadeRecipientFinished' && e.payload.cascadeRecipientFinished.recipient?.email === email);

  it('after the last step went out the recipient waits; a rating inside the window finishes it rated, reported once by the finish event', async () => {
    const { cascadeId, token } = await sendOne('inside@example.com');
    await waitFor(async () => (await recipientOf(cascadeId)).status === 'waiting', { what: 'waiting' });
    const waiting = await recipientOf(cascadeId);
    const sentAt = waiting.steps[0].sentAt!;
    expect(waiting.windowClosesAt!.getTime() - sentAt.getTime()).toBe(10 * MINUTE);
    const cascade = await h.scheduler.cascades.get(ORG, cascadeId);
    expect(cascade.status).toBe('running');
    expect(Object.fromEntries(cascade.counts.map((c) => [c.key, c.value]))).toMatchObject({ waiting: 1, running: 0, finished: 0 });
    expect(eventsFor('inside@example.com', 'cascade.recipient.finished')).toHaveLength(0);

    await h.scheduler.reviews.submitRating(token, 4);
    const event = await waitFor(() => eventsFor('inside@example.com', 'cascade.recipient.finished')[0], { what: 'finish event' });
    expect(event.payload?.$case === 'cascadeRecipientFinished' && event.payload.cascadeRecipientFinished).toMatchObject({ reason: 'rated', rating: 4, steps: [{ status: 'sent' }] });
    expect(await recipientOf(cascadeId)).toMatchObject({ status: 'finished', finishReason: 'rated', windowClosesAt: undefined });
    await new Promise((resolve) => setTimeout(resolve, 12 * MINUTE));
    expect(eventsFor('inside@example.com', 'cascade.recipient.finished')).toHaveLength(1);
    expect(eventsFor('inside@example.com', 'cascade.recipient.rated')).toHaveLength(0);
  });

  it('without a rating the recipient finishes exhausted when the window closes; a rating after that is a late rating', async () => {
    const { cascadeId, token } = await sendOne('closed@example.com');
    await waitFor(async () => (await recipientOf(cascadeId)).status === 'waiting', { what: 'waiting' });
    const event = await waitFor(() => eventsFor('closed@example.com', 'cascade.recipient.finished')[0], { what: 'finish event when the window closes', timeoutMs: 10_000 });
    const finished = await recipientOf(cascadeId);
    expect(finished).toMatchObject({ status: 'finished', finishReason: 'exhausted', rating: 0 });
    expect(finished.finishedAt!.getTime() - finished.steps[0].sentAt!.getTime()).toBeGreaterThanOrEqual(10 * MINUTE);
    expect(event.payload?.$case === 'cascadeRecipientFinished' && event.payload.cascadeRecipientFinished).toMatchObject({ reason: 'exhausted', rating: 0 });
    expect((await h.scheduler.cascades.get(ORG, cascadeId)).status).toBe('finished');
    await h.scheduler.reviews.submitRating(token, 5);
    await waitFor(() => eventsFor('closed@example.com', 'cascade.recipient.rated')[0], { what: 'late rating event' });
  });

  it("a flow's own window wins over the organization's: 0 finishes the recipient when its last step goes out", async () => {
    const flow = await h.scheduler.flows.create({ organizationId: ORG, name: 'no wait', isDefault: false, steps: [{ channel: 'EMAIL', delayMinutes: 0 }], responseWindowMinutes: 0 });
    expect((await h.scheduler.flows.get(ORG, flow.id)).responseWindowMinutes).toBe(0);
    const { cascadeId } = await sendOne('nowait@example.com', { flowId: flow.id });
    await waitFor(async () => (await recipientOf(cascadeId)).status === 'finished', { what: 'finished at once' });
    expect(await recipientOf(cascadeId)).toMatchObject({ finishReason: 'exhausted' });
  });

  it('refuses a window outside 0 to 525 600 minutes, creating no flow', async () => {
    const before = (await h.scheduler.flows.list(ORG)).length;
    await expect(h.scheduler.flows.create({ organizationId: ORG, name: 'bad', isDefault: false, steps: [{ channel: 'EMAIL', delayMinutes: 0 }], responseWindowMinutes: -1 })).rejects.toMatchObject({ code: 'invalid_request' });
    await expect(h.scheduler.flows.create({ organizationId: ORG, name: 'bad', isDefault: false, steps: [{ channel: 'EMAIL', delayMinutes: 0 }], responseWindowMinutes: 525_601 })).rejects.toMatchObject({ code: 'invalid_request' });
    expect(await h.scheduler.flows.list(ORG)).toHaveLength(before);
  });
});
