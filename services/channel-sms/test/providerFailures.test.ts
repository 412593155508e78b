import { registry as metricsRegistry } from '@rrs/runtime';
import { ProviderChain, RetryableSendError, type ChainSent } from '@rrs/sender-kit';
import { startFakeSmsc, startFakeSmsRu, type FakeSmsc, type FakeSmsRu } from '@rrs/testkit';
import { smscProvider, smsRuProvider, type SmsProvider, type SmsSendRequest } from '../src';

/**
 * Issue 34, items 2, 4 and 5 for SMS, against the testkit fakes of SMSC.ru and SMS.ru: a hung SMSC (send
 * and status hanging), SMSC refusing our login (error 2), and SMSC's error 9 from a compatible gateway
 * without the status method.
 */

const LOGIN = 'acme';
const PASSWORD = 'smsc-secret';
const API_ID = 'smsru-api-id';
const TIMEOUT_MS = 700;
const SLOTS = 14;

const request = (n: string): SmsSendRequest => ({ stepId: `step-${n}`, phone: `+7916${n.padStart(7, '0')}`, text: `Rate us ${n}`, link: `https://r.test/r/${n}` });

type Outcome = { sent: ChainSent; ms: number } | { err: unknown; ms: number };

async function burst(chain: ProviderChain<SmsSendRequest>, requests: SmsSendRequest[], resumed = false, maybeWith: string[] = []): Promise<Outcome[]> {
  const started = Date.now();
  return Promise.all(requests.map((r) => chain.send(r, { idempotencyKey: r.stepId, resumed, maybeWith }).then(
    (sent) => ({ sent, ms: Date.now() - started }),
    (err: unknown) => ({ err, ms: Date.now() - started }),
  )));
}

describe('a hung SMSC (send and status hang)', () => {
  let smsc: FakeSmsc;
  let smsru: FakeSmsRu;
  let hang = false;
  let statusHang = false;
  const providers: SmsProvider[] = [];
  beforeAll(async () => {
    smsc = await startFakeSmsc({ login: LOGIN, password: PASSWORD, respond: () => (hang ? { hang: true } : undefined), respondStatus: () => (statusHang ? { hang: true } : undefined) });
    smsru = await startFakeSmsRu({ apiId: API_ID });
  });
  afterAll(async () => {
    for (const p of providers) await p.close?.();
    await smsc.close();
    await smsru.close();
  });

  function chainOf(channel: string) {
    const a = smscProvider({ baseUrl: smsc.url, login: LOGIN, password: PASSWORD, timeoutMs: TIMEOUT_MS, maxConnections: SLOTS });
    const b = smsRuProvider({ baseUrl: smsru.url, apiId: API_ID, timeoutMs: 2_000 });
    providers.push(a, b);
    return new ProviderChain<SmsSendRequest>(channel, [a, b]);
  }

  it('40 in flight on an SMSC that was answering, then hangs: the steps that never got a connection go out through SMS.ru within one timeout; only those on the wire stay in doubt, then resolve once the status answers', async () => {
    const chain = chainOf('TEST_SMS_HANG');
    // SMSC answers: proven, the whole burst may go.
    const warm = await burst(chain, Array.from({ length: 5 }, (_, i) => request(`1${i}`)));
    expect(warm.every((r) => 'sent' in r && r.sent.provider === 'smsc')).toBe(true);
    hang = true;
    statusHang = true;
    const before = smsc.requests;
    const steps = Array.from({ length: 40 }, (_, i) => request(`2${String(i).padStart(2, '0')}`));
    const results = await burst(chain, steps);
    const moved = results.filter((r): r is { sent: ChainSent; ms: number } => 'sent' in r && r.sent.provider === 'smsru');
    const inDoubt = results.filter((r): r is { err: unknown; ms: number } => 'err' in r);
    // Only the calls that held a connection reached SMSC: those, and only those, are in doubt.
    expect(smsc.requests - before).toBeLessThanOrEqual(SLOTS);
    expect(inDoubt.length).toBe(smsc.requests - before);
    expect(moved.length).toBe(40 - inDoubt.length);
    expect(moved.length).toBeGreaterThanOrEqual(40 - SLOTS);
    for (const r of inDoubt) expect(r.err).toMatchObject({ name: 'RetryableSendError', maybeDelivered: true, provider: 'smsc' });
    // "Within one timeout + 5 s": here one timeout (TIMEOUT_MS) and SMS.ru's answer.
    expect(Math.max(...moved.map((r) => r.ms))).toBeLessThan(TIMEOUT_MS + 1_000);
    for (const r of moved) expect(smsru.timesAccepted(steps.find((s) => s.stepId === r.sent.providerMessageId)?.phone.slice(1) ?? '')).toBeLessThanOrEqual(1);

    // SMSC's status answers again ("not found"): the steps in doubt resolve, each sent exactly once.
    statusHang = false;
    const doubtful = steps.filter((s) => !moved.some((m) => smsru.messages.some((x) => x.to === s.phone.slice(1))));
    expect(doubtful).toHaveLength(inDoubt.length);
    const resolved = await burst(chain, doubtful, true, ['smsc']);
    expect(resolved.every((r) => 'sent' in r && r.sent.provider === 'smsru')).toBe(true);
    for (const s of steps) expect(smsru.timesAccepted(s.phone.slice(1)) + smsc.timesAccepted(s.phone)).toBe(1);
  });

  it('40 in flight on an SMSC that hangs from the start: one probe reaches it, the rest go out through SMS.ru within one timeout', async () => {
    hang = true;
    statusHang = true;
    const chain = chainOf('TEST_SMS_HANG_COLD');
    const before = smsc.requests;
    const results = await burst(chain, Array.from({ length: 40 }, (_, i) => request(`3${String(i).padStart(2, '0')}`)));
    const moved = results.filter((r): r is { sent: ChainSent; ms: number } => 'sent' in r && r.sent.provider === 'smsru');
    expect(smsc.requests - before).toBe(1);
    expect(moved).toHaveLength(39);
    expect(Math.max(...moved.map((r) => r.ms))).toBeLessThan(TIMEOUT_MS + 1_000);
  });
});

