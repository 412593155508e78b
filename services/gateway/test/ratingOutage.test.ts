import type { Browser } from 'playwright-core';
import { startContacts, type RunningContacts } from '@rrs/contacts';
import { startScheduler, type RunningScheduler } from '@rrs/cascade-scheduler';
import { connectJetStreamBus, createPool, type Bus, type Pool } from '@rrs/runtime';
import { createTestDatabase, launchBrowser, startPrivateNats, testContext, uniqueName, waitFor, type PrivateServer, type TestDatabase } from '@rrs/testkit';
import { startGateway } from '../src';
import { startScriptedSender, type ScriptedSender } from '../../cascade-scheduler/test/harness';

/** One flow minute, in ms: the SMS reminder follows the email by 40 flow minutes (4 s), time enough to stop the scheduler first. */
const MINUTE = 100;

/**
 * No rating is lost while the scheduler (or its database) is down, and no reminder goes to a customer
 * whose rating was accepted: the form leaves the rating on the RATINGS stream and thanks the customer;
 * with the bus down too, its keep-trying page (503, Retry-After) sends the rating again by itself.
 * Gateway, contacts and cascade-scheduler on a private NATS server this test stops and restarts.
 */
describe('review form while the scheduler is down', () => {
  let db: TestDatabase;
  let nats: PrivateServer;
  let bus: Bus;
  let contacts: RunningContacts;
  let pool: Pool;
  let sender: ScriptedSender;
  let browser: Browser;
  let base: string;
  let apiKey: string;
  let locationId: string;
  let schedulerPort = 0;
  const contactsCtx = testContext('contacts');
  const gatewayCtx = testContext('gateway');
  let schedulerCtx: ReturnType<typeof testContext> | null = null;
  let flows: RunningScheduler['flows'] | undefined;

  async function startTheScheduler(): Promise<void> {
    schedulerCtx = testContext('cascade-scheduler');
    const running = await startScheduler(
      { databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: schedulerPort, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://reviews.test', minuteMs: MINUTE },
      schedulerCtx,
      { bus, channelsCacheMs: 0 },
    );
    schedulerPort = running.grpcPort;
    flows = running.flows;
  }
  async function stopTheScheduler(): Promise<void> {
    await schedulerCtx?.stop();
    schedulerCtx = null;
  }

  beforeAll(async () => {
    db = await createTestDatabase();
    nats = await startPrivateNats();
    bus = await connectJetStreamBus({ url: nats.url, prefix: uniqueName('t'), onError: () => undefined });
    await bus.ensureStreams();
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, contactsCtx);
    await startTheScheduler();
    const gateway = await startGateway(
      { host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${schedulerPort}`, publicBaseUrl: 'http://reviews.test' },
      gatewayCtx,
      { bus },
    );
    base = gateway.url;
    const org = await contacts.directory.createOrganization({ name: 'Кофейня', plan: 'standard', emailConfirmed: true, locale: 'ru', defaultRegion: 'RU', cooldownDays: 0 });
    apiKey = (await contacts.directory.issueApiKey({ organizationId: org.id })).secret;
    for (const channel of ['EMAIL', 'SMS']) await contacts.channels.set({ organizationId: org.id, channel, configured: true });
    locationId = (await contacts.directory.createLocation({ organizationId: org.id, name: 'Тверская', address: 'Тверская 1', city: 'Москва', timeZone: 'Europe/Moscow', reviewLinks: [] })).id;
    await flows!.create({ organizationId: org.id, name: 'Письмо, потом SMS', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 40 }] });
    sender = await startScriptedSender(bus, ['EMAIL', 'SMS']);
    pool = createPool({ url: db.url, schema: 'scheduler' });
    browser = await launchBrowser();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await sender?.stop();
    await pool?.end();
    await gatewayCtx.stop();
    await stopTheScheduler();
    await contactsCtx.stop();
    await bus?.close().catch(() => undefined);
    await nats?.remove();
    await db?.drop();
  });

  /** A cascade of one recipient whose email went out: its review link token. */
  async function emailedRecipient(email: string): Promise<{ token: string; cascadeId: string }> {
    const res = await fetch(`${base}/api/v1/cascades`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ locationId, recipients: [{ name: 'Анна', email, phone: '+79161234567' }] }),
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    const step = await waitFor(() => sender.received.find((s) => s.cascadeId === id), { what: 'the email sent' });
    return { token: step.reviewUrl.split('/r/')[1], cascadeId: id };
  }

  const smsSentTo = (cascadeId: string) => sender.received.filter((s) => s.cascadeId === cascadeId && s.channel === 'SMS');
  const smsDue = async (cascadeId: string) => (await pool.query(`SELECT 1 FROM recipient_steps WHERE cascade_id = $1 AND channel = 'SMS' AND due_at < now()`, [cascadeId])).rowCount === 1;
  async function recorded(cascadeId: string): Promise<{ rating: number | null; finish_reason: string | null; sms: string }> {
    const { rows } = await pool.query(
      `SELECT r.rating, r.finish_reason, (SELECT s.status FROM recipient_steps s WHERE s.recipient_id = r.id AND s.channel = 'SMS') AS sms FROM recipients r WHERE r.cascade_id = $1`,
      [cascadeId],
    );
    return rows[0];
  }

  it('scheduler down: the rating is accepted with the thank-you (not 500); once the scheduler is back it is recorded first and the SMS reminder never goes out', async () => {
    const { token, cascadeId } = await emailedRecipient('outage@example.com');
    const form = await fetch(`${base}/r/${token}`);
    const cookie = form.headers.get('set-cookie')!.split(';')[0];
    const csrf = /name="csrf" value="([0-9a-f]{32})"/.exec(await form.text())![1];

    await stopTheScheduler();
    const submit = await fetch(`${base}/r/${token}/rating`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf, rating: '4', lang: 'ru' }),
      redirect: 'manual',
    });
    expect(submit.status).toBe(200);
    const thanks = await submit.text();
    expect(thanks).toContain('Спасибо за оценку!');
    expect(thanks).toContain('Ваша оценка: 4 из 5');
    expect(thanks).toContain('Ваша оценка сохранена.');
    expect(await bus.pending('RATINGS', 'scheduler-ratings').catch(() => null)).not.toBe(0);

    // Opening the link meanwhile: 503 with Retry-After and a page that reloads itself, never 500.
    const view = await fetch(`${base}/r/${token}`);
    expect(view.status).toBe(503);
    expect(view.headers.get('retry-after')).toBe('5');
    expect(await view.text()).toContain('<meta http-equiv="refresh" content="5">');

    // Feedback meanwhile: 503 with Retry-After too.
    const feedback = await fetch(`${base}/r/${token}/feedback`, {
      method: 'POST',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf, text: 'Холодный кофе' }),
      redirect: 'manual',
    });
    expect([feedback.status, feedback.headers.get('retry-after')]).toEqual([503, '5']);

    await waitFor(() => smsDue(cascadeId), { what: 'the SMS reminder due while the scheduler is down' });
    await startTheScheduler();
    await waitFor(async () => (await recorded(cascadeId)).rating === 4, { what: 'the rating recorded' });
    expect(await recorded(cascadeId)).toEqual({ rating: 4, finish_reason: 'rated', sms: 'canceled' });
    expect(smsSentTo(cascadeId)).toEqual([]);
    // The gateway's channel to the scheduler reconnects within its backoff (at most 5 s).
    const again = await waitFor(async () => {
      const res = await fetch(`${base}/r/${token}`);
      return res.status === 200 && res;
    }, { what: 'the form served again', timeoutMs: 10_000 });
    expect(await again.text()).toContain('Ваша оценка: 4 из 5');
  });

  it('scheduler and NATS down: the keep-trying page (503, Retry-After) in the form\'s language sends the rating again by itself until it is accepted', async () => {
    const { token, cascadeId } = await emailedRecipient('keep-trying@example.com');
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, locale: 'ru-RU' });
    const page = await context.newPage();
    await page.goto(`${base}/r/${token}`);

    await stopTheScheduler();
    await nats.stop();
    await waitFor(() => !bus.isConnected(), { what: 'the bus disconnected' });
    await page.locator('label[for="star4"]').tap();
    const answered = page.waitForResponse((res) => res.url().endsWith(`/r/${token}/rating`));
    await page.getByRole('button', { name: 'Отправить оценку' }).tap();
    const first = await answered;
    expect(first.status()).toBe(503);
    expect(first.headers()['retry-after']).toBe('5');
    await expect(page.getByTestId('keep-trying').textContent()).resolves.toContain('Мы будем пробовать снова');
    await expect(page.getByTestId('your-rating').textContent()).resolves.toBe('Ваша оценка: 4 из 5');

    // Each re-send waits twice as long, up to 60 s: what a later attempt of the same form is told.
    const csrf = await page.locator('#retry input[name="csrf"]').getAttribute('value');
    expect(await page.locator('#retry input[name="attempt"]').getAttribute('value')).toBe('1');
    const cookie = (await context.cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    for (const [attempt, wait] of [['1', '10'], ['3', '40'], ['4', '60'], ['9', '60']]) {
      const later = await fetch(`${base}/r/${token}/rating`, {
        method: 'POST',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ csrf: csrf!, rating: '4', lang: 'ru', attempt }),
      });
      expect([later.status, later.headers.get('retry-after')]).toEqual([503, wait]);
      expect(later.headers.get('content-security-policy')).toMatch(/script-src 'sha256-[A-Za-z0-9+/]+=*'/);
    }

    // The bus comes back first: the page's own re-send is accepted onto the stream.
    await nats.start();
    await waitFor(() => bus.isConnected(), { what: 'the bus reconnected', timeoutMs: 15_000 });
    await page.getByTestId('saved-later').waitFor({ timeout: 30_000 });
    await expect(page.getByTestId('your-rating').textContent()).resolves.toBe('Ваша оценка: 4 из 5');
    await context.close();

    await startTheScheduler();
    await waitFor(async () => (await recorded(cascadeId)).rating === 4, { what: 'the rating recorded', timeoutMs: 15_000 });
    expect((await recorded(cascadeId)).rating).toBe(4);
  });
});
