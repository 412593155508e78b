import { busV1 } from '@rrs/proto';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, startSmtpSink, testContext, TEST_REDIS_URL, waitFor, type SmtpSink, type TestBus, type TestDatabase } from '@rrs/testkit';
import { collectResults, dueStep, publishStep } from '../../../packages/sender-kit/test/support/steps';
import { buildConfig, startEmailSender } from '../src';

/**
 * A provider account's rate (issue 30, PROVIDER_RATE_LIMITS) holds across two replicas of the sender:
 * they share its 100 ms windows in Redis (at 5 a second, one call every other window: one each 200 ms),
 * so 12 messages take eleven of those calls' spacing between them, and every step is sent once.
 */
describe('channel-email honours the SMTP relay rate across replicas', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pools: Pool[];
  let smtp: SmtpSink;
  const contexts = [testContext('email-rate-a'), testContext('email-rate-b')];
  let results: busV1.StepResult[];

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    await tb.bus.ensureStreams();
    smtp = await startSmtpSink();
    results = (await collectResults(tb.bus)).results;
    const config = buildConfig({ NODE_ENV: 'test', DATABASE_URL: db.url, SMTP_URL: smtp.url, EMAIL_FROM: 'Acme Reviews <reviews@acme.example>', BUS_PREFIX: tb.prefix, PROVIDER_RATE_LIMITS: 'smtp=5', REDIS_URL: TEST_REDIS_URL });
    expect(config.providerRates).toEqual({ smtp: 5 });
    pools = contexts.map(() => createPool({ url: db.url, schema: 'channel_email' }));
    for (const [i, ctx] of contexts.entries()) await startEmailSender({ ...config, concurrency: 8, ackWaitMs: 10_000 }, ctx, { bus: tb.bus, pool: pools[i] });
  });
  afterAll(async () => {
    for (const ctx of contexts) await ctx.stop();
    for (const pool of pools) await pool.end();
    await smtp.close();
    await tb.cleanup();
    await db.drop();
  });

  it('12 messages at smtp=5 through two replicas are spread 200 ms apart, over more than two seconds; each is sent once', async () => {
    const steps = Array.from({ length: 12 }, (_, i) => dueStep('EMAIL', { recipient: { name: 'Anna', email: `rate-${i}@example.com`, phone: '' } }));
    for (const step of steps) await publishStep(tb.bus, step);
    await waitFor(() => steps.every((s) => results.some((r) => r.stepId === s.stepId)), { what: 'every step result', timeoutMs: 20_000 });
    expect(results.filter((r) => steps.some((s) => s.stepId === r.stepId)).every((r) => r.outcome === busV1.StepOutcome.STEP_OUTCOME_SENT)).toBe(true);
    const accepted = smtp.messages.filter((m) => m.to[0].startsWith('rate-')).map((m) => m.acceptedAt).sort((a, b) => a - b);
    expect(accepted).toHaveLength(12);
    // Calls 200 ms apart (windows aligned to the clock): the 12th is counted 2.2 s after the 1st, the 6th
    // 1 s after; less the first message's own way to the relay, which opens the SMTP connection (up to
    // ~0.3 s on a loaded machine). Unlimited, the twelve go out within a few tens of ms.
    expect(accepted[11] - accepted[0]).toBeGreaterThanOrEqual(1_500);
    expect(accepted[5] - accepted[0]).toBeGreaterThanOrEqual(500);
  });
});
