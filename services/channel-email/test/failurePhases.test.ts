import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { busV1 } from '@rrs/proto';
import { createPool, registry as metricsRegistry, type Pool } from '@rrs/runtime';
import { PermanentSendError, ProviderChain, RetryableSendError } from '@rrs/sender-kit';
import { createTestBus, createTestDatabase, startFakePostmark, startSilentSmtpServer, startSmtpSink, testContext, waitFor, type FakePostmark, type SilentSmtpServer, type SmtpSink, type TestBus, type TestDatabase } from '@rrs/testkit';
import { collectResults, dueStep, publishStep } from '../../../packages/sender-kit/test/support/steps';
import { buildConfig, postmarkProvider, renderEmail, smtpProvider, startEmailSender, type EmailMessage, type EmailProvider } from '../src';

/**
 * Issue 34, items 1 and 4 for email: which SMTP and Postmark failures are "not sent" (fail over at once),
 * "maybe delivered", the recipient's own (no failover, no breaker) or our configuration (fail over, alert).
 * Against the testkit fakes: an SMTP server that never greets, one that answers 451 at RCPT or refuses
 * our MAIL FROM, and Postmark answering ErrorCode 300 for a From it cannot parse.
 */

const Outcome = busV1.StepOutcome;
const TOKEN = 'server-token-phases';
const FROM = 'Acme Reviews <reviews@acme.test>';
const TIMEOUT_MS = 800;

function email(address: string, from = FROM): { message: EmailMessage; ctx: { idempotencyKey: string; resumed: boolean; maybeWith: string[] } } {
  const step = dueStep('EMAIL', { recipient: { name: 'Anna', email: address, phone: '' } });
  return { message: renderEmail(step, from), ctx: { idempotencyKey: step.stepId, resumed: false, maybeWith: [] } };
}

async function alertsOf(channel: string): Promise<Array<[string, string, number]>> {
  const metric = await metricsRegistry.getSingleMetric('sender_provider_alerts_total')!.get();
  return metric.values.filter((v) => v.labels.channel === channel).map((v) => [String(v.labels.provider), String(v.labels.reason), v.value]);
}

describe('SMTP failure phases: only a call that may have reached the server is "maybe delivered"', () => {
  let silent: SilentSmtpServer;
  let postmark: FakePostmark;
  const providers: EmailProvider[] = [];
  beforeAll(async () => {
    silent = await startSilentSmtpServer();
    postmark = await startFakePostmark({ serverToken: TOKEN });
  });
  afterAll(async () => {
    for (const p of providers) p.close();
    await silent.close();
    await postmark.close();
  });

  it('a server that accepts the connection and never greets: every step goes out through Postmark within one timeout, none stays in doubt', async () => {
    const smtp = smtpProvider({ smtpUrl: silent.url, from: FROM, timeoutMs: TIMEOUT_MS, maxConnections: 16 });
    const pm = postmarkProvider({ baseUrl: postmark.url, serverToken: TOKEN, from: FROM, messageStream: 'outbound', timeoutMs: 2_000 });
    providers.push(smtp, pm);
    const chain = new ProviderChain<EmailMessage>('TEST_EMAIL_SILENT', [smtp, pm]);
    const started = Date.now();
    const steps = Array.from({ length: 20 }, (_, i) => email(`silent${i}@example.com`));
    const results = await Promise.all(steps.map((s) => chain.send(s.message, s.ctx).then((sent) => ({ sent, ms: Date.now() - started }), (err: unknown) => ({ err, ms: Date.now() - started }))));
    expect(results.filter((r) => 'err' in r)).toEqual([]);
    expect(results.every((r) => 'sent' in r && r.sent.provider === 'postmark')).toBe(true);
    // One timeout (the greeting's) and Postmark's answer; the bound is one timeout + 5 s.
    expect(Math.max(...results.map((r) => r.ms))).toBeLessThan(TIMEOUT_MS + 1_500);
    expect(postmark.messages.filter((m) => m.To.startsWith('silent'))).toHaveLength(20);
    // The breaker's probe: the silent server saw a handful of connections, not one per step.
    expect(silent.connections).toBeLessThanOrEqual(2);
  });

  it('the adapter alone: no greeting is "not sent" (provider_timeout, not maybe delivered)', async () => {
    const smtp = smtpProvider({ smtpUrl: silent.url, from: FROM, timeoutMs: 300, maxConnections: 1 });
    providers.push(smtp);
    const { message, ctx } = email('alone@example.com');
    await expect(smtp.send(message, ctx)).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'provider_timeout', maybeDelivered: false });
  });
});

