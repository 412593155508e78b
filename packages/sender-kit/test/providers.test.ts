import { busV1 } from '@rrs/proto';
import { createPool, registry as metricsRegistry, type Pool } from '@rrs/runtime';
import { createTestDatabase, testContext, type TestDatabase } from '@rrs/testkit';
import { CircuitBreaker, openSendLog, PermanentSendError, ProviderChain, RetryableSendError, type ChannelProvider, type ProviderLookup, type SendLog } from '../src';
import { dueStep } from './support/steps';

interface Request {
  to: string;
}

/** A provider of the chain under test: each call answers what `script` says, and the calls are kept. */
function provider(name: string, options: { lookup?: (req: Request) => ProviderLookup | Error } = {}) {
  const calls: Array<{ kind: 'send' | 'lookup'; to: string; resumed: boolean }> = [];
  const script: Array<(() => unknown) | undefined> = [];
  const p: ChannelProvider<Request> & { calls: typeof calls; next: (answer: () => unknown) => void } = {
    name,
    calls,
    next: (answer) => script.push(answer),
    async send(req, ctx) {
      calls.push({ kind: 'send', to: req.to, resumed: ctx.resumed });
      const answer = script.shift();
      const value = answer ? answer() : { providerMessageId: `${name}-${req.to}` };
      if (value instanceof Error) throw value;
      return value as { providerMessageId: string };
    },
  };
  if (options.lookup) {
    const look = options.lookup;
    p.lookup = async (req, ctx) => {
      calls.push({ kind: 'lookup', to: req.to, resumed: ctx.resumed });
      const found = look(req);
      if (found instanceof Error) throw found;
      return found;
    };
  }
  return p;
}

const fresh = { idempotencyKey: 'step-1', resumed: false, maybeWith: [] as string[] };
const timeout = () => new RetryableSendError('provider_timeout', 'no answer', { maybeDelivered: true });
const authFailed = () => new RetryableSendError('provider_auth_failed', 'wrong password');

