import { busV1 } from '@rrs/proto';
import { createPool, type Pool } from '@rrs/runtime';
import { StepResultPublisher } from '@rrs/sender-kit';
import { createTestBus, createTestDatabase, startFakeSmsc, testContext, testLogger, waitFor, type FakeSmsc, type TestBus, type TestDatabase } from '@rrs/testkit';
import { collectResults, dueStep, publishStep } from '../../../packages/sender-kit/test/support/steps';
import { SmsRecipients, startSmsSender, startSmscInbox, type SmsBalance } from '../src';
import { startCascadeStack } from './support/stack';

const Outcome = busV1.StepOutcome;
const LOGIN = 'acme';
const PASSWORD = 'inbox-pw';
/** The timer never fires during a test: each test reads the inbox itself (`pollOnce`). */
const NEVER = 3_600_000;

const plenty: SmsBalance = { debit: async () => ({ debited: true, balance: 100 }) };

/**
 * STOP replies read from SMSC's inbox (`get_answers`, the testkit fake speaking it): a STOP-style reply
 * becomes an OPTED_OUT result (`stop_reply`) for the last SMS step sent to that number through SMSC.
 */
describe('SMS STOP replies from the SMSC inbox', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let smsc: FakeSmsc;
  let sms: Awaited<ReturnType<typeof startSmsSender>>;
  let results: busV1.StepResult[];
  const ctx = testContext('sms-stop-replies');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: 'channel_sms' });
    smsc = await startFakeSmsc({ login: LOGIN, password: PASSWORD });
    results = (await collectResults(tb.bus)).results;
    sms = await startSmsSender(
      { databaseUrl: db.url, concurrency: 4, ackWaitMs: 5_000, smsc: { baseUrl: smsc.url, login: LOGIN, password: PASSWORD, timeoutMs: 2_000 }, smscInboxPollMs: NEVER },
      ctx,
      { bus: tb.bus, pool, balance: plenty },
    );
  });
  afterAll(async () => {
    await ctx.stop();
    await smsc.close();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  const optOuts = () => results.filter((r) => r.outcome === Outcome.STEP_OUTCOME_OPTED_OUT);
  const sent = async (phone: string, organizationId: string) => {
    const step = dueStep('SMS', { organizationId, recipient: { name: 'Анна', email: '', phone } });
    await publishStep(tb.bus, step);
    await waitFor(() => results.find((r) => r.stepId === step.stepId && r.outcome === Outcome.STEP_OUTCOME_SENT), { what: `the SMS to ${phone}` });
    return step;
  };
  const cursor = async () => {
    const { rows } = await pool.query<{ last_id: string | number }>(`SELECT last_id FROM inbox_cursors WHERE provider = 'smsc'`);
    return rows[0] ? Number(rows[0].last_id) : undefined;
  };
  /** Long enough for anything a read published to reach the collector (reads themselves are awaited). */
  const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

  it('a STOP reply opts out the person the last SMS to that number went to (any organization), once per read', async () => {
    const earlier = await sent('+79160000301', 'org-1');
    const later = await sent('+79160000301', 'org-2');
    const replyId = smsc.reply('79160000301', '  Стоп! ');
    await expect(sms.inbox!.pollOnce()).resolves.toBe(1);
    const reported = await waitFor(() => optOuts().find((r) => r.stepId === later.stepId), { what: 'the opt-out' });
    expect(reported).toMatchObject({ attemptId: later.attemptId, organizationId: 'org-2', channel: 'SMS', reason: 'stop_reply', provider: 'smsc' });
    expect(optOuts().filter((r) => r.stepId === earlier.stepId)).toEqual([]);
    expect(await cursor()).toBe(replyId);
  });

  it('other text, a number we never sent to, and a sender that is not a phone number change nothing; the inbox is read past them', async () => {
    await sent('+79160000302', 'org-1');
    const before = optOuts().length;
    smsc.reply('79160000302', 'Спасибо, всё понравилось');
    smsc.reply('79160000302', 'stop by tomorrow');
    smsc.reply('79169999999', 'STOP');
    const last = smsc.reply('MTS', 'stop');
    await sms.inbox!.pollOnce();
    await settle();
    expect(optOuts()).toHaveLength(before);
    expect(await cursor()).toBe(last);
  });

  it('a read with wrong credentials fails (SMSC error 2), applies nothing and keeps the cursor; the next good read applies the reply', async () => {
    const step = await sent('+79160000303', 'org-1');
    const before = optOuts().length;
    const at = await cursor();
    smsc.reply('79160000303', 'UNSUBSCRIBE');
    const forged = startSmscInbox({
      smsc: { baseUrl: smsc.url, login: LOGIN, password: 'wrong', timeoutMs: 2_000 },
      pool, recipients: new SmsRecipients(pool), results: new StepResultPublisher(tb.bus), intervalMs: NEVER, logger: testLogger(),
    });
    await expect(forged.pollOnce()).rejects.toMatchObject({ reason: 'provider_auth_failed' });
    await forged.stop();
    await settle();
    expect(optOuts()).toHaveLength(before);
    expect(await cursor()).toBe(at);
    await sms.inbox!.pollOnce();
    await waitFor(() => optOuts().find((r) => r.stepId === step.stepId), { what: 'the opt-out after the good read' });
  });

  it('a reply read again (the cursor lost) reports the same opt-out for the same attempt, which the scheduler records once', async () => {
    const step = await sent('+79160000304', 'org-1');
    smsc.reply('79160000304', 'отписаться');
    await sms.inbox!.pollOnce();
    await waitFor(() => optOuts().find((r) => r.stepId === step.stepId), { what: 'the first report' });
    await pool.query('DELETE FROM inbox_cursors');
    await sms.inbox!.pollOnce();
    const twice = await waitFor(() => {
      const mine = optOuts().filter((r) => r.stepId === step.stepId);
      return mine.length === 2 ? mine : undefined;
    }, { what: 'the second report' });
    const { at: _second, ...second } = twice[1];
    const { at: _first, ...first } = twice[0];
    expect(second).toEqual(first);
  });
});

