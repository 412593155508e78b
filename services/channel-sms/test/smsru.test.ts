import { busV1 } from '@rrs/proto';
import { createPool, registry, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, startFakeSmsRu, testContext, waitFor, type FakeSmsRu, type TestBus, type TestDatabase } from '@rrs/testkit';
import { collectResults, dueStep, publishStep } from '../../../packages/sender-kit/test/support/steps';
import { buildConfig, smsRuProvider, startSmsSender, type SmsBalance } from '../src';

const Outcome = busV1.StepOutcome;
const API_ID = 'smsru-api-id-1';
const SECRET = 'callback-secret-0123456789';

/** The DebitSmsBalance contract, with money enough for every step. */
const plenty: SmsBalance = { debit: async () => ({ debited: true, balance: 100 }) };

describe('SMS.ru adapter against the fake SMS.ru API', () => {
  let smsru: FakeSmsRu;
  const provider = (apiId = API_ID, extra: { test?: boolean; timeoutMs?: number } = {}) => smsRuProvider({ baseUrl: smsru.url, apiId, sender: 'Acme', timeoutMs: extra.timeoutMs ?? 2_000, test: extra.test });
  const request = (phone: string, text = 'Оцените нас: https://r.test/r/1') => ({ stepId: `s-${phone}`, phone, text, link: 'https://r.test/r/1' });

  beforeEach(async () => {
    smsru = await startFakeSmsRu({ apiId: API_ID, balance: 10, pricePerMessage: 2 });
  });
  afterEach(() => smsru.close());

  it('sends with api_id, to (digits), msg, from and json=1, answers the sms_id, and reads the balance from the reply', async () => {
    const sent = await provider().send(request('+79160000001'));
    expect(smsru.messages).toMatchObject([{ to: '79160000001', msg: 'Оцените нас: https://r.test/r/1', from: 'Acme', test: false }]);
    expect(sent).toEqual({ providerMessageId: smsru.messages[0].smsId });
    const balance = await registry.getSingleMetric('sms_provider_balance')!.get();
    expect(balance.values.find((v) => v.labels.provider === 'smsru')?.value).toBe(8);
  });

  it('with test=1 nothing is sent or charged', async () => {
    await provider(API_ID, { test: true }).send(request('+79160000002'));
    expect(smsru.messages[0].test).toBe(true);
    expect(smsru.timesAccepted('79160000002')).toBe(0);
    expect(smsru.balance).toBe(10);
  });

  it('sorts the per-number and request codes: bad number permanent, wrong api_id and no money provider faults, 220 and HTTP 503 unavailable', async () => {
    await expect(provider().send(request('+12'))).rejects.toMatchObject({ name: 'PermanentSendError', reason: 'invalid_phone' });
    await expect(provider('wrong').send(request('+79160000003'))).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'provider_auth_failed', maybeDelivered: false });
    for (let i = 0; i < 5; i++) await provider().send(request(`+7916000010${i}`));
    await expect(provider().send(request('+79160000110'))).rejects.toMatchObject({ reason: 'provider_account_balance', maybeDelivered: false });
    await smsru.outage('unavailable');
    await expect(provider().send(request('+79160000004'))).rejects.toMatchObject({ reason: 'provider_unavailable', maybeDelivered: false });
    await smsru.outage('http503');
    await expect(provider().send(request('+79160000005'))).rejects.toMatchObject({ reason: 'provider_unavailable', maybeDelivered: true });
    await smsru.outage('refuse');
    // The first call may still meet a pooled connection the fake closed under it (ambiguous: maybe
    // delivered); once the pool has seen the close, the connection is refused: nothing was sent.
    await expect(provider().send(request('+79160000006'))).rejects.toMatchObject({ reason: 'provider_unreachable' });
    await expect(provider().send(request('+79160000006'))).rejects.toMatchObject({ reason: 'provider_unreachable', maybeDelivered: false });
    expect(smsru.messages.map((m) => m.to)).toEqual(['79160000100', '79160000101', '79160000102', '79160000103', '79160000104']);
  });

  it('the same text to the same number within a minute (231): another step busy, but after a call that may have gone through, our own message', async () => {
    await provider().send(request('+79160000007'));
    await expect(provider().send(request('+79160000007'))).rejects.toMatchObject({ reason: 'provider_busy', retryAfterMs: 60_000 });
    await expect(provider().send(request('+79160000007'), { idempotencyKey: 's', resumed: true })).resolves.toEqual({ providerMessageId: 'smsru-unknown:s-+79160000007' });
    expect(smsru.timesAccepted('79160000007')).toBe(1);
  });
});

