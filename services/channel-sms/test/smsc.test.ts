import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { busV1 } from '@rrs/proto';
import { createMemoryBus, createPool, type Pool } from '@rrs/runtime';
import { SendLog, StepResultPublisher } from '@rrs/sender-kit';
import { createTestBus, createTestDatabase, testContext, testLogger, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { collectResults, dueStep, publishStep } from '../../../packages/sender-kit/test/support/steps';
import { renderSms, smscProvider, startReceiptServer, startSmsSender, type SmsBalance } from '../src';

const Outcome = busV1.StepOutcome;
const PASSWORD = 's3cret';

/** A message the fake SMSC took (and would deliver). */
interface TakenSms { id: string; phone: string; mes: string; sender: string; at: number }

/**
 * A local server speaking the SMSC.ru HTTP API as its docs describe it (https://smsc.ru/api/http/):
 * `POST /sys/send.php` (form-encoded, fmt=3 JSON answers) with its error answers chosen by the phone
 * number, and `POST /sys/status.php` (phone + id → the status of the last such message, -3 if none).
 * Like SMSC, it does not refuse a second message with the same `id` ("не обязательно уникален"); it
 * refuses only the same request within a minute, with error 9, which SMSC also gives when 15 or more
 * requests arrive at once under one login (`busyNext`).
 */
async function startFakeSmsc() {
  const requests: URLSearchParams[] = [];
  const statusRequests: URLSearchParams[] = [];
  const taken: TakenSms[] = [];
  let transientFailures = new Map<string, number>();
  const busy = new Map<string, number>();
  const unanswered = new Set<string>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const form = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      const json = (status: number, body: unknown, headers: Record<string, string> = {}) => res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
      if (req.method !== 'POST' || form.get('fmt') !== '3') return json(404, {});
      if (req.url === '/sys/status.php') {
        statusRequests.push(form);
        if (form.get('login') !== 'acme' || form.get('psw') !== PASSWORD) return json(200, { error: 'authorise error', error_code: 2 });
        const last = taken.filter((m) => m.id === form.get('id') && m.phone === form.get('phone')).pop();
        return json(200, last ? { status: 0, last_date: '', last_timestamp: Math.floor(last.at / 1000), err: 0 } : { status: -3 });
      }
      if (req.url !== '/sys/send.php') return json(404, {});
      requests.push(form);
      if (form.get('phones')?.endsWith('9999')) return; // never answers: the caller must time out
      if (form.get('login') !== 'acme' || form.get('psw') !== PASSWORD) return json(200, { error: 'authorise error', error_code: 2 });
      const phone = form.get('phones') ?? '';
      const id = form.get('id') ?? '';
      const mes = form.get('mes') ?? '';
      const sender = form.get('sender') ?? '';
      const left = transientFailures.get(phone) ?? 0;
      if (left > 0) {
        transientFailures.set(phone, left - 1);
        if (phone.endsWith('429')) return json(429, { error: 'too many requests' }, { 'retry-after': '1' });
        return json(503, { error: 'unavailable' });
      }
      const busyLeft = busy.get(phone) ?? 0;
      if (busyLeft > 0) {
        busy.set(phone, busyLeft - 1);
        return json(200, { error: 'too many concurrent requests', error_code: 9 });
      }
      if (phone.endsWith('0007')) return json(200, { error: 'invalid number', error_code: 7, id });
      if (phone.endsWith('0006')) return json(200, { error: 'message is denied', error_code: 6, id });
      const now = Date.now();
      if (taken.some((m) => m.phone === phone && m.mes === mes && m.id === id && m.sender === sender && now - m.at < 60_000)) {
        return json(200, { error: 'duplicate request, wait a minute', error_code: 9, id });
      }
      taken.push({ id, phone, mes, sender, at: now });
      // Taken, but the answer is lost on the way back: the caller times out.
      if (unanswered.delete(phone)) return;
      json(200, { id, cnt: 1 });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    statusRequests,
    /** Messages taken with this id: more than one means the step was sent twice. */
    sentWith: (id: string) => taken.filter((m) => m.id === id),
    /** A message SMSC took earlier (e.g. before the sender died without recording it). */
    preload(message: TakenSms) {
      taken.push(message);
    },
    failNext(phone: string, times: number) {
      transientFailures = new Map(transientFailures).set(phone, times);
    },
    busyNext(phone: string, times: number) {
      busy.set(phone, times);
    },
    takeWithoutAnswer(phone: string) {
      unanswered.add(phone);
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** The DebitSmsBalance contract: atomic, and a repeat for the same step answers the first result. */
function fakeBalance(initial: Record<string, number>) {
  const balances = new Map(Object.entries(initial));
  const debits = new Map<string, { debited: boolean; balance: number }>();
  const calls: string[] = [];
  const balance: SmsBalance = {
    async debit({ organizationId, stepId, parts }) {
      calls.push(stepId);
      const prior = debits.get(stepId);
      if (prior) return prior;
      const have = balances.get(organizationId) ?? 0;
      const answer = have >= parts ? { debited: true, balance: have - parts } : { debited: false, balance: have };
      if (answer.debited) balances.set(organizationId, answer.balance);
      debits.set(stepId, answer);
      return answer;
    },
  };
  return { balance, balances, calls };
}

describe('channel-sms against a fake SMSC.ru', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let smsc: Awaited<ReturnType<typeof startFakeSmsc>>;
  const ctx = testContext('sms-test');
  let results: busV1.StepResult[];
  const money = fakeBalance({ 'org-1': 100, 'org-broke': 0 });
  let receiptsUrl: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: 'channel_sms' });
    smsc = await startFakeSmsc();
    const collected = await collectResults(tb.bus);
    results = collected.results;
    const sms = await startSmsSender(
      {
        databaseUrl: db.url, concurrency: 4, ackWaitMs: 5_000, maxDeliver: 4,
        smsc: { baseUrl: smsc.url, login: 'acme', password: PASSWORD, sender: 'Acme', timeoutMs: 2_000 },
        receiptsHost: '127.0.0.1', receiptsPort: 0,
      },
      ctx,
      { bus: tb.bus, pool, balance: money.balance },
    );
    receiptsUrl = `http://127.0.0.1:${sms.receiptsPort}/receipts/smsc`;
  });
  afterAll(async () => {
    await ctx.stop();
    await smsc.close();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  const resultsOf = (stepId: string) => results.filter((r) => r.stepId === stepId);
  const resultOf = (stepId: string) => waitFor(() => resultsOf(stepId)[0], { what: `result of ${stepId}` });
  const requestsFor = (stepId: string) => smsc.requests.filter((r) => r.get('id') === stepId);

  it('sends the cut text with the SMSC parameters, debits one part, and reports SENT', async () => {
    const before = money.balances.get('org-1')!;
    const step = dueStep('SMS', { recipient: { name: 'Анна', email: '', phone: '+79160000001' }, template: { subject: '', body: '{{name}}, оцените {{location}}: {{link}}\nsecond line' } });
    await publishStep(tb.bus, step);
    expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: step.stepId, parts: 1, channel: 'SMS', provider: 'smsc' });
    const [req] = requestsFor(step.stepId);
    expect(Object.fromEntries(req)).toMatchObject({ login: 'acme', psw: PASSWORD, phones: '+79160000001', sender: 'Acme', fmt: '3', charset: 'utf-8', id: step.stepId });
    expect(req.get('mes')).toBe(`Анна, оцените Acme Dental: ${step.reviewUrl}`);
    expect(money.balances.get('org-1')).toBe(before - 1);
  });

  it('reports NO_BALANCE when the organization has no SMS balance, and sends nothing', async () => {
    const step = dueStep('SMS', { organizationId: 'org-broke', recipient: { name: 'B', email: '', phone: '+79160000002' } });
    await publishStep(tb.bus, step);
    expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_NO_BALANCE, reason: 'no_balance', organizationId: 'org-broke' });
    expect(requestsFor(step.stepId)).toHaveLength(0);
  });

  it('debits and sends once when the step is redelivered', async () => {
    const before = money.balances.get('org-1')!;
    const step = dueStep('SMS', { recipient: { name: 'R', email: '', phone: '+79160000003' } });
    await publishStep(tb.bus, step);
    await resultOf(step.stepId);
    await publishStep(tb.bus, dueStep('SMS', { ...step, attempt: 2, attemptId: `${step.stepId}:2` }));
    await waitFor(() => resultsOf(step.stepId).length === 2);
    expect(requestsFor(step.stepId)).toHaveLength(1);
    expect(money.balances.get('org-1')).toBe(before - 1);
  });

  it.each([
    ['an invalid number (error 7)', '+79160000007', 'invalid_phone'],
    ['a forbidden message (error 6)', '+79160000006', 'message_forbidden'],
  ])('fails permanently on %s without retrying', async (_label, phone, reason) => {
    const step = dueStep('SMS', { recipient: { name: 'X', email: '', phone } });
    await publishStep(tb.bus, step);
    expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_FAILED, reason });
    await new Promise((r) => setTimeout(r, 200));
    expect(requestsFor(step.stepId)).toHaveLength(1);
  });

  it('retries a 503 and a 429 with Retry-After, then sends once', async () => {
    smsc.failNext('+79160000503', 1);
    smsc.failNext('+79160000429', 1);
    const first = dueStep('SMS', { recipient: { name: 'A', email: '', phone: '+79160000503' } });
    const second = dueStep('SMS', { recipient: { name: 'B', email: '', phone: '+79160000429' } });
    await publishStep(tb.bus, first);
    await publishStep(tb.bus, second);
    expect(await resultOf(first.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT });
    expect(await resultOf(second.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT });
    expect([smsc.sentWith(first.stepId).length, smsc.sentWith(second.stepId).length]).toEqual([1, 1]);
    expect(requestsFor(second.stepId)).toHaveLength(2);
  });

  it('fails a step without a phone number with missing_contact: nothing debited or sent', async () => {
    const step = dueStep('SMS', { recipient: { name: 'N', email: 'n@example.com', phone: '' } });
    await publishStep(tb.bus, step);
    expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_FAILED, reason: 'missing_contact' });
    expect(money.calls).not.toContain(step.stepId);
    expect(requestsFor(step.stepId)).toHaveLength(0);
  });

  describe('the at-least-once windows (docs/channels.md)', () => {
    const statusAsked = (stepId: string) => smsc.statusRequests.filter((r) => r.get('id') === stepId);

    it('a send resumed after the sender died between SMSC taking it and the send log asks SMSC first, and does not send again', async () => {
      const phone = '+79160000030';
      const step = dueStep('SMS', { recipient: { name: 'K', email: '', phone } });
      // SMSC took the message five minutes ago (beyond its one-minute duplicate rule); the sender was killed
      // before recording it, so its row is still `sending`, with the lease over.
      smsc.preload({ id: step.stepId, phone, mes: renderSms(step).text, sender: 'Acme', at: Date.now() - 5 * 60_000 });
      await pool.query(`INSERT INTO send_log (step_id, attempt_id, channel, organization_id, state, lease_until) VALUES ($1, $2, 'SMS', 'org-1', 'sending', now() - interval '1 second')`, [step.stepId, step.attemptId]);
      await publishStep(tb.bus, step);
      expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: step.stepId, parts: 1 });
      expect(statusAsked(step.stepId).map((r) => r.get('phone'))).toEqual([phone]);
      expect(requestsFor(step.stepId)).toHaveLength(0);
      expect(smsc.sentWith(step.stepId)).toHaveLength(1);
    });

    it('a send whose answer was lost is looked up at SMSC before it is tried again: one message', async () => {
      const phone = '+79160000031';
      smsc.takeWithoutAnswer(phone);
      const step = dueStep('SMS', { recipient: { name: 'L', email: '', phone } });
      await publishStep(tb.bus, step);
      expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: step.stepId });
      expect(requestsFor(step.stepId)).toHaveLength(1);
      expect(statusAsked(step.stepId)).toHaveLength(1);
      expect(smsc.sentWith(step.stepId)).toHaveLength(1);
    });

    it('error 9 for too many concurrent requests is retried, not taken for "already sent"', async () => {
      const phone = '+79160000032';
      smsc.busyNext(phone, 1);
      const step = dueStep('SMS', { recipient: { name: 'M', email: '', phone } });
      await publishStep(tb.bus, step);
      expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT });
      expect(requestsFor(step.stepId)).toHaveLength(2);
      expect(smsc.sentWith(step.stepId)).toHaveLength(1);
    });
  });

  describe('delivery receipts', () => {
    const sign = (id: string, phone: string, status: string) => createHash('sha1').update(`${id}:${phone}:${status}:${PASSWORD}`).digest('hex');
    const post = (fields: Record<string, string>) => fetch(receiptsUrl, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields) });

    it('turns a final SMSC status into DELIVERED / UNDELIVERED for the step', async () => {
      const ok = dueStep('SMS', { recipient: { name: 'D', email: '', phone: '+79160000010' } });
      const bad = dueStep('SMS', { recipient: { name: 'U', email: '', phone: '+79160000011' } });
      await publishStep(tb.bus, ok);
      await publishStep(tb.bus, bad);
      await resultOf(ok.stepId);
      await resultOf(bad.stepId);
      let res = await post({ id: ok.stepId, phone: '79160000010', status: '1', time: '1700000000', err: '0', sha1: sign(ok.stepId, '79160000010', '1') });
      expect(res.status).toBe(200);
      res = await post({ id: bad.stepId, phone: '79160000011', status: '20', time: '1700000000', err: '1', sha1: sign(bad.stepId, '79160000011', '20') });
      expect(res.status).toBe(200);
      await waitFor(() => resultsOf(ok.stepId).length === 2 && resultsOf(bad.stepId).length === 2);
      expect(resultsOf(ok.stepId)[1]).toMatchObject({ outcome: Outcome.STEP_OUTCOME_DELIVERED, attemptId: ok.attemptId, organizationId: 'org-1' });
      expect(resultsOf(bad.stepId)[1]).toMatchObject({ outcome: Outcome.STEP_OUTCOME_UNDELIVERED, reason: 'undeliverable' });
    });

    it('refuses a receipt with a wrong signature (403) and ignores non-final statuses', async () => {
      const step = dueStep('SMS', { recipient: { name: 'S', email: '', phone: '+79160000012' } });
      await publishStep(tb.bus, step);
      await resultOf(step.stepId);
      expect((await post({ id: step.stepId, phone: '79160000012', status: '1', sha1: 'deadbeef'.repeat(5) })).status).toBe(403);
      expect((await post({ id: step.stepId, phone: '79160000012', status: '0', sha1: sign(step.stepId, '79160000012', '0') })).status).toBe(200);
      expect((await post({ phone: '79160000012', status: '1' })).status).toBe(400);
      // An unknown message is acknowledged, so SMSC stops retrying it, and changes nothing.
      expect((await post({ id: 'nope', phone: '1', status: '1', sha1: sign('nope', '1', '1') })).status).toBe(200);
      await new Promise((r) => setTimeout(r, 200));
      expect(resultsOf(step.stepId)).toHaveLength(1);
    });
  });
});

