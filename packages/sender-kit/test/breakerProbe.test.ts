import { registry as metricsRegistry } from '@rrs/runtime';
import { PermanentSendError, ProviderChain, RetryableSendError, type ChannelProvider, type ProviderCallContext, type ProviderLookup } from '../src';

/**
 * Issue 34, item 3: a failing provider costs at most a handful of calls whatever the concurrency, and a
 * hang costs at most one timeout before the rest fail over. Measured as the issue asks: 60 steps in flight.
 */

interface Request {
  to: string;
}

const IN_FLIGHT = 60;
/** The provider timeout of these tests (ms): what a hung provider costs a call. */
// Long enough that a loaded CI machine's scheduling delays (hundreds of ms) stay well inside the margin
// below, which is still shorter than a second timeout: a step that waited for two would fail.
const TIMEOUT_MS = 1_500;
const MARGIN_MS = 1_000;

/** A provider whose every call answers `answer` after `delayMs` (an answer, a refusal of our account, a hang). */
function scripted(name: string, behaviour: { send: () => Promise<{ providerMessageId: string }>; lookup?: () => Promise<ProviderLookup> }) {
  const calls = { send: 0, lookup: 0 };
  const provider: ChannelProvider<Request> & { calls: typeof calls } = {
    name,
    calls,
    async send(_req: Request, _ctx: ProviderCallContext) {
      calls.send++;
      return behaviour.send();
    },
  };
  if (behaviour.lookup) {
    const look = behaviour.lookup;
    provider.lookup = async () => {
      calls.lookup++;
      return look();
    };
  }
  return provider;
}

const after = <T>(ms: number, value: () => T): Promise<T> => new Promise((resolve, reject) => setTimeout(() => {
  try {
    resolve(value());
  } catch (err) {
    reject(err);
  }
}, ms));

const ok = (name: string) => scripted(name, { send: () => after(2, () => ({ providerMessageId: `${name}-id` })) });
/** Connection refused: nothing reached the provider (not maybe delivered), a provider fault. */
const refusing = (name: string) => scripted(name, { send: () => after(2, () => { throw new RetryableSendError('provider_unreachable', 'connect ECONNREFUSED'); }) });
/** Accepts the request and never answers: every call ends at the timeout, maybe delivered; its lookup hangs too. */
const hanging = (name: string) => scripted(name, {
  send: () => after(TIMEOUT_MS, () => { throw new RetryableSendError('provider_timeout', `no answer within ${TIMEOUT_MS} ms`, { maybeDelivered: true }); }),
  lookup: () => after(TIMEOUT_MS, () => { throw new RetryableSendError('provider_timeout', `status: no answer within ${TIMEOUT_MS} ms`, { maybeDelivered: true }); }),
});

async function burst(chain: ProviderChain<Request>, count: number, prefix: string) {
  const started = Date.now();
  return Promise.all(Array.from({ length: count }, (_, i) => chain.send({ to: `${prefix}${i}` }, { idempotencyKey: `${prefix}${i}`, resumed: false, maybeWith: [] }).then(
    (sent) => ({ sent, err: undefined, ms: Date.now() - started }),
    (err: unknown) => ({ sent: undefined, err, ms: Date.now() - started }),
  )));
}