describe('recipient-level SMTP errors never open the provider circuit; our configuration fails over and alerts', () => {
  let sink: SmtpSink;
  let postmark: FakePostmark;
  let refuseSender = false;
  const providers: EmailProvider[] = [];
  beforeAll(async () => {
    postmark = await startFakePostmark({ serverToken: TOKEN });
    sink = await startSmtpSink({
      onMailFrom: () => (refuseSender ? { code: 553, message: '5.7.1 Sender address rejected: not owned by user' } : undefined),
      onRcptTo: (address) => {
        if (address.startsWith('grey')) return { code: 451, message: '4.7.1 Greylisted, please try again later' };
        if (address.startsWith('full')) return { code: 452, message: '4.2.2 Mailbox full' };
        if (address.startsWith('nobody')) return { code: 550, message: '5.1.1 No such user' };
        return undefined;
      },
    });
  });
  afterAll(async () => {
    for (const p of providers) p.close();
    await sink.close();
    await postmark.close();
  });

  it('451 and 452 at RCPT for every recipient: retried later for each, nothing moves to Postmark, the SMTP circuit stays closed', async () => {
    const smtp = smtpProvider({ smtpUrl: sink.url, from: FROM, timeoutMs: 2_000, maxConnections: 4 });
    const pm = postmarkProvider({ baseUrl: postmark.url, serverToken: TOKEN, from: FROM, messageStream: 'outbound', timeoutMs: 2_000 });
    providers.push(smtp, pm);
    const chain = new ProviderChain<EmailMessage>('TEST_EMAIL_RCPT', [smtp, pm], { failureThreshold: 2 });
    const steps = [...Array.from({ length: 10 }, (_, i) => email(`grey${i}@example.com`)), ...Array.from({ length: 5 }, (_, i) => email(`full${i}@example.com`))];
    const errors = await Promise.all(steps.map((s) => chain.send(s.message, s.ctx).then(() => undefined, (err: unknown) => err)));
    for (const err of errors) {
      expect(err).toBeInstanceOf(RetryableSendError);
      expect(err).toMatchObject({ reason: 'recipient_deferred', recipientLevel: true, maybeDelivered: false });
    }
    const nobody = email('nobody@example.com');
    await expect(chain.send(nobody.message, nobody.ctx)).rejects.toMatchObject({ name: 'PermanentSendError', reason: 'recipient_rejected' });
    expect(postmark.sendCalls).toBe(0);
    expect(chain.circuit('smtp')).toBe('closed');
    const fine = email('fine@example.com');
    await expect(chain.send(fine.message, fine.ctx)).resolves.toMatchObject({ provider: 'smtp' });
  });

  it('MAIL FROM refused (553, our sender): fails over to Postmark at once and raises an alert', async () => {
    const smtp = smtpProvider({ smtpUrl: sink.url, from: FROM, timeoutMs: 2_000, maxConnections: 2 });
    const pm = postmarkProvider({ baseUrl: postmark.url, serverToken: TOKEN, from: FROM, messageStream: 'outbound', timeoutMs: 2_000 });
    providers.push(smtp, pm);
    const chain = new ProviderChain<EmailMessage>('TEST_EMAIL_MAILFROM', [smtp, pm]);
    refuseSender = true;
    try {
      const step = email('sender-refused@example.com');
      await expect(chain.send(step.message, step.ctx)).resolves.toMatchObject({ provider: 'postmark' });
    } finally {
      refuseSender = false;
    }
    expect(await alertsOf('TEST_EMAIL_MAILFROM')).toEqual([['smtp', 'provider_request_refused', 1]]);
  });

  it('Postmark ErrorCode 300 for a From it cannot parse (our configuration): fails over to SMTP and alerts, never fails the step for good', async () => {
    const badFrom = 'Acme, Inc <reviews@acme.test>';
    const pm = postmarkProvider({ baseUrl: postmark.url, serverToken: TOKEN, from: badFrom, messageStream: 'outbound', timeoutMs: 2_000 });
    const smtp = smtpProvider({ smtpUrl: sink.url, from: FROM, timeoutMs: 2_000, maxConnections: 2 });
    providers.push(smtp, pm);
    const alone = email('pm300@example.com', badFrom);
    const refused = await pm.send(alone.message, alone.ctx).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(RetryableSendError);
    expect(refused).not.toBeInstanceOf(PermanentSendError);
    expect(refused).toMatchObject({ reason: 'provider_request_refused', maybeDelivered: false });
    const chain = new ProviderChain<EmailMessage>('TEST_EMAIL_PM300', [pm, smtp]);
    const step = email('pm300-chain@example.com', badFrom);
    await expect(chain.send(step.message, step.ctx)).resolves.toMatchObject({ provider: 'smtp' });
    expect(sink.timesAccepted('pm300-chain@example.com')).toBe(1);
    expect(postmark.messages.filter((m) => m.To.startsWith('pm300'))).toHaveLength(0);
    expect(await alertsOf('TEST_EMAIL_PM300')).toEqual([['postmark', 'provider_request_refused', 1]]);
  });
});

