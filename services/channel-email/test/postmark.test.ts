import { busV1 } from '@rrs/proto';
import { startContacts, type RunningContacts } from '@rrs/contacts';
import { startScheduler, type RunningScheduler } from '@rrs/cascade-scheduler';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, startFakePostmark, startSmtpSink, testContext, waitFor, type FakePostmark, type SmtpSink, type TestBus, type TestDatabase } from '@rrs/testkit';
import { collectResults, dueStep, publishStep } from '../../../packages/sender-kit/test/support/steps';
import { buildConfig, postmarkProvider, renderEmail, resultsOfPostmarkEvent, startEmailSender } from '../src';

const Outcome = busV1.StepOutcome;
const TOKEN = 'server-token-1';
const SECRET = 'webhook-secret-0123456789';
const FROM = 'Acme Reviews <reviews@acme.test>';

describe('Postmark adapter against the fake Postmark API', () => {
  let postmark: FakePostmark;
  const provider = (token = TOKEN) => postmarkProvider({ baseUrl: postmark.url, serverToken: token, from: FROM, messageStream: 'outbound', timeoutMs: 2_000 });
  const message = (email: string) => {
    const step = dueStep('EMAIL', { recipient: { name: 'Anna', email, phone: '' } });
    return { step, message: renderEmail(step, FROM), ctx: { idempotencyKey: step.stepId, resumed: false } };
  };

  beforeEach(async () => {
    postmark = await startFakePostmark({ serverToken: TOKEN });
  });
  afterEach(() => postmark.close());

  it('sends our HTML and text parts, the one-click unsubscribe headers and the step id as metadata, and answers the MessageID', async () => {
    const { step, message: email, ctx } = message('anna@example.com');
    const sent = await provider().send(email, ctx);
    expect(postmark.messages).toHaveLength(1);
    const [taken] = postmark.messages;
    expect(sent).toEqual({ providerMessageId: taken.MessageID });
    expect(taken).toMatchObject({ From: FROM, To: 'anna@example.com', Subject: email.subject, HtmlBody: email.html, TextBody: email.text, MessageStream: 'outbound', Metadata: { rrs_step_id: step.stepId } });
    expect(taken.Headers).toEqual(expect.arrayContaining([{ Name: 'List-Unsubscribe', Value: `<${step.unsubscribeUrl}>` }, { Name: 'List-Unsubscribe-Post', Value: 'List-Unsubscribe=One-Click' }]));
  });

  it('sorts the answers: a refused token and an invalid request (300) are provider faults (fail over), an inactive recipient ends the step, a 500 may have been delivered', async () => {
    await expect(provider('wrong').send(message('a@example.com').message, message('a@example.com').ctx)).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'provider_auth_failed', maybeDelivered: false });
    postmark.deactivate('gone@example.com');
    const gone = message('gone@example.com');
    await expect(provider().send(gone.message, gone.ctx)).rejects.toMatchObject({ name: 'PermanentSendError', reason: 'recipient_inactive' });
    const bad = message('not-an-address');
    await expect(provider().send(bad.message, bad.ctx)).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'provider_request_refused', maybeDelivered: false });
    await postmark.outage('http500');
    const later = message('b@example.com');
    await expect(provider().send(later.message, later.ctx)).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'provider_unavailable', maybeDelivered: true });
    expect(postmark.messages).toHaveLength(0);
  });

  it('looks a message up by its step id: found after a send that answered 500, not found for a step never sent', async () => {
    await postmark.outage('accept500');
    const taken = message('c@example.com');
    await expect(provider().send(taken.message, taken.ctx)).rejects.toMatchObject({ maybeDelivered: true });
    await postmark.outage('none');
    await expect(provider().lookup!(taken.message, { ...taken.ctx, resumed: true })).resolves.toEqual({ found: true, providerMessageId: postmark.messages[0].MessageID });
    const never = message('c@example.com');
    await expect(provider().lookup!(never.message, { ...never.ctx, resumed: true })).resolves.toEqual({ found: false });
  });

  it('maps webhook events to step results: delivered, hard bounce (undelivered and opted out), complaint, suppression; delays and opens end nothing', () => {
    expect(resultsOfPostmarkEvent({ RecordType: 'Delivery', MessageID: 'm' })).toEqual([{ outcome: Outcome.STEP_OUTCOME_DELIVERED, reason: 'delivered' }]);
    expect(resultsOfPostmarkEvent({ RecordType: 'Bounce', MessageID: 'm', Type: 'HardBounce' })).toEqual([
      { outcome: Outcome.STEP_OUTCOME_UNDELIVERED, reason: 'hard_bounce' },
      { outcome: Outcome.STEP_OUTCOME_OPTED_OUT, reason: 'hard_bounce' },
    ]);
    expect(resultsOfPostmarkEvent({ RecordType: 'Bounce', MessageID: 'm', Type: 'SoftBounce' })).toEqual([{ outcome: Outcome.STEP_OUTCOME_UNDELIVERED, reason: 'soft_bounce' }]);
    expect(resultsOfPostmarkEvent({ RecordType: 'Bounce', MessageID: 'm', Type: 'DMARCPolicy' })).toEqual([{ outcome: Outcome.STEP_OUTCOME_UNDELIVERED, reason: 'dmarc_policy' }]);
    expect(resultsOfPostmarkEvent({ RecordType: 'Bounce', MessageID: 'm', Type: 'Unsubscribe' })).toEqual([{ outcome: Outcome.STEP_OUTCOME_OPTED_OUT, reason: 'stop_reply' }]);
    expect(resultsOfPostmarkEvent({ RecordType: 'SpamComplaint', MessageID: 'm' })).toEqual([{ outcome: Outcome.STEP_OUTCOME_OPTED_OUT, reason: 'complaint' }]);
    expect(resultsOfPostmarkEvent({ RecordType: 'SubscriptionChange', MessageID: 'm', SuppressSending: true, SuppressionReason: 'ManualSuppression' })).toEqual([{ outcome: Outcome.STEP_OUTCOME_OPTED_OUT, reason: 'stop_reply' }]);
    expect(resultsOfPostmarkEvent({ RecordType: 'SubscriptionChange', MessageID: 'm', SuppressSending: false, SuppressionReason: 'ManualSuppression' })).toEqual([]);
    expect(resultsOfPostmarkEvent({ RecordType: 'Bounce', MessageID: 'm', Type: 'Transient' })).toEqual([]);
    expect(resultsOfPostmarkEvent({ RecordType: 'Open', MessageID: 'm' })).toEqual([]);
  });
});

