import { SMTPServer } from 'smtp-server';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { busV1 } from '@rrs/proto';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { PROVIDER_ALERTS, PROVIDER_FAULTS, SinkOutbox } from '@rrs/sender-kit';
import { collectResults, dueStep, publishStep } from '../../../packages/sender-kit/test/support/steps';
import { classifySmtpError, startEmailSender } from '../src';

// mailparser ships no types.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { simpleParser } = require('mailparser') as { simpleParser(src: Buffer): Promise<{ subject?: string; text?: string; html?: string | false; messageId?: string; headers: Map<string, unknown>; to?: { text: string }; from?: { text: string } }> };

const Outcome = busV1.StepOutcome;

interface Received { from: string; to: string[]; raw: Buffer }

/** A real SMTP server that accepts mail for auth user/secret, rejects some recipients, and defers others once. */
async function startSmtp(options: { secure?: boolean } = {}) {
  const received: Received[] = [];
  const deferredOnce = new Set<string>();
  const server = new SMTPServer({
    // With `secure`, TLS from the first byte with smtp-server's built-in self-signed certificate.
    secure: options.secure ?? false,
    authOptional: false,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onAuth(auth, _session, cb) {
      if (auth.username === 'user' && auth.password === 'secret') cb(null, { user: 'user' });
      else cb(new Error('Invalid username or password'));
    },
    onRcptTo(address, _session, cb) {
      if (address.address.startsWith('bounce')) {
        const err = new Error('5.1.1 No such user') as Error & { responseCode: number };
        err.responseCode = 550;
        return cb(err);
      }
      if (address.address.startsWith('later') && !deferredOnce.has(address.address)) {
        deferredOnce.add(address.address);
        const err = new Error('4.7.1 Try again later') as Error & { responseCode: number };
        err.responseCode = 451;
        return cb(err);
      }
      cb();
    },
    onData(stream, session, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        received.push({ from: String(session.envelope.mailFrom && session.envelope.mailFrom.address), to: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks) });
        cb();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.server.address() as AddressInfo).port;
  return { received, port, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('channel-email through a real SMTP server', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  const ctx = testContext('email-test');
  let results: busV1.StepResult[];

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: 'channel_email' });
    smtp = await startSmtp();
    const collected = await collectResults(tb.bus);
    results = collected.results;
    await startEmailSender(
      { databaseUrl: db.url, concurrency: 4, ackWaitMs: 5_000, smtpUrl: `smtp://user:secret@127.0.0.1:${smtp.port}`, emailFrom: 'Acme Reviews <reviews@acme.test>', smtpTimeoutMs: 3_000 },
      ctx,
      { bus: tb.bus, pool },
    );
  });
  afterAll(async () => {
    await ctx.stop();
    await smtp.close();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  const resultOf = (stepId: string) => waitFor(() => results.find((r) => r.stepId === stepId), { what: `result of ${stepId}` });

  it('delivers a message with both parts, the personal link, and RFC 8058 unsubscribe headers', async () => {
    // A stand-in for the public review form, so the link in the received mail is followed for real.
    const form = http.createServer((req, res) => {
      res.writeHead(/^\/r\/tok\w+$/.test(req.url ?? '') ? 200 : 404, { 'content-type': 'text/html' }).end('<form>rate</form>');
    });
    await new Promise<void>((r) => form.listen(0, '127.0.0.1', () => r()));
    const base = `http://127.0.0.1:${(form.address() as AddressInfo).port}`;
    const step = dueStep('EMAIL', { recipient: { name: 'Anna <b>', email: 'anna@example.com', phone: '' }, template: { subject: 'Rate {{location}}, {{name}}', body: 'Hello {{name}}!\n\nTell us about {{location}}: {{link}}' } });
    step.reviewUrl = `${base}/r/tok${step.stepId.slice(-8).replace(/-/g, '')}`;
    await publishStep(tb.bus, step);
    const result = await resultOf(step.stepId);
    expect(result).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT, channel: 'EMAIL', providerMessageId: `<${step.stepId}@acme.test>` });
    const mail = smtp.received.find((m) => m.to.includes('anna@example.com'));
    expect(mail).toBeDefined();
    expect(mail!.from).toBe('reviews@acme.test');
    const parsed = await simpleParser(mail!.raw);
    expect(parsed.subject).toBe('Rate Acme Dental, Anna <b>');
    expect(parsed.messageId).toBe(`<${step.stepId}@acme.test>`);
    expect(parsed.from?.text).toBe('"Acme Reviews" <reviews@acme.test>');
    const head = mail!.raw.toString('utf8').split('\r\n\r\n')[0].replace(/\r\n[ \t]+/g, ' ');
    expect(head).toMatch(/^List-Unsubscribe-Post: List-Unsubscribe=One-Click$/m);
    expect(head).toContain(`List-Unsubscribe: <${step.unsubscribeUrl}>`);
    expect(parsed.text).toContain('Hello Anna <b>!');
    expect(parsed.text).toContain(`Tell us about Acme Dental: ${step.reviewUrl}`);
    expect(parsed.text).toContain(`Unsubscribe: ${step.unsubscribeUrl}`);
    const html = String(parsed.html);
    expect(html).toContain('Hello Anna &lt;b&gt;!');
    expect(html).not.toContain('<b>!');
    expect(html).toContain(`<a href="${step.reviewUrl}">${step.reviewUrl}</a>`);
    expect(html).toContain(`href="${step.unsubscribeUrl}"`);
    // The link in the message is the step's own, whole: it resolves to the review form path.
    const hrefs = [...html.matchAll(/href="([^"]+)"/g)].map((m) => m[1]);
    expect(hrefs).toContain(step.reviewUrl);
    const fromText = /https?:\/\/\S+\/r\/\w+/.exec(parsed.text ?? '')![0];
    for (const link of [hrefs.find((h) => h.includes('/r/'))!, fromText]) {
      const opened = await fetch(link);
      expect(opened.status).toBe(200);
      expect(await opened.text()).toContain('<form>');
    }
    await new Promise<void>((r) => form.close(() => r()));
  });

  it('reports FAILED recipient_rejected when the server refuses the recipient (550), without retrying', async () => {
    const before = smtp.received.length;
    const step = dueStep('EMAIL', { recipient: { name: 'B', email: 'bounce@example.com', phone: '' } });
    await publishStep(tb.bus, step);
    expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_FAILED, reason: 'recipient_rejected' });
    expect(smtp.received.length).toBe(before);
  });

  it('retries a 4xx deferral and then delivers exactly once', async () => {
    const step = dueStep('EMAIL', { recipient: { name: 'L', email: 'later@example.com', phone: '' } });
    await publishStep(tb.bus, step);
    expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT });
    expect(smtp.received.filter((m) => m.to.includes('later@example.com'))).toHaveLength(1);
  });

  it('fails a step whose recipient has no email with missing_contact and sends nothing', async () => {
    const before = smtp.received.length;
    const step = dueStep('EMAIL', { recipient: { name: 'N', email: '', phone: '+79161234567' } });
    await publishStep(tb.bus, step);
    expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_FAILED, reason: 'missing_contact' });
    expect(smtp.received.length).toBe(before);
  });

  it('does not send a redelivered step twice', async () => {
    const step = dueStep('EMAIL', { recipient: { name: 'R', email: 'redeliver@example.com', phone: '' } });
    await publishStep(tb.bus, step);
    await resultOf(step.stepId);
    await publishStep(tb.bus, dueStep('EMAIL', { ...step, attempt: 2, attemptId: `${step.stepId}:2` }));
    await waitFor(() => results.filter((r) => r.stepId === step.stepId).length === 2);
    expect(smtp.received.filter((m) => m.to.includes('redeliver@example.com'))).toHaveLength(1);
  });
});