describe('SMSC refusing our login (error 2), 60 in flight', () => {
  it('fails over to SMS.ru and alerts; at most 10 calls reach SMSC, and no step fails for good', async () => {
    const smsc = await startFakeSmsc({ login: LOGIN, password: PASSWORD });
    const smsru = await startFakeSmsRu({ apiId: API_ID });
    const a = smscProvider({ baseUrl: smsc.url, login: LOGIN, password: 'wrong', timeoutMs: 2_000, maxConnections: SLOTS });
    const b = smsRuProvider({ baseUrl: smsru.url, apiId: API_ID, timeoutMs: 2_000 });
    try {
      const chain = new ProviderChain<SmsSendRequest>('TEST_SMS_AUTH', [a, b]);
      const results = await burst(chain, Array.from({ length: 60 }, (_, i) => request(`4${String(i).padStart(2, '0')}`)));
      expect(results.every((r) => 'sent' in r && r.sent.provider === 'smsru')).toBe(true);
      expect(smsc.requests).toBeLessThanOrEqual(10);
      const metric = await metricsRegistry.getSingleMetric('sender_provider_alerts_total')!.get();
      const alerts = metric.values.filter((v) => v.labels.channel === 'TEST_SMS_AUTH');
      expect(alerts.map((v) => [v.labels.provider, v.labels.reason])).toEqual([['smsc', 'provider_auth_failed']]);
      expect(alerts[0].value).toBe(smsc.requests);
    } finally {
      await a.close?.();
      await b.close?.();
      await smsc.close();
      await smsru.close();
    }
  });
});

