import { busV1, PERSON_ERASED_SUBJECT, personErasedEvent } from '@rrs/proto';
import { createMemoryBus, createPool, type Bus, type Pool, type Subscription } from '@rrs/runtime';
import { createTestDatabase, testContext, testLogger, waitFor, type TestDatabase } from '@rrs/testkit';
import { consumeSenderErasures, openSendLog, SendLog, SinkOutbox } from '../src';
import { dueStep } from './support/steps';

const SCHEMA = 'sender_erasure_test';
const ORG = '00000000-0000-4000-8000-0000000000e1';

/**
 * A sender's part of a person's erasure (docs/customer-respect.md, "Erasure in every service"): read from
 * `events.lifecycle.person_erased`, it takes the address off the send log rows of the person's steps
 * (the rows stay, so a redelivered step is still never sent twice), deletes their dead letters, and the
 * dev inbox forgets their messages; another step is untouched, and the same erasure again is harmless.
 */
describe('a sender erases a person by the ids the scheduler announces', () => {
  let db: TestDatabase;
  let pool: Pool;
  let bus: Bus;
  let sub: Subscription;
  let log: SendLog;
  const outbox = new SinkOutbox();
  const erasedMore: string[][] = [];
  const ctx = testContext('sender-erasure-test');

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: SCHEMA });
    ({ log } = await openSendLog({ databaseUrl: db.url, schema: SCHEMA, pool }, ctx));
    bus = createMemoryBus();
    await bus.ensureStreams();
    sub = await consumeSenderErasures({ bus, pool, service: 'test-sender', logger: testLogger(), outbox, eraseMore: async (erased) => void erasedMore.push(erased.recipientIds) });
  });
  afterAll(async () => {
    await sub.drain();
    await bus.close();
    await ctx.stop();
    await pool.end();
    await db.drop();
  });

  async function sent(address: string) {
    const step = dueStep('SMS');
    await log.claim(step, 30_000);
    await log.complete(step.stepId, { outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, providerMessageId: `p-${step.stepId}`, parts: 1, provider: 'sink', address });
    await log.deadLetter(step, 'inspected', 1);
    outbox.record({ channel: 'SMS', stepId: step.stepId, to: address, subject: '', text: 'hello', link: 'http://localhost/r/x' });
    return step.stepId;
  }
  const row = async (stepId: string) =>
    (await pool.query(`SELECT address, state, outcome, (SELECT count(*)::int FROM dead_letters d WHERE d.step_id = s.step_id) AS dead_letters FROM send_log s WHERE step_id = $1`, [stepId])).rows[0];

  it('takes the address off the send log, deletes the dead letters and the dev inbox messages of those steps only; again is harmless', async () => {
    const erased = await sent('+79160000091');
    const kept = await sent('+79160000092');
    const erasure = (n: number) =>
      bus.publish(PERSON_ERASED_SUBJECT, personErasedEvent(`person-erased:e1:${n}`, ORG, { erasureId: 'e1', recipientIds: ['r-1'], stepIds: [erased], cascadeIds: [], reviewRequestIds: [] }, new Date()), { msgId: `person-erased:e1:${n}` });
    await erasure(1);
    await waitFor(() => erasedMore.length === 1, { what: 'the erasure applied' });
    expect(await row(erased)).toEqual({ address: null, state: 'done', outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, dead_letters: 0 });
    expect(await row(kept)).toEqual({ address: '+79160000092', state: 'done', outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, dead_letters: 1 });
    expect(outbox.list().map((message) => message.to)).toEqual(['+79160000092']);
    // The step is still never sent again: its claim finds the outcome.
    expect(await log.claim({ ...dueStep('SMS'), stepId: erased }, 30_000)).toMatchObject({ kind: 'done' });

    await erasure(2);
    await waitFor(() => erasedMore.length === 2, { what: 'the repeated erasure applied' });
    expect(await row(erased)).toEqual({ address: null, state: 'done', outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, dead_letters: 0 });
    expect(await bus.pending('EVENTS', 'test-sender-erasures')).toBe(0);
  });
});