describe('channel-sms with SMS.ru: status callbacks on a secret path', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let smsru: FakeSmsRu;
  let results: busV1.StepResult[];
  let base: string;
  const ctx = testContext('sms-smsru');

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: 'channel_sms' });
    smsru = await startFakeSmsRu({ apiId: API_ID });
    results = (await collectResults(tb.bus)).results;
    const config = buildConfig({ DATABASE_URL: db.url, SMSRU_URL: smsru.url, SMSRU_API_ID: API_ID, SMSRU_CALLBACK_SECRET: SECRET, SMS_RECEIPTS_HOST: '127.0.0.1', SMS_RECEIPTS_PORT: '0' });
    const sms = await startSmsSender({ ...config, concurrency: 4, ackWaitMs: 5_000 }, ctx, { bus: tb.bus, pool, balance: plenty });
    base = `http://127.0.0.1:${sms.receiptsPort}/receipts/smsru/`;
    smsru.callbackUrl = `${base}${SECRET}`;
  });
  afterAll(async () => {
    await ctx.stop();
    await smsru.close();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  it('reports SENT with provider smsru, then DELIVERED from the callback (answered 100); a wrong secret is 404 and applies nothing', async () => {
    const step = dueStep('SMS', { recipient: { name: 'Анна', email: '', phone: '+79160000201' } });
    await publishStep(tb.bus, step);
    const sent = await waitFor(() => results.find((r) => r.stepId === step.stepId), { what: 'the SMS result' });
    const smsId = smsru.messages.find((m) => m.to === '79160000201')!.smsId;
    expect(sent).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT, provider: 'smsru', providerMessageId: smsId });

    const forged = await fetch(`${base}wrong-secret-0123456789x`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ 'data[0]': `sms_status\n${smsId}\n104\n1` }) });
    expect(forged.status).toBe(404);
    await expect(smsru.deliver(smsId, 102)).resolves.toEqual({ status: 200, body: '100' });
    await expect(smsru.deliver(smsId, 103)).resolves.toEqual({ status: 200, body: '100' });
    const delivered = await waitFor(() => results.find((r) => r.stepId === step.stepId && r.outcome === Outcome.STEP_OUTCOME_DELIVERED), { what: 'the receipt' });
    expect(delivered).toMatchObject({ reason: 'delivered', provider: 'smsru', providerMessageId: smsId });
    expect(results.filter((r) => r.stepId === step.stepId).map((r) => r.outcome)).toEqual([Outcome.STEP_OUTCOME_SENT, Outcome.STEP_OUTCOME_DELIVERED]);
  });

  it('a number on the account\'s stop list (209): the person is reported opted out (stop_reply) before the step fails; nothing is sent', async () => {
    smsru.addToStopList('79160000202');
    const step = dueStep('SMS', { recipient: { name: 'Олег', email: '', phone: '+79160000202' } });
    await publishStep(tb.bus, step);
    await waitFor(() => results.find((r) => r.stepId === step.stepId && r.outcome === Outcome.STEP_OUTCOME_FAILED), { what: 'the failed step' });
    expect(results.filter((r) => r.stepId === step.stepId).map((r) => [r.outcome, r.reason, r.attemptId])).toEqual([
      [Outcome.STEP_OUTCOME_OPTED_OUT, 'stop_reply', step.attemptId],
      [Outcome.STEP_OUTCOME_FAILED, 'recipient_opted_out', step.attemptId],
    ]);
    expect(smsru.timesAccepted('79160000202')).toBe(0);
  });

  it('answers a callback without entries 400, and one for an unknown message 100 (so SMS.ru stops retrying)', async () => {
    const post = (body: URLSearchParams) => fetch(`${base}${SECRET}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
    expect((await post(new URLSearchParams({ other: '1' }))).status).toBe(400);
    const unknown = await post(new URLSearchParams({ 'data[0]': 'sms_status\n000000-999\n103\n1' }));
    expect([unknown.status, await unknown.text()]).toEqual([200, '100']);
  });
});
