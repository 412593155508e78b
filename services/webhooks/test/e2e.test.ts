import type { Browser } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { startContacts } from '@rrs/contacts';
import { startScheduler } from '@rrs/cascade-scheduler';
import { startGateway } from '@rrs/gateway';
import { createTestBus, createTestDatabase, launchBrowser, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startWebhooks } from '../src';
import { startScriptedSender } from '../../cascade-scheduler/test/harness';
import { Receiver } from './support/receiver';
import { testWebhooksConfig } from './support/service';

/**
 * End to end, every part real except the channel provider (a scripted sender answers each step SENT):
 * the integrator registers a webhook and starts a cascade over the public API; the recipient rates on
 * the review form in headless Chromium and leaves feedback; the integrator's receiver gets
 * `cascade.recipient.finished`, signed, with the rating, the feedback and the reason.
 */
/**
 * The low rating's event waits this long (60 s at 40 ms a minute) for the feedback, far longer than the
 * browser takes to send it on a loaded machine: the event must come because the feedback released it,
 * not because the window ran out first (which on a slow run sent it without the feedback).
 */
const FEEDBACK_WINDOW_MINUTES = 1_500;

describe('a recipient rates on the form → the integrator receives cascade.recipient.finished', () => {
  let db: TestDatabase;
  let tb: TestBus;
  const ctx = testContext('webhooks-e2e');
  let browser: Browser;
  let sender: Awaited<ReturnType<typeof startScriptedSender>>;
  const receiver = new Receiver();
  let base: string;
  let key: string;
  let locationId: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    await tb.bus.ensureStreams();
    await receiver.start();
    const contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    const scheduler = await startScheduler(
      { databaseUrl: db.url, busPrefix: tb.prefix, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://reviews.test', minuteMs: 40, feedbackWindowMinutes: FEEDBACK_WINDOW_MINUTES },
      ctx,
      { bus: tb.bus, channelsCacheMs: 0 },
    );
    const webhooks = await startWebhooks(
      testWebhooksConfig(db.url, tb.prefix),
      ctx,
      { bus: tb.bus },
    );
    const gateway = await startGateway(
      { host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`, webhooksAddress: `127.0.0.1:${webhooks.grpcPort}`, publicBaseUrl: 'http://reviews.test' },
      ctx,
    );
    ctx.health.setReady(true);
    base = gateway.url;
    const org = await contacts.directory.createOrganization({ name: 'Coffee Co', plan: 'standard', emailConfirmed: true, locale: 'en', defaultRegion: 'RU', sendWindow: null, cooldownDays: 0 });
    key = (await contacts.directory.issueApiKey({ organizationId: org.id })).secret;
    for (const channel of ['EMAIL', 'SMS']) await contacts.channels.set({ organizationId: org.id, channel, configured: true });
    locationId = (await contacts.directory.createLocation({ organizationId: org.id, name: 'Tverskaya', address: 'Tverskaya 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'google', url: 'https://g.example/r' }] })).id;
    await scheduler.flows.create({ organizationId: org.id, name: 'Email then SMS', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 1440 }] });
    sender = await startScriptedSender(tb.bus, ['EMAIL', 'SMS']);
    browser = await launchBrowser();
  }, 30_000);
  afterAll(async () => {
    await browser?.close();
    await sender?.stop();
    await ctx.stop();
    await receiver.stop();
    await tb.cleanup();
    await db.drop();
  });

  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}/api/v1${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as Record<string, any> };
  };

  it('delivers the rating, the feedback and the reason, signed', async () => {
    receiver.reply = () => ({ status: 204 });
    const hook = await api('POST', '/webhooks', { url: receiver.url('/crm/reviews'), events: ['cascade.recipient.finished'], description: 'CRM' });
    expect(hook.status).toBe(201);

    const started = await api('POST', '/cascades', { locationId, externalId: 'order-1042', recipients: [{ name: 'Anna', email: 'anna@example.com', phone: '+79161234567' }] });
    expect(started.status).toBe(202);
    const cascadeId = started.body.id as string;
    const step = await waitFor(() => sender.received.find((s) => s.cascadeId === cascadeId), { what: 'email step sent' });
    const token = step.reviewUrl.split('/r/')[1];

    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, locale: 'en-US' });
    const page = await context.newPage();
    await page.goto(`${base}/r/${token}`);
    await page.locator('label[for="star2"]').tap();
    await page.getByRole('button', { name: 'Send rating' }).tap();
    await page.locator('textarea[name="text"]').fill('Coffee was cold');
    await page.getByRole('button', { name: 'Send to the team' }).tap();
    await page.getByTestId('feedback-thanks').waitFor();
    await context.close();

    const [got] = await waitFor(() => receiver.at('/crm/reviews').length > 0 && receiver.at('/crm/reviews'), { what: 'webhook received', timeoutMs: 15_000 });
    const event = new Webhook(hook.body.secret).verify(got.body, got.headers) as { type: string; data: Record<string, any> };
    expect(event.type).toBe('cascade.recipient.finished');
    expect(event.data).toMatchObject({
      cascadeId,
      cascadeExternalId: 'order-1042',
      rating: 2,
      feedback: 'Coffee was cold',
      reason: 'rated',
      recipient: { name: 'Anna', email: 'anna@example.com' },
    });
    expect(event.data.steps.map((s: { status: string }) => s.status)).toEqual(['sent', 'canceled']);

    const log = await waitFor(async () => {
      const response = await api('GET', `/webhooks/${hook.body.id}/deliveries`);
      return response.body.deliveries[0]?.status === 'delivered' && response.body.deliveries;
    });
    expect(log).toHaveLength(1);
    expect(log[0]).toMatchObject({ eventId: got.headers['webhook-id'], eventType: 'cascade.recipient.finished', attemptCount: 1 });
  });
});
