import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, startFakeSmsc, startFakeSmsRu, testContext, waitFor, type FakeSmsc, type FakeSmsRu, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startSmsSender } from '../src';
import { startCascadeStack } from './support/stack';

const RECIPIENTS = 60;
/** SMSC goes down once it has taken this many messages: mid-run. */
const DOWN_AFTER = 15;

/** SMSC takes these messages (by count) and then answers 500: it has them, the caller can't know. */
const TAKEN_THEN_500 = new Set([5, 9]);

/**
 * The real stack over JetStream (contacts, the scheduler, channel-sms with SMSC first and SMS.ru second).
 * Twice SMSC takes a message and answers 500; then SMSC goes down mid-run: its send method answers 503
 * or nothing at all (a timeout), its status method still answers. Every step is sent exactly once: each
 * ambiguous failure is looked up at SMSC before the step may move on (the two it took are found there and
 * reported sent through SMSC), SMSC's circuit opens, and the rest go to SMS.ru.
 */
describe('SMS provider failover: the first provider goes down mid-run', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let stack: Awaited<ReturnType<typeof startCascadeStack>>;
  let smsc: FakeSmsc;
  let smsru: FakeSmsRu;
  let sms: Awaited<ReturnType<typeof startSmsSender>>;
  let down = false;
  let answers = 0;
  const ctx = testContext('sms-failover');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    pool = createPool({ url: db.url, schema: 'channel_sms' });
    smsc = await startFakeSmsc({
      login: 'acme',
      password: 'pw',
      onMessage: () => {
        if (smsc.count >= DOWN_AFTER) down = true;
        // Thrown after the fake counted the message: it answers 500.
        if (TAKEN_THEN_500.has(smsc.count)) throw new Error('taken, then the gateway failed');
      },
      // Down: every other send is answered 503, the others never (the caller times out).
      respond: () => (down ? (answers++ % 2 === 0 ? { httpStatus: 503 } : { hang: true }) : undefined),
    });
    smsru = await startFakeSmsRu({ apiId: 'api-1' });
    stack = await startCascadeStack(db.url, tb.bus, ctx);
    sms = await startSmsSender(
      {
        databaseUrl: db.url, concurrency: 4, ackWaitMs: 5_000, contactsAddress: stack.contactsAddress,
        providers: ['smsc', 'smsru'],
        smsc: { baseUrl: smsc.url, login: 'acme', password: 'pw', timeoutMs: 300 },
        smsru: { baseUrl: smsru.url, apiId: 'api-1', test: false, timeoutMs: 2_000 },
        circuit: { failureThreshold: 4, openMs: 600_000 },
      },
      ctx,
      { bus: tb.bus, pool },
    );
  });
  afterAll(async () => {
    await ctx.stop();
    await smsc.close();
    await smsru.close();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  it('sends every step exactly once, through SMSC until it fails and SMS.ru after, and records who sent each', async () => {
    const { scheduler } = stack;
    const { organization, location } = await stack.smsOrganization('failover', 1_000);
    const phones = Array.from({ length: RECIPIENTS }, (_, i) => `+7916555${String(i).padStart(4, '0')}`);
    const { result } = await scheduler.cascades.start({
      organizationId: organization.id, locationId: location.id, name: '', flowId: '', channel: 'SMS', externalId: '',
      recipients: phones.map((phone, i) => ({ name: `R${i}`, email: '', phone, contactId: '', contactExternalId: '' })),
    });
    const cascade = await waitFor(async () => {
      const now = await scheduler.cascades.get(organization.id, result.id);
      return now.recipients.every((r) => r.steps[0]?.status === 'sent') ? now : undefined;
    }, { what: 'every step sent', timeoutMs: 60_000 });
    expect(cascade.recipients).toHaveLength(RECIPIENTS);

    // Nothing lost, nothing twice, across both providers.
    const times = phones.map((phone) => smsc.timesAccepted(phone) + smsru.timesAccepted(phone.slice(1)));
    expect(times).toEqual(phones.map(() => 1));
    expect(smsc.count).toBe(DOWN_AFTER);
    expect(smsru.messages).toHaveLength(RECIPIENTS - DOWN_AFTER);
    expect(sms.chain.circuit('smsc')).toBe('open');

    // The send log names the provider of every step, and it is the one that has the message.
    const { rows } = await pool.query<{ phone_provider: string; n: string }>(`SELECT provider AS phone_provider, count(*) AS n FROM send_log WHERE state = 'done' GROUP BY provider ORDER BY provider`);
    expect(rows.map((r) => [r.phone_provider, Number(r.n)])).toEqual([['smsc', DOWN_AFTER], ['smsru', RECIPIENTS - DOWN_AFTER]]);
    // And the cascade shows it on each step.
    const shown = await waitFor(async () => {
      const now = await scheduler.cascades.get(organization.id, result.id);
      return now.recipients.every((r) => r.steps[0].provider) ? now : undefined;
    }, { what: 'the provider on every step' });
    const byProvider = (name: string) => shown.recipients.filter((r) => r.steps[0].provider === name).length;
    expect([byProvider('smsc'), byProvider('smsru')]).toEqual([DOWN_AFTER, RECIPIENTS - DOWN_AFTER]);
    expect(answers).toBeGreaterThanOrEqual(3);
    // The two taken-then-500 messages: found at SMSC by their step id, never sent again.
    for (const count of TAKEN_THEN_500) {
      const taken = smsc.messages[count - 1];
      expect(smsru.timesAccepted(taken.phones[0].slice(1))).toBe(0);
      const { rows: [row] } = await pool.query<{ provider: string; provider_message_id: string }>(`SELECT provider, provider_message_id FROM send_log WHERE step_id = $1`, [taken.id]);
      expect(row).toEqual({ provider: 'smsc', provider_message_id: taken.id });
    }
  });
});