/**
 * The real stack over JetStream: contacts, the scheduler and channel-sms with SMSC (the testkit fake,
 * its status notifications and its inbox). An SMS receipt reaches the cascade; a STOP reply puts the
 * phone in the organization's ledger (`stop_reply`), which skips a later step of another cascade and a
 * later request to that phone.
 */
describe('an SMS STOP reply on the real stack', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let smsPool: Pool;
  let schedulerPool: Pool;
  let stack: Awaited<ReturnType<typeof startCascadeStack>>;
  let smsc: FakeSmsc;
  let sms: Awaited<ReturnType<typeof startSmsSender>>;
  const ctx = testContext('sms-stop-stack');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    smsPool = createPool({ url: db.url, schema: 'channel_sms' });
    schedulerPool = createPool({ url: db.url, schema: 'scheduler' });
    smsc = await startFakeSmsc({ login: LOGIN, password: PASSWORD });
    stack = await startCascadeStack(db.url, tb.bus, ctx);
    sms = await startSmsSender(
      {
        databaseUrl: db.url, concurrency: 4, ackWaitMs: 5_000, contactsAddress: stack.contactsAddress,
        smsc: { baseUrl: smsc.url, login: LOGIN, password: PASSWORD, timeoutMs: 2_000 }, smscInboxPollMs: NEVER,
        receiptsHost: '127.0.0.1', receiptsPort: 0,
      },
      ctx,
      { bus: tb.bus, pool: smsPool },
    );
    smsc.statusUrl = `http://127.0.0.1:${sms.receiptsPort}/receipts/smsc`;
  });
  afterAll(async () => {
    await ctx.stop();
    await smsc.close();
    await tb.cleanup();
    await smsPool.end();
    await schedulerPool.end();
    await db.drop();
  });

  it('a receipt shows on the cascade; STOP enters the ledger as stop_reply and skips the later step of another cascade and a later request', async () => {
    const phone = '+79160000401';
    const { scheduler } = stack;
    const { organization, location } = await stack.smsOrganization('stop', 100);
    const start = (flowId: string, channel: string) =>
      scheduler.cascades.start({ organizationId: organization.id, locationId: location.id, name: '', flowId, channel, externalId: '', recipients: [{ name: 'Вера', email: '', phone, contactId: '', contactExternalId: '' }] });
    const cascade = (id: string) => scheduler.cascades.get(organization.id, id);

    // Another cascade: its first SMS now, its second 200 flow minutes later (8 s at 40 ms a minute).
    const flow = await scheduler.flows.create({ organizationId: organization.id, name: 'two SMS', isDefault: false, steps: [{ channel: 'SMS', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 200 }] });
    const later = (await start(flow.id, '')).result;
    await waitFor(async () => (await cascade(later.id)).recipients[0].steps[0].status === 'sent', { what: 'the other cascade\'s first SMS' });
    // The SMS the person answers: the last one sent to the number.
    const first = (await start('', 'SMS')).result;
    await waitFor(async () => (await cascade(first.id)).recipients[0].steps[0].status === 'sent', { what: 'the SMS answered' });
    const taken = smsc.messages.filter((m) => m.phones.includes(phone));
    expect(taken).toHaveLength(2);

    // The delivery receipt, as SMSC posts it, on the step of GET /cascades/{id}.
    await expect(smsc.deliver(taken[1].id, phone.slice(1), 1)).resolves.toEqual({ status: 200, body: 'OK' });
    const delivered = await waitFor(async () => {
      const now = await cascade(first.id);
      return now.recipients[0].steps[0].deliveredAt ? now : undefined;
    }, { what: 'the receipt on the step' });
    expect(delivered.recipients[0].steps[0]).toMatchObject({ status: 'sent', provider: 'smsc' });
    expect(delivered.counts.find((c) => c.key === 'stepsDelivered')?.value).toBe(1);

    // The person answers STOP.
    smsc.reply(phone.slice(1), 'STOP');
    await sms.inbox!.pollOnce();
    const stopped = await waitFor(async () => {
      const now = await cascade(first.id);
      return now.recipients[0].finishReason === 'unsubscribed' ? now : undefined;
    }, { what: 'the first recipient unsubscribed' });
    expect(stopped.recipients[0].steps[0]).toMatchObject({ status: 'sent' });
    const ledger = () => schedulerPool.query('SELECT address, channel, source FROM suppressions WHERE organization_id = $1', [organization.id]);
    expect((await ledger()).rows).toEqual([{ address: phone, channel: 'SMS', source: 'stop_reply' }]);

    // The other cascade's second step, due later, is skipped; nothing more reaches SMSC.
    const skipped = await waitFor(async () => {
      const now = await cascade(later.id);
      return now.recipients[0].steps[1].status !== 'pending' && now.recipients[0].steps[1].status !== 'scheduled' ? now : undefined;
    }, { what: 'the later step to come due', timeoutMs: 30_000 });
    expect(skipped.recipients[0].steps.map((s) => [s.status, s.reason])).toEqual([['sent', ''], ['skipped', 'opted_out']]);

    // A later request is skipped at intake.
    const again = (await start('', 'SMS')).result;
    expect(again).toMatchObject({ queued: 0, skipped: 1 });
    expect((await cascade(again.id)).recipients[0].steps[0]).toMatchObject({ status: 'skipped', reason: 'opted_out' });
    expect(smsc.timesAccepted(phone)).toBe(2);

    // The same reply read again (the cursor lost) adds nothing to the ledger.
    await smsPool.query('DELETE FROM inbox_cursors');
    await sms.inbox!.pollOnce();
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await ledger()).rows).toHaveLength(1);
  });
});
