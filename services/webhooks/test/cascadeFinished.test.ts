import { Webhook } from 'standardwebhooks';
import { waitFor } from '@rrs/testkit';
import { createPool } from '@rrs/runtime';
import { AddressHasher, DEVELOPMENT_PERSON_HASH_KEY, erasePerson } from '../../cascade-scheduler/src';
import { SCHEMA, startWebhooks, type RunningWebhooks } from '../src';
import { LOCATION, ORG, startHarness, startScriptedSender, type Harness } from '../../cascade-scheduler/test/harness';
import { Receiver } from './support/receiver';
import { testWebhooksConfig } from './support/service';

/**
 * The real cascade scheduler and the webhooks service on one JetStream bus: a recipient rates (through
 * the scheduler's review-form operations, as the /r/<token> page calls them) and the integrator's
 * receiver gets `cascade.recipient.finished`, signed, with the rating, the feedback and the reason.
 */
const MINUTE = 40;

describe('a rating reaches the integrator as a signed cascade.recipient.finished webhook', () => {
  let harness: Harness;
  let webhooks: RunningWebhooks;
  let sender: Awaited<ReturnType<typeof startScriptedSender>>;
  const receiver = new Receiver();
  let secret: string;
  let flowId: string;

  beforeAll(async () => {
    harness = await startHarness({ minuteMs: MINUTE, feedbackWindowMinutes: 100 });
    sender = await startScriptedSender(harness.tb.bus, ['EMAIL', 'SMS']);
    await receiver.start();
    webhooks = await startWebhooks(
      testWebhooksConfig(harness.db.url, harness.tb.prefix, { policy: { retryScheduleMs: [0, 100, 100], timeoutMs: 2000, disableAfterMs: 60_000, secretGraceMs: 60_000 } }),
      harness.ctx,
      { bus: harness.tb.bus },
    );
    ({ secret } = await webhooks.endpoints.create({ organizationId: ORG, url: receiver.url('/crm'), events: ['cascade.recipient.finished'], description: 'CRM' }));
    flowId = (await harness.scheduler.flows.create({ organizationId: ORG, name: 'two', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 10 }] })).id;
  });
  afterAll(async () => {
    await sender.stop();
    await harness.close();
    await receiver.stop();
  });

  async function rateable(email: string, phone = '+79000003001') {
    const { result } = await harness.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId, channel: '', externalId: `crm-${email}`, recipients: [{ name: 'Rita', email, phone }] });
    await waitFor(async () => (await harness.scheduler.cascades.get(ORG, result.id)).recipients[0].steps[0].status === 'sent', { what: 'first step sent' });
    const { rows } = await harness.pool.query('SELECT rr.token FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id WHERE r.cascade_id = $1', [result.id]);
    return { cascadeId: result.id, token: rows[0].token as string };
  }

  const bodies = (email: string) =>
    receiver.at('/crm').map((r) => ({ raw: r, body: JSON.parse(r.body) as { type: string; data: { recipient: { email: string } } & Record<string, unknown> } })).filter((x) => x.body.data.recipient?.email === email);

  it('delivers the rating and the reason', async () => {
    const { cascadeId, token } = await rateable('five@example.com');
    await harness.scheduler.reviews.getForm(token, true);
    await harness.scheduler.reviews.submitRating(token, 5);
    const [got] = await waitFor(() => bodies('five@example.com').length > 0 && bodies('five@example.com'), { what: 'webhook received', timeoutMs: 15_000 });
    expect(new Webhook(secret).verify(got.raw.body, got.raw.headers)).toEqual(got.body);
    expect(got.body).toMatchObject({
      type: 'cascade.recipient.finished',
      timestamp: expect.any(String),
      data: { cascadeId, cascadeExternalId: 'crm-five@example.com', rating: 5, reason: 'rated', feedback: null, recipient: { name: 'Rita', email: 'five@example.com' } },
    });
    expect(got.raw.headers['webhook-id']).toEqual(expect.any(String));
  });

  it('delivers the private feedback given after a low rating', async () => {
    const { token } = await rateable('two@example.com');
    await harness.scheduler.reviews.getForm(token, true);
    await harness.scheduler.reviews.submitRating(token, 2);
    await harness.scheduler.reviews.submitFeedback(token, 'The coffee was cold');
    const [got] = await waitFor(() => bodies('two@example.com').length > 0 && bodies('two@example.com'), { what: 'webhook received', timeoutMs: 15_000 });
    expect(got.body.data).toMatchObject({ rating: 2, feedback: 'The coffee was cold', reason: 'rated' });
    await new Promise((r) => setTimeout(r, 300));
    expect(bodies('two@example.com')).toHaveLength(1);
  });

  it("erases an erased person's stored events with their deliveries and attempts, once the scheduler announces the erasure; the others' stay", async () => {
    const pool = createPool({ url: harness.db.url, schema: SCHEMA });
    try {
      const rate = async (email: string, phone: string) => {
        const { token } = await rateable(email, phone);
        await harness.scheduler.reviews.getForm(token, true);
        await harness.scheduler.reviews.submitRating(token, 1);
        await harness.scheduler.reviews.submitFeedback(token, `${email} was unhappy`);
        await waitFor(() => bodies(email).length > 0, { what: `the webhook about ${email}`, timeoutMs: 15_000 });
      };
      await rate('erase-me@example.com', '+79000003011');
      await rate('keep-me@example.com', '+79000003012');
      const stored = async (email: string) =>
        (await pool.query<{ events: number; deliveries: number; attempts: number }>(
          `SELECT count(DISTINCT e.id)::int AS events, count(DISTINCT d.id)::int AS deliveries, count(a.number)::int AS attempts
             FROM events e LEFT JOIN deliveries d ON d.event_id = e.id LEFT JOIN attempts a ON a.delivery_id = d.id WHERE e.body LIKE '%' || $1 || '%'`,
          [email],
        )).rows[0];
      await waitFor(async () => (await stored('erase-me@example.com')).attempts > 0 && (await stored('keep-me@example.com')).attempts > 0, { what: 'the attempts recorded' });
      const kept = await stored('keep-me@example.com');

      await erasePerson(harness.pool, new AddressHasher(DEVELOPMENT_PERSON_HASH_KEY), { organizationId: ORG, requestId: 'erasure-webhooks', actor: 'admin', email: 'erase-me@example.com', phone: '', contactExternalId: '' });
      await waitFor(async () => (await stored('erase-me@example.com')).events === 0, { what: "the erased person's events gone", timeoutMs: 15_000 });
      expect(await stored('erase-me@example.com')).toEqual({ events: 0, deliveries: 0, attempts: 0 });
      expect(await stored('keep-me@example.com')).toEqual(kept);
    } finally {
      await pool.end();
    }
  });
});
