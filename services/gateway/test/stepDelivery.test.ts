import { buildConfig, startEmailSender } from '@rrs/channel-email';
import { startScheduler } from '@rrs/cascade-scheduler';
import { startContacts, type RunningContacts } from '@rrs/contacts';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, openApiChecker, startFakePostmark, testContext, waitFor, type FakePostmark, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startGateway } from '../src';
import { startChannelCatalog } from '../src/catalog/channelCatalog';

const TOKEN = 'server-token-1';
const SECRET = 'webhook-secret-0123456789';

interface StepJson { status: string; provider: string | null; delivery: string | null; deliveredAt: string | null; reason: string | null }
interface RecipientJson { email: string; steps: StepJson[] }

/**
 * A step's delivery outcome is a field of its own (issue 34, item 7): GET /api/v1/cascades/{id}, checked
 * against the public OpenAPI document, on the real stack (gateway, contacts, cascade-scheduler,
 * channel-email) with Postmark's fake and its webhooks: a delivery receipt → `delivered`, a hard bounce →
 * `undelivered` (status stays `sent`), no receipt → `unknown`, never sent → null; a step Postmark refused
 * fails with the provider that refused it.
 */
describe('step delivery outcome and the provider of a failed step', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let contacts: RunningContacts;
  let postmark: FakePostmark;
  let base: string;
  let apiKey: string;
  let locationId: string;
  const ctx = testContext('gateway-step-delivery');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    pool = createPool({ url: db.url, schema: 'channel_email' });
    postmark = await startFakePostmark({ serverToken: TOKEN });
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    const scheduler = await startScheduler(
      { databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://reviews.test', minuteMs: 40 },
      ctx,
      { bus: tb.bus, channelsCacheMs: 0 },
    );
    const catalog = await startChannelCatalog({ bus: tb.bus, logger: ctx.logger });
    ctx.lifecycle.onStop('catalog', () => catalog.stop());
    const gateway = await startGateway(
      { host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`, publicBaseUrl: 'http://reviews.test' },
      ctx,
      { channelCatalog: catalog },
    );
    base = gateway.url;
    const config = buildConfig({ DATABASE_URL: db.url, EMAIL_FROM: 'Acme <reviews@acme.test>', POSTMARK_SERVER_TOKEN: TOKEN, POSTMARK_API_URL: postmark.url, POSTMARK_WEBHOOK_SECRET: SECRET, EMAIL_RECEIPTS_HOST: '127.0.0.1', EMAIL_RECEIPTS_PORT: '0' });
    const email = await startEmailSender({ ...config, concurrency: 4, ackWaitMs: 5_000 }, ctx, { bus: tb.bus, pool });
    postmark.webhookUrl = `http://postmark:${SECRET}@127.0.0.1:${email.receiptsPort}/receipts/postmark`;
    ctx.health.setReady(true);
    const organization = await contacts.directory.createOrganization({ name: 'outcomes', plan: 'standard', emailConfirmed: true, locale: 'en', defaultRegion: 'GB', smsBalance: 0, sendWindow: null, cooldownDays: 0 });
    await contacts.channels.set({ organizationId: organization.id, channel: 'EMAIL', configured: true });
    apiKey = (await contacts.directory.issueApiKey({ organizationId: organization.id })).secret;
    locationId = (await contacts.directory.createLocation({ organizationId: organization.id, name: 'Dental', address: 'Main St 3', city: 'London', timeZone: 'Europe/London', reviewLinks: [] })).id;
  });
  afterAll(async () => {
    await ctx.stop();
    await postmark?.close();
    await tb?.cleanup();
    await pool?.end();
    await db?.drop();
  });

  const call = async (method: string, path: string, body?: unknown) => {
    const api = await openApiChecker(`${base}/api/v1/openapi.json`);
    return api.fetch(`${base}/api/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  };
  const recipientsOf = async (id: string) => {
    const res = await call('GET', `/cascades/${id}`);
    expect(res.status).toBe(200);
    return (res.body as { recipients: RecipientJson[] }).recipients;
  };
  const stepOf = (recipients: RecipientJson[], email: string) => recipients.find((r) => r.email === email)!.steps[0];

  it('answers delivered, undelivered, unknown and null, and names the provider that refused a failed step', async () => {
    postmark.deactivate('refused@example.com');
    const emails = ['here@example.com', 'gone@example.com', 'quiet@example.com', 'refused@example.com'];
    const started = await call('POST', '/channels/email/send', { locationId, recipients: emails.map((email) => ({ email })) });
    expect(started.status).toBe(202);
    const id = (started.body as { id: string }).id;
    await waitFor(async () => {
      const recipients = await recipientsOf(id);
      return recipients.every((r) => ['sent', 'failed'].includes(r.steps[0].status)) || undefined;
    }, { what: 'every step sent or failed' });
    // Sent, no receipt yet: unknown.
    expect(stepOf(await recipientsOf(id), 'here@example.com')).toMatchObject({ status: 'sent', provider: 'postmark', delivery: 'unknown', deliveredAt: null });
    // Postmark refused the inactive recipient (406): failed, with the provider that refused it; never went out.
    expect(stepOf(await recipientsOf(id), 'refused@example.com')).toMatchObject({ status: 'failed', provider: 'postmark', delivery: null });

    const messageOf = (to: string) => postmark.messages.find((m) => m.To === to)!.MessageID;
    await expect(postmark.deliver(messageOf('here@example.com'))).resolves.toMatchObject({ status: 200 });
    await expect(postmark.bounce(messageOf('gone@example.com'), 'HardBounce')).resolves.toMatchObject({ status: 200 });
    const recipients = await waitFor(async () => {
      const now = await recipientsOf(id);
      return stepOf(now, 'here@example.com').delivery === 'delivered' && stepOf(now, 'gone@example.com').delivery === 'undelivered' ? now : undefined;
    }, { what: 'the receipts on the steps' });
    expect(stepOf(recipients, 'here@example.com')).toMatchObject({ status: 'sent', delivery: 'delivered', deliveredAt: expect.any(String) });
    expect(stepOf(recipients, 'gone@example.com')).toMatchObject({ status: 'sent', delivery: 'undelivered', reason: 'undelivered: hard_bounce', provider: 'postmark' });
    expect(stepOf(recipients, 'quiet@example.com')).toMatchObject({ status: 'sent', delivery: 'unknown' });
  });
});