describe('channel-email with SMTP first and Postmark second: failover and webhooks', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let postmark: FakePostmark;
  let smtp: SmtpSink;
  let results: busV1.StepResult[];
  let smtpDown = false;
  const ctx = testContext('email-postmark');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: 'channel_email' });
    postmark = await startFakePostmark({ serverToken: TOKEN });
    smtp = await startSmtpSink({ onRcptTo: () => (smtpDown ? { code: 421, message: '4.3.2 Service not available' } : undefined) });
    results = (await collectResults(tb.bus)).results;
    const config = buildConfig({
      DATABASE_URL: db.url, EMAIL_FROM: FROM, SMTP_URL: `smtp://127.0.0.1:${smtp.port}`, SMTP_TIMEOUT_MS: '1000',
      POSTMARK_SERVER_TOKEN: TOKEN, POSTMARK_API_URL: postmark.url, POSTMARK_WEBHOOK_SECRET: SECRET,
      EMAIL_RECEIPTS_HOST: '127.0.0.1', EMAIL_RECEIPTS_PORT: '0', PROVIDER_CIRCUIT_FAILURES: '2',
    });
    expect(config.providers).toEqual(['smtp', 'postmark']);
    const email = await startEmailSender({ ...config, concurrency: 2, ackWaitMs: 5_000 }, ctx, { bus: tb.bus, pool });
    postmark.webhookUrl = `http://postmark:${SECRET}@127.0.0.1:${email.receiptsPort}/receipts/postmark`;
  });
  afterAll(async () => {
    await ctx.stop();
    await postmark.close();
    smtpDown = true;
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  async function send(address: string) {
    const step = dueStep('EMAIL', { recipient: { name: 'Anna', email: address, phone: '' } });
    await publishStep(tb.bus, step);
    const sent = await waitFor(() => results.find((r) => r.stepId === step.stepId && r.outcome === Outcome.STEP_OUTCOME_SENT), { what: `the result for ${address}` });
    return { step, sent };
  }

  it('sends through SMTP while it answers, then through Postmark while the SMTP server answers 421 (not available); each message once', async () => {
    const first = await send('one@example.com');
    expect(first.sent.provider).toBe('smtp');
    expect(smtp.messages.filter((m) => m.to.includes('one@example.com'))).toHaveLength(1);
    smtpDown = true;
    const second = await send('two@example.com');
    expect(second.sent).toMatchObject({ provider: 'postmark', providerMessageId: postmark.messages.find((m) => m.To === 'two@example.com')!.MessageID });
    expect(postmark.messages.filter((m) => m.To === 'one@example.com')).toHaveLength(0);
    expect(smtp.timesAccepted('two@example.com')).toBe(0);
    const { rows } = await pool.query<{ provider: string }>(`SELECT provider FROM send_log WHERE step_id = $1`, [second.step.stepId]);
    expect(rows).toEqual([{ provider: 'postmark' }]);
  });

  it('takes Postmark webhooks with the URL credentials: a delivery, a hard bounce (undelivered, then the opt-out ledger), a complaint', async () => {
    const delivered = await send('three@example.com');
    const bounced = await send('four@example.com');
    const complained = await send('five@example.com');
    for (const sent of [delivered, bounced, complained]) expect(sent.sent.provider).toBe('postmark');
    await expect(postmark.deliver(delivered.sent.providerMessageId)).resolves.toEqual({ status: 200, body: 'OK' });
    await expect(postmark.bounce(bounced.sent.providerMessageId, 'HardBounce')).resolves.toEqual({ status: 200, body: 'OK' });
    await expect(postmark.complain(complained.sent.providerMessageId)).resolves.toEqual({ status: 200, body: 'OK' });
    const of = (stepId: string) => results.filter((r) => r.stepId === stepId && r.outcome !== Outcome.STEP_OUTCOME_SENT);
    await waitFor(() => of(complained.step.stepId).length === 1, { what: 'the complaint' });
    await waitFor(() => of(bounced.step.stepId).length === 2, { what: 'the bounce' });
    expect(of(delivered.step.stepId)).toMatchObject([{ outcome: Outcome.STEP_OUTCOME_DELIVERED, reason: 'delivered', provider: 'postmark' }]);
    expect(of(bounced.step.stepId).map((r) => [r.outcome, r.reason])).toEqual([[Outcome.STEP_OUTCOME_UNDELIVERED, 'hard_bounce'], [Outcome.STEP_OUTCOME_OPTED_OUT, 'hard_bounce']]);
    expect(of(complained.step.stepId).map((r) => [r.outcome, r.reason])).toEqual([[Outcome.STEP_OUTCOME_OPTED_OUT, 'complaint']]);
  });

  it('refuses a call without the credentials (401) or with a body that is not an event (400), and applies nothing; an unknown message or a delay is 200', async () => {
    const { sent, step } = await send('six@example.com');
    const before = results.length;
    const event = JSON.stringify({ RecordType: 'Bounce', Type: 'HardBounce', MessageID: sent.providerMessageId });
    await expect(postmark.post(event, { auth: false })).resolves.toMatchObject({ status: 401 });
    const forged = await fetch(postmark.webhookUrl!.replace(`postmark:${SECRET}@`, ''), { method: 'POST', headers: { authorization: `Basic ${Buffer.from('postmark:wrong-secret-0123456789').toString('base64')}` }, body: event });
    expect(forged.status).toBe(401);
    await expect(postmark.post('not json')).resolves.toMatchObject({ status: 400 });
    await expect(postmark.post(JSON.stringify({ RecordType: 'Bounce', Type: 'HardBounce' }))).resolves.toMatchObject({ status: 400 });
    await expect(postmark.post(JSON.stringify({ RecordType: 'Delivery', MessageID: 'no-such-message' }))).resolves.toEqual({ status: 200, body: 'OK' });
    await expect(postmark.bounce(sent.providerMessageId, 'Transient', 2)).resolves.toEqual({ status: 200, body: 'OK' });
    // A later, applied result proves the bus had time to carry anything the refused calls published.
    await postmark.deliver(sent.providerMessageId);
    await waitFor(() => results.some((r) => r.stepId === step.stepId && r.outcome === Outcome.STEP_OUTCOME_DELIVERED), { what: 'the delivery' });
    expect(results.slice(before).map((r) => r.outcome)).toEqual([Outcome.STEP_OUTCOME_DELIVERED]);
  });
});