describe('ProviderChain: providers in order, with failover', () => {
  it('moves a step on to the next provider when the first refuses our account (authentication, no money), and names the provider that took it', async () => {
    const first = provider('first');
    const second = provider('second');
    first.next(authFailed);
    const chain = new ProviderChain<Request>('TEST_AUTH', [first, second]);
    await expect(chain.send({ to: '1' }, fresh)).resolves.toEqual({ providerMessageId: 'second-1', provider: 'second' });
    first.next(() => new RetryableSendError('provider_account_balance', 'no money'));
    await expect(chain.send({ to: '2' }, fresh)).resolves.toEqual({ providerMessageId: 'second-2', provider: 'second' });
    expect(first.calls.map((c) => c.to)).toEqual(['1', '2']);
    const failovers = await metricsRegistry.getSingleMetric('sender_provider_failovers_total')!.get();
    expect(failovers.values.filter((v) => v.labels.channel === 'TEST_AUTH').map((v) => [v.labels.reason, v.value])).toEqual([['provider_auth_failed', 1], ['provider_account_balance', 1]]);
  });

  it('after no answer in time, fails over only once the first provider says it has no such message', async () => {
    const first = provider('first', { lookup: () => ({ found: false }) });
    const second = provider('second');
    first.next(timeout);
    const chain = new ProviderChain<Request>('TEST_TIMEOUT', [first, second]);
    await expect(chain.send({ to: '1' }, fresh)).resolves.toMatchObject({ provider: 'second' });
    expect(first.calls).toEqual([{ kind: 'send', to: '1', resumed: false }, { kind: 'lookup', to: '1', resumed: true }]);
  });

  it('after no answer in time, reports the message sent when the first provider has it, and never calls the next', async () => {
    const first = provider('first', { lookup: () => ({ found: true, providerMessageId: 'first-late' }) });
    const second = provider('second');
    first.next(() => new RetryableSendError('provider_unavailable', 'HTTP 502', { maybeDelivered: true }));
    const chain = new ProviderChain<Request>('TEST_FOUND', [first, second]);
    await expect(chain.send({ to: '1' }, fresh)).resolves.toEqual({ providerMessageId: 'first-late', provider: 'first' });
    expect(second.calls).toEqual([]);
  });

  it('keeps the step with a provider that may have the message and cannot say (no lookup, or the lookup fails)', async () => {
    const noLookup = provider('nolookup');
    const second = provider('second');
    noLookup.next(timeout);
    const chain = new ProviderChain<Request>('TEST_PIN', [noLookup, second]);
    const err = await chain.send({ to: '1' }, fresh).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'RetryableSendError', reason: 'provider_timeout', maybeDelivered: true, provider: 'nolookup' });

    const lookupDown = provider('lookupdown', { lookup: () => new Error('status method down') });
    lookupDown.next(timeout);
    const chain2 = new ProviderChain<Request>('TEST_PIN2', [lookupDown, second]);
    await expect(chain2.send({ to: '2' }, fresh)).rejects.toMatchObject({ maybeDelivered: true, provider: 'lookupdown' });
    expect(second.calls).toEqual([]);
  });

  it('a resumed step named in the send log asks that provider first: found → sent, no send at all', async () => {
    const first = provider('first');
    const second = provider('second', { lookup: () => ({ found: true, providerMessageId: 'second-earlier' }) });
    const chain = new ProviderChain<Request>('TEST_RESUME', [first, second]);
    await expect(chain.send({ to: '1' }, { idempotencyKey: 's', resumed: true, maybeWith: ['second'] })).resolves.toEqual({ providerMessageId: 'second-earlier', provider: 'second' });
    expect(first.calls).toEqual([]);
    expect(second.calls.map((c) => c.kind)).toEqual(['lookup']);
  });

  it('a resumed step named in the send log with a provider without lookup is resent through that provider alone, as resumed', async () => {
    const first = provider('first');
    const second = provider('second');
    const chain = new ProviderChain<Request>('TEST_RESUME_PIN', [first, second]);
    await expect(chain.send({ to: '1' }, { idempotencyKey: 's', resumed: true, maybeWith: ['second'] })).resolves.toEqual({ providerMessageId: 'second-1', provider: 'second' });
    expect(first.calls).toEqual([]);
    expect(second.calls).toEqual([{ kind: 'send', to: '1', resumed: true }]);
  });

  it('a resumed step whose holder died mid-call asks every provider with a lookup, then sends in order as resumed', async () => {
    const first = provider('first', { lookup: () => ({ found: false }) });
    const second = provider('second', { lookup: () => ({ found: false }) });
    const chain = new ProviderChain<Request>('TEST_RESUME_UNKNOWN', [first, second]);
    await expect(chain.send({ to: '1' }, { idempotencyKey: 's', resumed: true, maybeWith: [] })).resolves.toMatchObject({ provider: 'first' });
    expect(first.calls.map((c) => c.kind)).toEqual(['lookup', 'send']);
    expect(second.calls.map((c) => c.kind)).toEqual(['lookup']);
  });

  it('a provider whose lookup is unsupported counts as one without a lookup: a resumed step of unknown holder is sent in order as before', async () => {
    const first = provider('first', { lookup: () => ({ found: 'unsupported' }) });
    const second = provider('second');
    const chain = new ProviderChain<Request>('TEST_UNSUPPORTED', [first, second]);
    await expect(chain.send({ to: '1' }, { idempotencyKey: 's', resumed: true, maybeWith: [] })).resolves.toMatchObject({ provider: 'first' });
    expect(first.calls).toEqual([{ kind: 'lookup', to: '1', resumed: true }, { kind: 'send', to: '1', resumed: true }]);
    first.next(timeout);
    await expect(chain.send({ to: '2' }, fresh)).rejects.toMatchObject({ maybeDelivered: true, provider: 'first' });
    expect(second.calls).toEqual([]);
  });

  it('a refusal of the message (a bad number) ends the step: no failover', async () => {
    const first = provider('first');
    const second = provider('second');
    first.next(() => new PermanentSendError('invalid_phone', 'bad number'));
    const chain = new ProviderChain<Request>('TEST_PERMANENT', [first, second]);
    await expect(chain.send({ to: '1' }, fresh)).rejects.toMatchObject({ name: 'PermanentSendError', reason: 'invalid_phone' });
    expect(second.calls).toEqual([]);
  });

  it('a rate limit is not a provider fault: retried later on the same order, nothing sent elsewhere', async () => {
    const first = provider('first');
    const second = provider('second');
    first.next(() => new RetryableSendError('provider_rate_limited', '429', { retryAfterMs: 2_000 }));
    const chain = new ProviderChain<Request>('TEST_429', [first, second]);
    await expect(chain.send({ to: '1' }, fresh)).rejects.toMatchObject({ reason: 'provider_rate_limited', retryAfterMs: 2_000, maybeDelivered: false });
    expect(second.calls).toEqual([]);
    expect(chain.circuit('first')).toBe('closed');
  });

  it('opens a provider circuit after the threshold, skips it while open, tries once when half-open; all open → providers_unavailable with the wait', async () => {
    let now = 1_000_000;
    const first = provider('first');
    const second = provider('second');
    const chain = new ProviderChain<Request>('TEST_CIRCUIT', [first, second], { failureThreshold: 2, openMs: 10_000, now: () => now });
    first.next(authFailed);
    first.next(authFailed);
    await chain.send({ to: '1' }, fresh);
    expect(chain.circuit('first')).toBe('closed');
    await chain.send({ to: '2' }, fresh);
    expect(chain.circuit('first')).toBe('open');
    await expect(chain.send({ to: '3' }, fresh)).resolves.toMatchObject({ provider: 'second' });
    expect(first.calls.map((c) => c.to)).toEqual(['1', '2']);
    const gauge = await metricsRegistry.getSingleMetric('sender_provider_circuit_state')!.get();
    expect(gauge.values.find((v) => v.labels.channel === 'TEST_CIRCUIT' && v.labels.provider === 'first')?.value).toBe(1);

    now += 10_000;
    expect(chain.circuit('first')).toBe('half_open');
    await expect(chain.send({ to: '4' }, fresh)).resolves.toMatchObject({ provider: 'first' });
    expect(chain.circuit('first')).toBe('closed');

    // Both down: the step waits for the first circuit to half-open.
    const allDown = new ProviderChain<Request>('TEST_CIRCUIT_ALL', [provider('a'), provider('b')], { failureThreshold: 1, openMs: 10_000, now: () => now });
    (allDown.providers[0] as ReturnType<typeof provider>).next(authFailed);
    (allDown.providers[1] as ReturnType<typeof provider>).next(authFailed);
    await expect(allDown.send({ to: '5' }, fresh)).rejects.toMatchObject({ reason: 'providers_unavailable', maybeDelivered: false });
    now += 4_000;
    await expect(allDown.send({ to: '6' }, fresh)).rejects.toMatchObject({ reason: 'providers_unavailable', retryAfterMs: 6_000 });
  });

  it('a half-open circuit lets one trial call through at a time; its fault opens the circuit again', () => {
    let now = 0;
    const breaker = new CircuitBreaker({ failureThreshold: 1, openMs: 100, now: () => now });
    breaker.fault();
    expect(breaker.tryAcquire()).toBe(false);
    now = 100;
    expect(breaker.tryAcquire()).toBe(true);
    expect(breaker.tryAcquire()).toBe(false);
    breaker.fault();
    expect(breaker.state).toBe('open');
    expect(breaker.retryInMs()).toBe(100);
  });

  it('a channel with one provider keeps that provider\'s own failure reason and wait', async () => {
    const only = provider('only');
    only.next(authFailed);
    const chain = new ProviderChain<Request>('TEST_ONE', [only], { failureThreshold: 5 });
    await expect(chain.send({ to: '1' }, fresh)).rejects.toMatchObject({ reason: 'provider_auth_failed', maybeDelivered: false });
  });

  it('refuses a provider listed twice', () => {
    expect(() => new ProviderChain<Request>('TEST_TWICE', [provider('x'), provider('x')])).toThrow(/twice/);
  });
});