describe('channel-email without SMTP_URL (all-in-one mode)', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  const ctx = testContext('email-sink-test');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: 'channel_email' });
  });
  afterAll(async () => {
    await ctx.stop();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  it('puts the message in the dev inbox outbox and announces the EMAIL catalog entry', async () => {
    const outbox = new SinkOutbox();
    await startEmailSender({ databaseUrl: db.url, concurrency: 2 }, ctx, { bus: tb.bus, pool, outbox });
    const step = dueStep('EMAIL');
    await publishStep(tb.bus, step);
    const msg = await waitFor(() => outbox.list().find((m) => m.stepId === step.stepId));
    expect(msg).toMatchObject({ channel: 'EMAIL', to: 'anna@example.com', subject: 'How was Acme Dental?', link: step.reviewUrl });
    expect(msg.text).toContain(step.reviewUrl);
    const kv = await tb.bus.kv('channels', { ttlMs: 30_000 });
    const entry = busV1.ChannelCatalogEntry.decode((await kv.get('EMAIL'))!.value);
    expect(entry).toMatchObject({ key: 'EMAIL', slug: 'email', label: 'Email', contactField: 'email', sender: 'channel-email' });
  });
});

describe('channel-email over smtps:// (TLS from the start)', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let smtp: Awaited<ReturnType<typeof startSmtp>>;
  const ctx = testContext('email-tls-test');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: 'channel_email' });
    smtp = await startSmtp({ secure: true });
  });
  afterAll(async () => {
    await ctx.stop();
    await smtp.close();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  it('authenticates and delivers over TLS', async () => {
    const { results } = await collectResults(tb.bus);
    await startEmailSender(
      { databaseUrl: db.url, concurrency: 2, smtpUrl: `smtps://user:secret@127.0.0.1:${smtp.port}?tls_reject_unauthorized=false`, emailFrom: 'Reviews <r@acme.test>', smtpTimeoutMs: 3_000 },
      ctx,
      { bus: tb.bus, pool },
    );
    const step = dueStep('EMAIL', { recipient: { name: 'T', email: 'tls@example.com', phone: '' } });
    await publishStep(tb.bus, step);
    expect(await waitFor(() => results.find((r) => r.stepId === step.stepId))).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT });
    expect(smtp.received.map((m) => m.to)).toEqual([['tls@example.com']]);
  });
});

