import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { SMTPServer } from 'smtp-server';
import { busV1 } from '@rrs/proto';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, TEST_PG_URL, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { collectResults, dueStep, publishStep } from '../../../packages/sender-kit/test/support/steps';
import { startEmailSender } from '../src';

const STEPS = 30;
const OUTAGE_MS = 3_000;
/** Short, so that a sender that nak'ed an unrecorded send would see its lease run out during the outage. */
const ACK_WAIT_MS = 2_000;

/**
 * A real SMTP server that counts the messages it accepted by envelope recipient. `beforeAccept` runs
 * after the message data arrived and before the 250 answer, so a test can act at the moment the
 * provider has the message and the sender does not know it yet.
 */
async function startCountingSmtp(beforeAccept: (count: number) => Promise<void>) {
  const accepted = new Map<string, number>();
  let received = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS', 'AUTH'],
    logger: false,
    closeTimeout: 1_000,
    onData(stream, session, cb) {
      stream.on('data', () => undefined);
      stream.on('end', () => {
        received++;
        beforeAccept(received).then(() => {
          for (const rcpt of session.envelope.rcptTo) accepted.set(rcpt.address, (accepted.get(rcpt.address) ?? 0) + 1);
          cb(null, 'OK: queued');
        }, cb);
      });
    },
  });
  server.on('error', () => undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { accepted, port: (server.server.address() as AddressInfo).port, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** The sender's database refuses connections and its sessions are cut, as in a PostgreSQL restart. */
async function cutDatabase(db: TestDatabase, allow: boolean): Promise<void> {
  const admin = new pg.Client({ connectionString: TEST_PG_URL });
  await admin.connect();
  try {
    await admin.query(`ALTER DATABASE ${db.name} WITH ALLOW_CONNECTIONS ${allow}`);
    if (!allow) await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [db.name]);
  } finally {
    await admin.end();
  }
}

describe('channel-email through a PostgreSQL outage right after the SMTP server accepted', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let smtp: Awaited<ReturnType<typeof startCountingSmtp>>;
  const ctx = testContext('email-outage-test');
  let results: busV1.StepResult[];
  let databaseDown = false;
  let acceptedWhileDown = 0;

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    await tb.bus.ensureStreams();
    pool = createPool({ url: db.url, schema: 'channel_email' });
    smtp = await startCountingSmtp(async (count) => {
      if (count === 5) {
        // The fifth message is in the server's hands; before it answers 250, the database goes away.
        await cutDatabase(db, false);
        databaseDown = true;
        setTimeout(() => {
          cutDatabase(db, true).then(() => (databaseDown = false), () => undefined);
        }, OUTAGE_MS);
      }
      if (databaseDown) acceptedWhileDown++;
    });
    const collected = await collectResults(tb.bus);
    results = collected.results;
    ctx.lifecycle.onStop('results', () => collected.sub.drain());
    await startEmailSender(
      { databaseUrl: db.url, concurrency: 8, ackWaitMs: ACK_WAIT_MS, smtpUrl: `smtp://127.0.0.1:${smtp.port}`, emailFrom: 'Acme Reviews <reviews@acme.test>', smtpTimeoutMs: 5_000 },
      ctx,
      { bus: tb.bus, pool },
    );
  });
  afterAll(async () => {
    await cutDatabase(db, true);
    await ctx.stop();
    await smtp.close();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  it('sends every message once, and records and reports every outcome once the database is back', async () => {
    const steps = Array.from({ length: STEPS }, (_, i) => dueStep('EMAIL', { recipient: { name: `R${i}`, email: `outage-${i}@example.com`, phone: '' } }));
    for (const step of steps) await publishStep(tb.bus, step);

    await waitFor(() => steps.every((s) => results.some((r) => r.stepId === s.stepId)), { timeoutMs: 40_000, intervalMs: 100, what: 'a result for every step' });
    // The outage did hit sends the SMTP server had accepted and the sender had not recorded.
    expect(acceptedWhileDown).toBeGreaterThanOrEqual(1);

    // 0 duplicate provider sends: each recipient got exactly one message.
    const duplicates = steps.filter((s) => (smtp.accepted.get(s.recipient!.email) ?? 0) > 1).length;
    expect(duplicates).toBe(0);
    expect(steps.map((s) => smtp.accepted.get(s.recipient!.email) ?? 0)).toEqual(steps.map(() => 1));
    // Every outcome recorded and reported: SENT, once per step.
    for (const step of steps) expect(results.filter((r) => r.stepId === step.stepId).map((r) => r.outcome)).toEqual([busV1.StepOutcome.STEP_OUTCOME_SENT]);
    const { rows } = await pool.query<{ state: string; n: number }>(`SELECT state, count(*)::int AS n FROM send_log GROUP BY state`);
    expect(rows).toEqual([{ state: 'done', n: STEPS }]);
  });
});