describe('a Postmark hard bounce on the real stack', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let contacts: RunningContacts;
  let scheduler: RunningScheduler;
  let postmark: FakePostmark;
  const ctx = testContext('email-postmark-stack');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    pool = createPool({ url: db.url, schema: 'channel_email' });
    postmark = await startFakePostmark({ serverToken: TOKEN });
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    scheduler = await startScheduler(
      { databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://reviews.test', minuteMs: 40 },
      ctx,
      { bus: tb.bus, channelsCacheMs: 0 },
    );
    const config = buildConfig({ DATABASE_URL: db.url, EMAIL_FROM: FROM, POSTMARK_SERVER_TOKEN: TOKEN, POSTMARK_API_URL: postmark.url, POSTMARK_WEBHOOK_SECRET: SECRET, EMAIL_RECEIPTS_HOST: '127.0.0.1', EMAIL_RECEIPTS_PORT: '0' });
    const email = await startEmailSender({ ...config, concurrency: 2, ackWaitMs: 5_000 }, ctx, { bus: tb.bus, pool });
    postmark.webhookUrl = `http://postmark:${SECRET}@127.0.0.1:${email.receiptsPort}/receipts/postmark`;
  });
  afterAll(async () => {
    await ctx.stop();
    await postmark.close();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  it('records a delivery receipt on the step (deliveredAt) and in the counts, with the provider that took the message', async () => {
    const organization = await contacts.directory.createOrganization({ name: 'deliveries', plan: 'standard', emailConfirmed: true, locale: 'en', defaultRegion: 'GB', smsBalance: 0, sendWindow: null, cooldownDays: 0 });
    await contacts.channels.set({ organizationId: organization.id, channel: 'EMAIL', configured: true });
    const location = await contacts.directory.createLocation({ organizationId: organization.id, name: 'Dental', address: 'Main St 2', city: 'London', timeZone: 'Europe/London', reviewLinks: [] });
    const { result } = await scheduler.cascades.start({
      organizationId: organization.id, locationId: location.id, name: '', flowId: '', channel: 'EMAIL', externalId: '',
      recipients: [{ name: 'Here', email: 'here@example.com', phone: '', contactId: '', contactExternalId: '' }],
    });
    await waitFor(async () => (await scheduler.cascades.get(organization.id, result.id)).recipients[0].steps[0].status === 'sent', { what: 'the email sent' });
    const taken = postmark.messages.find((m) => m.To === 'here@example.com')!;
    await expect(postmark.deliver(taken.MessageID)).resolves.toMatchObject({ status: 200 });
    const cascade = await waitFor(async () => {
      const now = await scheduler.cascades.get(organization.id, result.id);
      return now.recipients[0].steps[0].deliveredAt ? now : undefined;
    }, { what: 'the delivery on the step' });
    expect(cascade.recipients[0].steps[0]).toMatchObject({ status: 'sent', provider: 'postmark', reason: '' });
    expect(cascade.counts.filter((c) => c.key.startsWith('steps')).map((c) => [c.key, c.value])).toEqual(expect.arrayContaining([['stepsDelivered', 1], ['stepsUndelivered', 0], ['stepsSent', 1]]));
  });

  it('records the step undelivered, finishes the recipient unsubscribed, and skips the address in the next cascade', async () => {
    const organization = await contacts.directory.createOrganization({ name: 'bounces', plan: 'standard', emailConfirmed: true, locale: 'en', defaultRegion: 'GB', smsBalance: 0, sendWindow: null, cooldownDays: 0 });
    await contacts.channels.set({ organizationId: organization.id, channel: 'EMAIL', configured: true });
    const location = await contacts.directory.createLocation({ organizationId: organization.id, name: 'Dental', address: 'Main St 1', city: 'London', timeZone: 'Europe/London', reviewLinks: [] });
    const start = () =>
      scheduler.cascades.start({
        organizationId: organization.id, locationId: location.id, name: '', flowId: '', channel: 'EMAIL', externalId: '',
        recipients: [{ name: 'Gone', email: 'gone@example.com', phone: '', contactId: '', contactExternalId: '' }],
      });
    const { result } = await start();
    await waitFor(async () => (await scheduler.cascades.get(organization.id, result.id)).recipients[0].steps[0].status === 'sent', { what: 'the email sent' });
    const taken = postmark.messages.find((m) => m.To === 'gone@example.com')!;
    await expect(postmark.bounce(taken.MessageID, 'HardBounce')).resolves.toMatchObject({ status: 200 });
    const finished = await waitFor(async () => {
      const cascade = await scheduler.cascades.get(organization.id, result.id);
      return cascade.recipients[0].finishReason === 'unsubscribed' && cascade.recipients[0].steps[0].reason ? cascade : undefined;
    }, { what: 'the recipient unsubscribed with the bounce on its step' });
    expect(finished.recipients[0]).toMatchObject({ status: 'finished', finishReason: 'unsubscribed' });
    expect(finished.recipients[0].steps[0]).toMatchObject({ status: 'sent', reason: 'undelivered: hard_bounce', provider: 'postmark' });
    expect(finished.counts.find((c) => c.key === 'stepsUndelivered')?.value).toBe(1);

    const again = await start();
    const skipped = await scheduler.cascades.get(organization.id, again.result.id);
    expect(skipped.recipients[0].steps[0]).toMatchObject({ status: 'skipped', reason: 'opted_out' });
    expect(postmark.messages.filter((m) => m.To === 'gone@example.com')).toHaveLength(1);
  });
});
