import { SMTPServer } from 'smtp-server';
import type { AddressInfo } from 'node:net';
import { SYSTEM_EMAIL_SUBJECT, systemEmailBusV1 } from '@rrs/proto';
import { createPool, uuidv7, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startEmailSender } from '../src';
import { renderSystemEmail } from '../src/systemEmail';

// mailparser ships no types.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { simpleParser } = require('mailparser') as { simpleParser(src: Buffer): Promise<{ subject?: string; text?: string; html?: string | false; replyTo?: { text: string } }> };

/** System emails (invitations, password resets, rating alerts, digests, replies) through channel-email, a real SMTP server and JetStream. */
describe('channel-email: system emails', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let server: SMTPServer;
  const received: Array<{ to: string[]; raw: Buffer }> = [];
  const rejected: string[] = [];
  const ctx = testContext('system-email-test');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    pool = createPool({ url: db.url, schema: 'channel_email' });
    server = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      onRcptTo(address, _session, cb) {
        if (!address.address.startsWith('bounce')) return cb();
        rejected.push(address.address);
        cb(Object.assign(new Error('5.1.1 No such user'), { responseCode: 550 }));
      },
      onData(stream, session, cb) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          received.push({ to: session.envelope.rcptTo.map((r) => r.address), raw: Buffer.concat(chunks) });
          cb();
        });
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const port = (server.server.address() as AddressInfo).port;
    await startEmailSender({ databaseUrl: db.url, concurrency: 2, ackWaitMs: 5_000, smtpUrl: `smtp://127.0.0.1:${port}`, emailFrom: 'Reviews <no-reply@reviews.test>', smtpTimeoutMs: 3_000 }, ctx, { bus: tb.bus, pool });
  }, 30_000);
  afterAll(async () => {
    await ctx.stop();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  const email = (overrides: Partial<systemEmailBusV1.SystemEmail> = {}): systemEmailBusV1.SystemEmail =>
    systemEmailBusV1.SystemEmail.fromPartial({
      id: uuidv7(), kind: 'invitation', to: 'anna@example.com', locale: 'en', link: 'https://reviews.example.com/app/#/accept/inv_abc',
      organizationId: uuidv7(), organizationName: 'Acme Dental', expiresAt: new Date('2026-05-08T09:00:00Z'), role: 'admin', ...overrides,
    });
  const publish = (message: systemEmailBusV1.SystemEmail) => tb.bus.publish(SYSTEM_EMAIL_SUBJECT, systemEmailBusV1.SystemEmail.encode(message).finish());
  const mailsTo = (address: string) => received.filter((m) => m.to.includes(address));

  it('sends an invitation with its link in both parts, in the organization language', async () => {
    await publish(email({ to: 'invited@example.com' }));
    await publish(email({ to: 'priglashen@example.com', locale: 'ru', kind: 'password_reset', link: 'https://reviews.example.com/app/#/reset/rst_xyz' }));
    const en = await simpleParser((await waitFor(() => mailsTo('invited@example.com')[0], { what: 'the invitation' })).raw);
    expect(en.subject).toBe('You are invited to Acme Dental on Reviews');
    expect(en.text).toContain('https://reviews.example.com/app/#/accept/inv_abc');
    expect(en.text).toContain('as admin');
    expect(en.html).toContain('href="https://reviews.example.com/app/#/accept/inv_abc"');
    const ru = await simpleParser((await waitFor(() => mailsTo('priglashen@example.com')[0], { what: 'the reset' })).raw);
    expect(ru.subject).toBe('Сброс пароля');
    expect(ru.text).toContain('https://reviews.example.com/app/#/reset/rst_xyz');
  });

  it('sends one id at most once, however often the bus delivers it (the send log)', async () => {
    const once = email({ to: 'once@example.com' });
    // No Nats-Msg-Id here, so the bus keeps both copies: only the send log stands between them and a second email.
    await publish(once);
    await publish(once);
    await waitFor(() => mailsTo('once@example.com').length === 1, { what: 'the first copy' });
    await publish(email({ to: 'after@example.com' }));
    await waitFor(() => mailsTo('after@example.com').length === 1, { what: 'a later email' });
    await waitFor(async () => (await tb.bus.pending('STEPS', 'sender-system-email')) === 0, { what: 'the consumer to settle both copies', timeoutMs: 20_000 });
    expect(mailsTo('once@example.com')).toHaveLength(1);
    const rows = await pool.query(`SELECT outcome FROM send_log WHERE step_id = $1`, [`system-email:${once.id}`]);
    expect(rows.rows).toEqual([{ outcome: 'STEP_OUTCOME_SENT' }]);
  });

  it('records a refused address as failed and does not try it again', async () => {
    const refused = email({ to: 'bounce@example.com' });
    await publish(refused);
    const row = await waitFor(async () => (await pool.query(`SELECT outcome, reason FROM send_log WHERE step_id = $1 AND state = 'done'`, [`system-email:${refused.id}`])).rows[0], { what: 'the failure recorded' });
    expect(row).toEqual({ outcome: 'STEP_OUTCOME_FAILED', reason: 'recipient_rejected' });
    await publish(refused);
    await publish(email({ to: 'later@example.com' }));
    await waitFor(() => mailsTo('later@example.com').length === 1, { what: 'a later email' });
    await waitFor(async () => (await tb.bus.pending('STEPS', 'sender-system-email')) === 0, { what: 'the consumer to settle', timeoutMs: 20_000 });
    expect(rejected.filter((a) => a === 'bounce@example.com')).toHaveLength(1);
  });

  const alerted = { rating: 1, feedback: 'The waiter was rude', customerName: 'Boris', locationName: 'Coffee on Arbat', ratedAt: new Date('2026-05-04T11:05:00Z'), link: 'https://reviews.example.com/app/#/ratings/rr-1' };

  it('sends a rating alert to a member: the rating, the feedback, the time in the organization’s zone and the inbox link, in its language', async () => {
    await publish(email({ kind: 'rating_alert', to: 'owner@acme.example', link: alerted.link, ratings: [alerted], timeZone: 'Europe/Moscow', expiresAt: undefined, role: '' }));
    await publish(email({ kind: 'rating_alert', to: 'vladelec@acme.example', locale: 'ru', link: alerted.link, ratings: [{ ...alerted, rating: 5, feedback: 'Громкая музыка' }], timeZone: 'Europe/Moscow', expiresAt: undefined }));
    const en = await simpleParser((await waitFor(() => mailsTo('owner@acme.example')[0], { what: 'the alert' })).raw);
    expect(en.subject).toBe('1★ at Coffee on Arbat: act on it');
    expect(en.text).toContain('★☆☆☆☆ 1/5');
    expect(en.text).toContain('Customer: Boris');
    expect(en.text).toContain('Feedback: “The waiter was rude”');
    expect(en.text).toContain('14:05 (Europe/Moscow)');
    expect(en.text).toContain(alerted.link);
    expect(en.html).toContain(`href="${alerted.link}"`);
    const ru = await simpleParser((await waitFor(() => mailsTo('vladelec@acme.example')[0], { what: 'the Russian alert' })).raw);
    expect(ru.subject).toBe('Отзыв для компании в «Coffee on Arbat»');
    expect(ru.text).toContain('Отзыв: “Громкая музыка”');
  });

  it("sends a daily digest with the day's totals and its low ratings", async () => {
    await publish(email({ kind: 'rating_digest', to: 'digest@acme.example', link: 'https://reviews.example.com/app/#/ratings', ratings: [alerted], timeZone: 'Europe/Moscow', digest: { day: '2026-05-04', ratings: 7, average: 4.14, actionable: 1, open: 2, overdue: 1 }, expiresAt: undefined }));
    const digest = await simpleParser((await waitFor(() => mailsTo('digest@acme.example')[0], { what: 'the digest' })).raw);
    expect(digest.subject).toBe('Acme Dental: ratings of 2026-05-04');
    expect(digest.text).toContain('7 ratings, average 4.1★; 1 low or with feedback. In the inbox now: 2 open, 1 overdue.');
    expect(digest.text).toContain('Feedback: “The waiter was rude”');
  });

  it("sends a member's reply to the customer with the organization's Reply-To", async () => {
    await publish(email({ kind: 'customer_reply', to: 'boris@example.com', subject: 'About your visit', text: 'We are sorry.\n\nThe next coffee is on us.', replyTo: 'care@acme.example', link: '', expiresAt: undefined }));
    const reply = await simpleParser((await waitFor(() => mailsTo('boris@example.com')[0], { what: 'the reply' })).raw);
    expect(reply.subject).toBe('About your visit');
    expect(reply.replyTo?.text).toBe('care@acme.example');
    expect(reply.text).toContain('The next coffee is on us.');
    expect(reply.text).toContain('This is a reply from Acme Dental to the feedback you left.');
  });

  it('refuses an unknown kind without sending anything', () => {
    expect(() => renderSystemEmail(email({ kind: 'newsletter' }), 'Reviews <no-reply@reviews.test>')).toThrow('unknown system email kind newsletter');
  });
});