describe('send log: the providers that may have a message', () => {
  let db: TestDatabase;
  let pool: Pool;
  let sendLog: SendLog;
  const ctx = testContext('providers-sendlog');

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: 'providers_test', max: 2 });
    sendLog = (await openSendLog({ databaseUrl: db.url, schema: 'providers_test', pool }, ctx)).log;
  });
  afterAll(async () => {
    await ctx.stop();
    await pool.end();
    await db.drop();
  });

  it('keeps the provider of a maybe-delivered failure for the next claim; a sure refusal clears it; the outcome keeps who sent it', async () => {
    const step = dueStep('SMS');
    expect(await sendLog.claim(step, 30_000)).toEqual({ kind: 'send', resumed: false, maybeWith: [] });
    await sendLog.release(step.stepId, { maybeDelivered: true, provider: 'smsru' });
    expect(await sendLog.claim(step, 30_000)).toEqual({ kind: 'send', resumed: true, maybeWith: ['smsru'] });
    await sendLog.release(step.stepId, { maybeDelivered: true, provider: 'smsru' });
    expect(await sendLog.claim(step, 30_000)).toEqual({ kind: 'send', resumed: true, maybeWith: ['smsru'] });
    await sendLog.release(step.stepId, { maybeDelivered: false });
    expect(await sendLog.claim(step, 30_000)).toEqual({ kind: 'send', resumed: false, maybeWith: [] });
    await sendLog.complete(step.stepId, { outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, providerMessageId: 'm-1', parts: 1, provider: 'smsc' });
    expect(await sendLog.claim(step, 30_000)).toMatchObject({ kind: 'done', result: { provider: 'smsc', providerMessageId: 'm-1' } });
    expect(await sendLog.findByProviderMessageId('m-1')).toMatchObject({ result: { provider: 'smsc' } });
  });
});