describe('the SMSC adapter on its own', () => {
  let smsc: Awaited<ReturnType<typeof startFakeSmsc>>;
  beforeAll(async () => {
    smsc = await startFakeSmsc();
  });
  afterAll(() => smsc.close());

  const provider = (password = PASSWORD, timeoutMs = 2_000) => smscProvider({ baseUrl: smsc.url, login: 'acme', password, timeoutMs });

  it('passes the step id as the message id; a repeat within a minute is refused by SMSC (error 9) and read as sent, since SMSC has the message', async () => {
    const req = { stepId: 'step-dup-1', phone: '+79160000020', text: 'hi', link: 'https://x/r/1' };
    expect(await provider().send(req)).toEqual({ providerMessageId: 'step-dup-1' });
    expect(await provider().send(req)).toEqual({ providerMessageId: 'step-dup-1' });
    expect(smsc.sentWith('step-dup-1')).toHaveLength(1);
    expect(smsc.requests.filter((r) => r.get('id') === 'step-dup-1')).toHaveLength(2);
    // SMSC does not deduplicate by id alone: another request with the same id is a second message.
    await provider().send({ ...req, text: 'hi again' });
    expect(smsc.sentWith('step-dup-1')).toHaveLength(2);
  });

  it('a resumed send asks SMSC first: sent if SMSC has no message with that id, not sent if it has', async () => {
    const fresh = { stepId: 'step-resumed-1', phone: '+79160000022', text: 'hi', link: '', resumed: true };
    expect(await provider().send(fresh)).toEqual({ providerMessageId: 'step-resumed-1' });
    expect(smsc.sentWith('step-resumed-1')).toHaveLength(1);
    smsc.preload({ id: 'step-resumed-2', phone: '+79160000022', mes: 'hi', sender: '', at: Date.now() - 120_000 });
    expect(await provider().send({ ...fresh, stepId: 'step-resumed-2' })).toEqual({ providerMessageId: 'step-resumed-2' });
    expect(smsc.sentWith('step-resumed-2')).toHaveLength(1);
    expect(smsc.statusRequests.map((r) => r.get('id'))).toEqual(expect.arrayContaining(['step-resumed-1', 'step-resumed-2']));
  });

  it('sorts error 9 without a message at SMSC (too many concurrent requests) as retryable provider_busy', async () => {
    smsc.busyNext('+79160000023', 1);
    await expect(provider().send({ stepId: 's-busy', phone: '+79160000023', text: 'hi', link: '' })).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'provider_busy' });
    expect(smsc.sentWith('s-busy')).toHaveLength(0);
  });

  it('sorts a wrong login or password (error 2) as retryable provider_auth_failed', async () => {
    await expect(provider('wrong').send({ stepId: 's-auth', phone: '+79160000021', text: 'hi', link: '' })).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'provider_auth_failed', retryAfterMs: 60_000 });
  });

  it('sorts no answer in time as retryable provider_timeout', async () => {
    await expect(provider(PASSWORD, 200).send({ stepId: 's-slow', phone: '+79160009999', text: 'hi', link: '' })).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'provider_timeout' });
  });

  it('sorts 429 with its Retry-After and 503 as retryable', async () => {
    smsc.failNext('+79160000429', 1);
    await expect(provider().send({ stepId: 's-429', phone: '+79160000429', text: 'hi', link: '' })).rejects.toMatchObject({ reason: 'provider_rate_limited', retryAfterMs: 1_000 });
    smsc.failNext('+79160000503', 1);
    await expect(provider().send({ stepId: 's-503', phone: '+79160000503', text: 'hi', link: '' })).rejects.toMatchObject({ reason: 'provider_unavailable' });
  });
});