describe('Postmark answering HTTP 403 (a token without the right, a blocked server)', () => {
  it('is a provider error like 401: fails over and alerts, not sent', async () => {
    const server = http.createServer((_req, res) => res.writeHead(403, { 'content-type': 'application/json' }).end('{"ErrorCode":10,"Message":"Forbidden"}'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const sink = await startSmtpSink();
    const pm = postmarkProvider({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, serverToken: TOKEN, from: FROM, messageStream: 'outbound', timeoutMs: 2_000 });
    const smtp = smtpProvider({ smtpUrl: sink.url, from: FROM, timeoutMs: 2_000, maxConnections: 1 });
    try {
      const step = email('pm403@example.com');
      await expect(pm.send(step.message, step.ctx)).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'provider_auth_failed', maybeDelivered: false });
      const chain = new ProviderChain<EmailMessage>('TEST_EMAIL_PM403', [pm, smtp]);
      await expect(chain.send(step.message, step.ctx)).resolves.toMatchObject({ provider: 'smtp' });
      expect(await alertsOf('TEST_EMAIL_PM403')).toEqual([['postmark', 'provider_auth_failed', 1]]);
    } finally {
      smtp.close();
      await sink.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('a greylisted recipient on the real sender: retried, then failed with its own reason', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let sink: SmtpSink;
  let results: busV1.StepResult[];
  const ctx = testContext('email-phases');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: 'channel_email' });
    sink = await startSmtpSink({ onRcptTo: (address) => (address.startsWith('grey') ? { code: 451, message: '4.7.1 Greylisted' } : undefined) });
    results = (await collectResults(tb.bus)).results;
    await startEmailSender({ databaseUrl: db.url, concurrency: 4, ackWaitMs: 5_000, maxDeliver: 2, smtpUrl: sink.url, emailFrom: FROM, smtpTimeoutMs: 2_000 }, ctx, { bus: tb.bus, pool });
  });
  afterAll(async () => {
    await ctx.stop();
    await sink.close();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  it('a 451 at RCPT on every try ends the step FAILED recipient_deferred (not max_deliveries), nothing accepted', async () => {
    const step = dueStep('EMAIL', { recipient: { name: 'G', email: 'grey-final@example.com', phone: '' } });
    await publishStep(tb.bus, step);
    const result = await waitFor(() => results.find((r) => r.stepId === step.stepId), { what: 'the result of the greylisted step', timeoutMs: 20_000 });
    expect(result).toMatchObject({ outcome: Outcome.STEP_OUTCOME_FAILED, reason: 'recipient_deferred' });
    expect(sink.timesAccepted('grey-final@example.com')).toBe(0);
  });
});

describe('the real email sender with SMTP first, its server never greeting, and Postmark second', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let silent: SilentSmtpServer;
  let postmark: FakePostmark;
  let results: busV1.StepResult[];
  const ctx = testContext('email-silent');
  const SMTP_TIMEOUT_MS = 1_000;

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: 'channel_email' });
    silent = await startSilentSmtpServer();
    postmark = await startFakePostmark({ serverToken: TOKEN });
    results = (await collectResults(tb.bus)).results;
    const config = buildConfig({
      DATABASE_URL: db.url, EMAIL_FROM: FROM, SMTP_URL: silent.url, SMTP_TIMEOUT_MS: String(SMTP_TIMEOUT_MS),
      POSTMARK_SERVER_TOKEN: TOKEN, POSTMARK_API_URL: postmark.url,
    });
    expect(config.providers).toEqual(['smtp', 'postmark']);
    await startEmailSender({ ...config, concurrency: 32, ackWaitMs: 10_000 }, ctx, { bus: tb.bus, pool });
  });
  afterAll(async () => {
    await ctx.stop();
    await silent.close();
    await postmark.close();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  it('20 steps: every one SENT through Postmark within one SMTP timeout + 5 s, each once, none left in doubt', async () => {
    const steps = Array.from({ length: 20 }, (_, i) => dueStep('EMAIL', { recipient: { name: 'S', email: `stack${i}@example.com`, phone: '' } }));
    const started = Date.now();
    await Promise.all(steps.map((step) => publishStep(tb.bus, step)));
    const sent = await waitFor(() => {
      const done = steps.map((step) => results.find((r) => r.stepId === step.stepId && r.outcome === Outcome.STEP_OUTCOME_SENT));
      return done.every(Boolean) ? done : undefined;
    }, { what: 'every step sent', timeoutMs: SMTP_TIMEOUT_MS + 5_000 });
    expect(Date.now() - started).toBeLessThan(SMTP_TIMEOUT_MS + 5_000);
    expect(sent.every((r) => r!.provider === 'postmark')).toBe(true);
    for (const step of steps) expect(postmark.messages.filter((m) => m.Metadata.rrs_step_id === step.stepId)).toHaveLength(1);
    const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM send_log WHERE cardinality(maybe_with) > 0`);
    expect(rows[0].n).toBe(0);
  });
});
