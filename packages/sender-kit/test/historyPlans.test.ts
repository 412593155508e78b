import { busV1 } from '@rrs/proto';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, historyScans, recordStatements, testContext, waitFor, type StatementRecorder, type TestBus, type TestDatabase } from '@rrs/testkit';
import { openSendLog, PermanentSendError, RetryableSendError, startSender, type SendLog } from '../src';
import { collectResults, dueStep, publishStep } from './support/steps';

const Outcome = busV1.StepOutcome;
const SCHEMA = 'sender_plans_test';
const SEEDED = 150_000;

/**
 * Costs that do not grow with history (issue 35): every statement the send path of a sender runs (every
 * channel's sender is this kit: the claim and completion of a step by its id, a retry's release, a
 * permanent failure, a dead letter, a redelivered duplicate, a delivery receipt's lookup by the provider's
 * message id) is EXPLAINed on a send log seeded with a year of sends; none may read it whole.
 */
const HISTORY_TABLES = ['send_log', 'dead_letters'];

describe('history plans: no statement of the send path reads the send log whole', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let sendLog: SendLog;
  let recorder: StatementRecorder;
  const ctx = testContext('sender-plans');
  let results: busV1.StepResult[];

  beforeAll(async () => {
    recorder = recordStatements({ schema: SCHEMA });
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    await tb.bus.ensureStreams();
    pool = createPool({ url: db.url, schema: SCHEMA });
    sendLog = (await openSendLog({ databaseUrl: db.url, schema: SCHEMA, pool }, ctx)).log;
    const collected = await collectResults(tb.bus);
    results = collected.results;
    ctx.lifecycle.onStop('results', () => collected.sub.drain());
    recorder.start();
  });
  afterAll(async () => {
    recorder.restore();
    await ctx.stop();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  /** A year of settled sends of many organizations, a dead letter in a hundred. */
  async function seedHistory(): Promise<void> {
    await pool.query(`INSERT INTO send_log (step_id, attempt_id, channel, organization_id, state, lease_until, outcome, provider_message_id, provider, address, parts, created_at, updated_at)
                      SELECT 'seed-' || g, 'seed-' || g || ':1', 'SMS', 'org-' || g % 200, 'done', at, 'STEP_OUTCOME_SENT', 'provider-' || g, 'smsru', '+7916' || lpad((g % 50000)::text, 7, '0'), 1, at, at
                        FROM generate_series(1, ${SEEDED}) g, LATERAL (SELECT now() - interval '1 year' + g * (interval '1 year' / ${SEEDED}) AS at) t`);
    await pool.query(`INSERT INTO dead_letters (step_id, attempt_id, channel, reason, deliveries, step, created_at)
                      SELECT step_id, attempt_id, channel, 'max_deliveries', 5, '\\x00', created_at FROM send_log WHERE step_id LIKE 'seed-%00'`);
    await pool.query('ANALYZE');
  }

  it('every statement recorded while sending reads the send log through an index', async () => {
    const retried = new Set<string>();
    const sub = await startSender({
      bus: tb.bus, channel: 'SMS', sendLog, logger: ctx.logger, maxDeliver: 2, ackWaitMs: 5_000, baseBackoffMs: 20, maxBackoffMs: 50,
      send: async (step) => {
        const kind = step.recipient?.name;
        if (kind === 'refused') throw new PermanentSendError('provider_rejected', 'refused');
        if (kind === 'down') throw new RetryableSendError('provider_unavailable', 'down', { maybeDelivered: false });
        if (kind === 'flaky' && !retried.has(step.stepId)) {
          retried.add(step.stepId);
          throw new RetryableSendError('provider_rate_limited', '429');
        }
        return { outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: `p-${step.stepId}`, provider: 'smsru', parts: 1, address: step.recipient?.phone };
      },
    });
    const steps = ['sent', 'flaky', 'refused', 'down'].map((name) => dueStep('SMS', { recipient: { name, email: '', phone: '+79161234567' } }));
    for (const step of steps) await publishStep(tb.bus, step);
    await waitFor(() => steps.every((step) => results.some((result) => result.stepId === step.stepId)), { what: 'every step settled', timeoutMs: 20_000 });
    // The first step redelivered as a new attempt: answered from the send log, never sent again.
    await publishStep(tb.bus, dueStep('SMS', { stepId: steps[0].stepId, attempt: 2 }));
    await waitFor(() => results.filter((result) => result.stepId === steps[0].stepId).length === 2, { what: 'the duplicate reported' });
    expect(await sendLog.findByProviderMessageId(`p-${steps[0].stepId}`)).toMatchObject({ stepId: steps[0].stepId });
    await sub.drain();
    expect(recorder.statements.size).toBeGreaterThan(5);

    recorder.stop();
    await seedHistory();
    expect(await historyScans(db.url, recorder.statements, HISTORY_TABLES, { searchPath: SCHEMA })).toEqual([]);
  });
});