describe('classifySmtpError', () => {
  it.each([
    [{ responseCode: 550, code: 'EENVELOPE', command: 'RCPT TO', message: 'no such user' }, 'PermanentSendError', 'recipient_rejected'],
    [{ responseCode: 554, code: 'EMESSAGE', command: 'DATA', message: 'spam' }, 'PermanentSendError', 'provider_rejected'],
    [{ responseCode: 451, code: 'EENVELOPE', command: 'RCPT TO', message: 'greylisted, later' }, 'RetryableSendError', 'recipient_deferred'],
    [{ responseCode: 452, code: 'EENVELOPE', command: 'RCPT TO', message: 'mailbox full' }, 'RetryableSendError', 'recipient_deferred'],
    [{ responseCode: 553, code: 'EENVELOPE', command: 'MAIL FROM', message: 'sender not allowed' }, 'RetryableSendError', 'provider_request_refused'],
    [{ responseCode: 451, code: 'EENVELOPE', command: 'MAIL FROM', message: 'local error' }, 'RetryableSendError', 'provider_unavailable'],
    [{ responseCode: 421, code: 'ECONNECTION', command: 'CONN', message: 'closing' }, 'RetryableSendError', 'provider_unavailable'],
    [{ responseCode: 554, code: 'EPROTOCOL', command: 'CONN', message: 'no SMTP service here' }, 'RetryableSendError', 'provider_unavailable'],
    [{ code: 'ECONNECTION', message: 'refused' }, 'RetryableSendError', 'provider_unreachable'],
    [{ code: 'ETIMEDOUT', command: 'CONN', message: 'Greeting never received', dataSent: false }, 'RetryableSendError', 'provider_timeout'],
    [{ code: 'EAUTH', responseCode: 535, message: 'bad credentials' }, 'RetryableSendError', 'provider_auth_failed'],
  ])('sorts %j', (err, name, reason) => {
    const sorted = classifySmtpError(Object.assign(new Error(err.message), err));
    expect(sorted.name).toBe(name);
    expect(sorted.reason).toBe(reason);
  });

  it('a temporary refusal at RCPT is the recipient\'s (never the provider\'s fault); MAIL FROM refused and AUTH refused are our configuration (provider faults that alert)', () => {
    const rcpt = classifySmtpError(Object.assign(new Error('x'), { responseCode: 451, code: 'EENVELOPE', command: 'RCPT TO', dataSent: false }));
    expect(rcpt).toMatchObject({ recipientLevel: true, maybeDelivered: false });
    expect(PROVIDER_FAULTS.has(rcpt.reason)).toBe(false);
    for (const err of [{ responseCode: 553, code: 'EENVELOPE', command: 'MAIL FROM' }, { code: 'EAUTH', responseCode: 535 }]) {
      const sorted = classifySmtpError(Object.assign(new Error('x'), err));
      expect(PROVIDER_FAULTS.has(sorted.reason) && PROVIDER_ALERTS.has(sorted.reason)).toBe(true);
    }
  });

  it('marks a session cut after it began as maybe delivered (the next try is resumed), a refusal or no connection as not', () => {
    const maybe = (err: Record<string, unknown>) => (classifySmtpError(Object.assign(new Error('x'), err)) as { maybeDelivered?: boolean }).maybeDelivered;
    expect(maybe({ code: 'ETIMEDOUT' })).toBe(true);
    // From SmtpPool, which says whether the data went out: only then.
    expect(maybe({ code: 'ETIMEDOUT', dataSent: false })).toBe(false);
    expect(maybe({ code: 'ECONNECTION', dataSent: true })).toBe(true);
    expect(maybe({ code: 'ECONNRESET' })).toBe(true);
    expect(maybe({})).toBe(true);
    expect(maybe({ code: 'ECONNECTION' })).toBe(false);
    expect(maybe({ responseCode: 451, code: 'EENVELOPE' })).toBe(false);
    expect(maybe({ code: 'EAUTH' })).toBe(false);
  });
});