describe('the breaker bounds the damage of a failing provider under concurrency', () => {
  it('60 steps in flight to a provider refusing connections: at most 10 calls reach it, every step goes out through the next provider', async () => {
    const first = refusing('first');
    const second = ok('second');
    const chain = new ProviderChain<Request>('TEST_PROBE_REFUSED', [first, second]);
    const results = await burst(chain, IN_FLIGHT, 'r');
    expect(results.filter((r) => r.sent?.provider === 'second')).toHaveLength(IN_FLIGHT);
    expect(first.calls.send).toBeLessThanOrEqual(10);
    expect(first.calls.send).toBeGreaterThanOrEqual(1);
    // A second burst: the same bound again (the circuit opens after its threshold of faults in a row).
    const again = await burst(chain, IN_FLIGHT, 'r2-');
    expect(again.every((r) => r.sent?.provider === 'second')).toBe(true);
    expect(first.calls.send).toBeLessThanOrEqual(10);
    const skipped = await metricsRegistry.getSingleMetric('sender_provider_failovers_total')!.get();
    const reasons = skipped.values.filter((v) => v.labels.channel === 'TEST_PROBE_REFUSED').map((v) => v.labels.reason);
    expect(reasons).toContain('probe_failed');
  });

  it('a provider that answered a moment ago takes a burst at once; one that fails after a quiet spell gets one probe, not the burst', async () => {
    let failing = false;
    let now = 1_000_000;
    const calls = { send: 0 };
    const first: ChannelProvider<Request> = {
      name: 'first',
      async send() {
        calls.send++;
        await after(2, () => undefined);
        if (failing) throw new RetryableSendError('provider_unavailable', 'HTTP 503');
        return { providerMessageId: 'first-id' };
      },
    };
    const second = ok('second');
    const chain = new ProviderChain<Request>('TEST_PROBE_QUIET', [first, second], { now: () => now });
    const warm = await burst(chain, 10, 'w');
    expect(warm.every((r) => r.sent?.provider === 'first')).toBe(true);
    const callsWarm = calls.send;
    const proven = await burst(chain, IN_FLIGHT, 'p');
    expect(proven.every((r) => r.sent?.provider === 'first')).toBe(true);
    expect(calls.send - callsWarm).toBe(IN_FLIGHT);
    // A quiet minute, then the provider fails: the next burst meets it through one probe at a time.
    now += 60_000;
    failing = true;
    const before = calls.send;
    const burstAfter = await burst(chain, IN_FLIGHT, 'q');
    expect(burstAfter.every((r) => r.sent?.provider === 'second')).toBe(true);
    expect(calls.send - before).toBeLessThanOrEqual(10);
  });

  it('a hung provider costs a step at most one timeout: with 60 in flight every step that never reached it is sent through the next within one timeout (+ margin); the one that did stays in doubt', async () => {
    const first = hanging('first');
    const second = ok('second');
    const chain = new ProviderChain<Request>('TEST_PROBE_HANG', [first, second]);
    const results = await burst(chain, IN_FLIGHT, 'h');
    const moved = results.filter((r) => r.sent?.provider === 'second');
    const inDoubt = results.filter((r) => r.err);
    // Only a call that reached the provider can be in doubt: it stays with it (no lookup answer), never sent elsewhere.
    expect(inDoubt.length).toBe(first.calls.send);
    expect(first.calls.send).toBeLessThanOrEqual(10);
    for (const r of inDoubt) {
      expect(r.err).toBeInstanceOf(RetryableSendError);
      expect((r.err as RetryableSendError).maybeDelivered).toBe(true);
      expect((r.err as RetryableSendError).provider).toBe('first');
    }
    expect(moved.length).toBe(IN_FLIGHT - inDoubt.length);
    // "Within one timeout + 5 s" at the production timeout; here the timeout is TIMEOUT_MS and the margin MARGIN_MS.
    expect(Math.max(...moved.map((r) => r.ms))).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
  });

  it('a refusal of the message or a 429 proves the provider up: the steps waiting for that probe call it', async () => {
    let calls = 0;
    const first: ChannelProvider<Request> = {
      name: 'first',
      async send(req) {
        calls++;
        await after(2, () => undefined);
        if (req.to === 'bad0') throw new PermanentSendError('invalid_phone', 'bad number');
        return { providerMessageId: `first-${req.to}` };
      },
    };
    const chain = new ProviderChain<Request>('TEST_PROBE_REFUSAL', [first, ok('second')]);
    const results = await burst(chain, 20, 'bad');
    expect(results.filter((r) => r.err instanceof PermanentSendError)).toHaveLength(1);
    expect(results.filter((r) => r.sent?.provider === 'first')).toHaveLength(19);
    expect(calls).toBe(20);
    expect(chain.circuit('first')).toBe('closed');
  });
});