describe('SMSC error 9 from a gateway without the status method', () => {
  let smsc: FakeSmsc;
  let busy = false;
  beforeAll(async () => {
    smsc = await startFakeSmsc({ login: LOGIN, password: PASSWORD, statusMethod: false, respond: () => (busy ? { error: 'too many concurrent requests', errorCode: 9 } : undefined) });
  });
  afterAll(() => smsc.close());
  const provider = () => smscProvider({ baseUrl: smsc.url, login: LOGIN, password: PASSWORD, timeoutMs: 2_000 });

  it('a resumed send refused with error 9 is never recorded as sent: it stays in doubt with SMSC (nothing was accepted)', async () => {
    busy = true;
    const p = provider();
    try {
      const req = request('500');
      const err = await p.send(req, { idempotencyKey: req.stepId, resumed: true }).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(RetryableSendError);
      expect(err).toMatchObject({ reason: 'provider_busy', maybeDelivered: true });
      expect(smsc.count).toBe(0);
    } finally {
      busy = false;
      await p.close?.();
    }
  });

  it('through the chain: the step is pinned to SMSC (never sent elsewhere), and resolves as sent once SMSC accepts it', async () => {
    const smsru = await startFakeSmsRu({ apiId: API_ID });
    const a = provider();
    const b = smsRuProvider({ baseUrl: smsru.url, apiId: API_ID, timeoutMs: 2_000 });
    try {
      const chain = new ProviderChain<SmsSendRequest>('TEST_SMS_ERR9', [a, b]);
      const req = request('501');
      busy = true;
      const doubt = await chain.send(req, { idempotencyKey: req.stepId, resumed: true, maybeWith: ['smsc'] }).then(() => undefined, (e: unknown) => e);
      expect(doubt).toMatchObject({ name: 'RetryableSendError', maybeDelivered: true, provider: 'smsc' });
      expect(smsru.requests).toBe(0);
      busy = false;
      await expect(chain.send(req, { idempotencyKey: req.stepId, resumed: true, maybeWith: ['smsc'] })).resolves.toEqual({ provider: 'smsc', providerMessageId: req.stepId });
      expect(smsc.timesAccepted(req.phone)).toBe(1);
      expect(smsru.requests).toBe(0);
    } finally {
      busy = false;
      await a.close?.();
      await b.close?.();
      await smsru.close();
    }
  });

  it('a first (not resumed) send refused with error 9 is "not sent" (busy): no earlier call for the step can have been taken', async () => {
    busy = true;
    const p = provider();
    try {
      const req = request('502');
      await expect(p.send(req, { idempotencyKey: req.stepId, resumed: false })).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'provider_busy', maybeDelivered: false });
    } finally {
      busy = false;
      await p.close?.();
    }
  });
});

describe('per-number errors are the recipient\'s, never the provider\'s', () => {
  it('20 invalid numbers at SMSC (error 7) at once: each step fails invalid_phone, SMSC\'s circuit stays closed and SMS.ru gets nothing', async () => {
    const smsc = await startFakeSmsc({ login: LOGIN, password: PASSWORD });
    const smsru = await startFakeSmsRu({ apiId: API_ID });
    const a = smscProvider({ baseUrl: smsc.url, login: LOGIN, password: PASSWORD, timeoutMs: 2_000, maxConnections: SLOTS });
    const b = smsRuProvider({ baseUrl: smsru.url, apiId: API_ID, timeoutMs: 2_000 });
    try {
      const chain = new ProviderChain<SmsSendRequest>('TEST_SMS_PER_NUMBER', [a, b], { failureThreshold: 2 });
      const bad = Array.from({ length: 20 }, (_, i) => ({ ...request(`6${i}`), phone: `+7${i}` }));
      const results = await burst(chain, bad);
      for (const r of results) expect('err' in r && r.err).toMatchObject({ name: 'PermanentSendError', reason: 'invalid_phone' });
      expect(chain.circuit('smsc')).toBe('closed');
      expect(smsru.requests).toBe(0);
      await expect(chain.send(request('699'), { idempotencyKey: 'step-699', resumed: false, maybeWith: [] })).resolves.toMatchObject({ provider: 'smsc' });
    } finally {
      await a.close?.();
      await b.close?.();
      await smsc.close();
      await smsru.close();
    }
  });

  it('SMS.ru\'s daily limit for one number (230) is retried later for that number, not a provider fault, and fails with its reason at the end', async () => {
    const smsru = await startFakeSmsRu({ apiId: API_ID, dailyLimitPerNumber: 1 });
    const b = smsRuProvider({ baseUrl: smsru.url, apiId: API_ID, timeoutMs: 2_000 });
    try {
      const chain = new ProviderChain<SmsSendRequest>('TEST_SMSRU_230', [b], { failureThreshold: 1 });
      const first = request('700');
      await expect(chain.send(first, { idempotencyKey: first.stepId, resumed: false, maybeWith: [] })).resolves.toMatchObject({ provider: 'smsru' });
      const again = { ...request('701'), phone: first.phone };
      await expect(chain.send(again, { idempotencyKey: again.stepId, resumed: false, maybeWith: [] })).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'recipient_daily_limit', recipientLevel: true, maybeDelivered: false });
      expect(chain.circuit('smsru')).toBe('closed');
    } finally {
      await b.close?.();
      await smsru.close();
    }
  });
});