describe('the receipts endpoint while the send log is down', () => {
  it('answers 503 to every receipt (SMSC retries) and logs the failure once, with a count on close', async () => {
    const logger = testLogger('receipts');
    const down = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const sendLog = { findByProviderMessageId: async () => { throw down; } } as unknown as SendLog;
    const bus = createMemoryBus({ prefix: 'receipts' });
    const server = await startReceiptServer({ host: '127.0.0.1', port: 0, results: new StepResultPublisher(bus), sendLog, password: PASSWORD, logger });
    try {
      const sign = (id: string) => createHash('sha1').update(`${id}:79160000040:1:${PASSWORD}`).digest('hex');
      for (let i = 0; i < 30; i++) {
        const res = await fetch(`http://127.0.0.1:${server.port}/receipts/smsc`, { method: 'POST', body: new URLSearchParams({ id: `s${i}`, phone: '79160000040', status: '1', sha1: sign(`s${i}`) }) });
        expect(res.status).toBe(503);
      }
    } finally {
      await server.close();
      await bus.close();
    }
    const lines = logger.lines.map((l) => JSON.parse(l) as { msg: string; err?: unknown; repeated?: number }).filter((l) => l.msg === 'provider callback failed; the provider will retry');
    expect(lines).toHaveLength(2);
    expect(lines[0].err).toBeDefined();
    expect(lines[1].repeated).toBe(29);
  });
});
