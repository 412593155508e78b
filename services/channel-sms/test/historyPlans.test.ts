import { createHash } from 'node:crypto';
import { busV1 } from '@rrs/proto';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, historyScans, recordStatements, startFakeSmsc, testContext, waitFor, type FakeSmsc, type StatementRecorder, type TestBus, type TestDatabase } from '@rrs/testkit';
import { collectResults, dueStep, publishStep } from '../../../packages/sender-kit/test/support/steps';
import { startSmsSender, type SmsBalance } from '../src';

const Outcome = busV1.StepOutcome;
const SCHEMA = 'channel_sms';
const PASSWORD = 'inbox-pw';
const SEEDED = 150_000;
/** The inbox timer never fires during the test: it reads the inbox itself (`pollOnce`). */
const NEVER = 3_600_000;
const plenty: SmsBalance = { debit: async () => ({ debited: true, balance: 100 }) };

/**
 * Costs that do not grow with history (issue 35): every statement the SMS sender runs (the send path of
 * the kit, SMSC's delivery receipt looked up by the step, a STOP reply matched to the last SMS sent to
 * that number, the inbox cursor) is EXPLAINed on a send log seeded with a year of SMS; none may read
 * it whole. (The kit's own send path, with its failures and dead letters, is checked in sender-kit.)
 */
const HISTORY_TABLES = ['send_log', 'dead_letters'];

describe('history plans: no statement of the SMS sender reads the send log whole', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let smsc: FakeSmsc;
  let sms: Awaited<ReturnType<typeof startSmsSender>>;
  let results: busV1.StepResult[];
  let recorder: StatementRecorder;
  const ctx = testContext('sms-plans');

  beforeAll(async () => {
    recorder = recordStatements({ schema: SCHEMA });
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: SCHEMA });
    smsc = await startFakeSmsc({ login: 'acme', password: PASSWORD });
    results = (await collectResults(tb.bus)).results;
    sms = await startSmsSender(
      { databaseUrl: db.url, concurrency: 4, ackWaitMs: 5_000, smsc: { baseUrl: smsc.url, login: 'acme', password: PASSWORD, timeoutMs: 2_000 }, smscInboxPollMs: NEVER, receiptsHost: '127.0.0.1', receiptsPort: 0 },
      ctx,
      { bus: tb.bus, pool, balance: plenty },
    );
    recorder.start();
  });
  afterAll(async () => {
    recorder.restore();
    await ctx.stop();
    await smsc.close();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  /** A year of SMS sent through SMSC for many organizations, to 50 000 numbers. */
  async function seedHistory(): Promise<void> {
    await pool.query(`INSERT INTO send_log (step_id, attempt_id, channel, organization_id, state, lease_until, outcome, provider_message_id, provider, address, parts, created_at, updated_at)
                      SELECT 'seed-' || g, 'seed-' || g || ':1', 'SMS', 'org-' || g % 200, 'done', at, 'STEP_OUTCOME_SENT', 'seed-' || g, 'smsc', '+7916' || lpad((g % 50000)::text, 7, '0'), 1, at, at
                        FROM generate_series(1, ${SEEDED}) g, LATERAL (SELECT now() - interval '1 year' + g * (interval '1 year' / ${SEEDED}) AS at) t`);
    await pool.query('ANALYZE');
  }

  it('every statement recorded while sending, taking receipts and replies reads the send log through an index', async () => {
    const step = dueStep('SMS', { recipient: { name: 'Анна', email: '', phone: '+79160000301' } });
    await publishStep(tb.bus, step);
    await waitFor(() => results.find((r) => r.stepId === step.stepId && r.outcome === Outcome.STEP_OUTCOME_SENT), { what: 'the SMS sent' });

    const receipt = { id: step.stepId, phone: '79160000301', status: '1', time: '1700000000', err: '0' };
    const sha1 = createHash('sha1').update(`${receipt.id}:${receipt.phone}:${receipt.status}:${PASSWORD}`).digest('hex');
    const res = await fetch(`http://127.0.0.1:${sms.receiptsPort}/receipts/smsc`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ ...receipt, sha1 }) });
    expect(res.status).toBe(200);
    await waitFor(() => results.find((r) => r.stepId === step.stepId && r.outcome === Outcome.STEP_OUTCOME_DELIVERED), { what: 'the receipt' });

    smsc.reply('79160000301', 'STOP');
    await expect(sms.inbox!.pollOnce()).resolves.toBe(1);
    await waitFor(() => results.find((r) => r.stepId === step.stepId && r.outcome === Outcome.STEP_OUTCOME_OPTED_OUT), { what: 'the opt-out' });
    expect(recorder.statements.size).toBeGreaterThan(4);

    recorder.stop();
    await seedHistory();
    expect(await historyScans(db.url, recorder.statements, HISTORY_TABLES, { searchPath: SCHEMA })).toEqual([]);
  });
});
