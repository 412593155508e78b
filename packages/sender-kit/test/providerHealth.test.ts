import { busV1 } from '@rrs/proto';
import { createTestBus, testContext, waitFor, type TestBus } from '@rrs/testkit';
import { announceChannels, openChannelsBucket, ProviderChain, RetryableSendError, type ChannelProvider, type ProviderHealthSource } from '../src';

const entry = { key: 'SMS', slug: 'sms', label: 'SMS', contactField: 'phone', capabilities: ['send'], sender: 'test', position: 20 };
const call = (stepId: string) => ({ idempotencyKey: stepId, resumed: false, maybeWith: [] as string[] });

/** A provider that refuses every call with a provider fault while `down`. */
function switchable(name: string): ChannelProvider<string> & { down: boolean } {
  const provider = {
    name,
    down: false,
    async send(request: string) {
      if (provider.down) throw new RetryableSendError('provider_unavailable', `${name} answered 503`);
      return { providerMessageId: `${name}-${request}` };
    },
  };
  return provider;
}

describe('provider health in the channel catalog (NATS KV)', () => {
  let tb: TestBus;
  const ctx = testContext('provider-health-test');
  const ttlMs = 30_000;

  beforeAll(async () => {
    tb = await createTestBus('jetstream');
  });
  afterAll(async () => {
    await ctx.stop();
    await tb.cleanup();
  });

  const announced = async () => {
    const kv = await openChannelsBucket(tb.bus, ttlMs);
    const stored = await kv.get('SMS');
    return stored ? busV1.ChannelCatalogEntry.decode(stored.value) : undefined;
  };

  it('puts the entry again when a breaker opens and when it closes, naming the last fault', async () => {
    const primary = switchable('smsc');
    const backup = switchable('smsru');
    const openMs = 500;
    const chain = new ProviderChain<string>('SMS', [primary, backup], { failureThreshold: 2, openMs });
    // The periodic refresh (a third of the TTL) comes long after this test: only breaker changes put.
    const announcement = await announceChannels({ bus: tb.bus, entries: [entry], logger: ctx.logger, ttlMs, health: new Map([['SMS', chain]]), replica: 'pod-a:1', healthPutIntervalMs: 100 });
    try {
      const first = await announced();
      expect(first?.providers.map((p) => [p.name, p.state, p.replica, p.lastFailureCode])).toEqual([
        ['smsc', 'closed', 'pod-a:1', undefined],
        ['smsru', 'closed', 'pod-a:1', undefined],
      ]);

      primary.down = true;
      await expect(chain.send('step-1', call('step-1'))).resolves.toEqual({ providerMessageId: 'smsru-step-1', provider: 'smsru' });
      await expect(chain.send('step-2', call('step-2'))).resolves.toEqual({ providerMessageId: 'smsru-step-2', provider: 'smsru' });
      const opened = await waitFor(async () => {
        const current = await announced();
        return current?.providers[0].state === 'open' ? current : undefined;
      }, { timeoutMs: 5_000, what: 'the open circuit in the catalog' });
      expect(opened.providers[0]).toMatchObject({ name: 'smsc', state: 'open', lastFailureCode: 'provider_unavailable', replica: 'pod-a:1' });
      expect(opened.providers[0].since!.getTime()).toBeGreaterThan(first!.providers[0].since!.getTime());
      expect(opened.providers[1]).toMatchObject({ name: 'smsru', state: 'closed' });

      primary.down = false;
      await new Promise((resolve) => setTimeout(resolve, openMs));
      // The trial call after the open time goes to smsc again, and its success closes the circuit.
      await expect(chain.send('step-3', call('step-3'))).resolves.toEqual({ providerMessageId: 'smsc-step-3', provider: 'smsc' });
      const closed = await waitFor(async () => {
        const current = await announced();
        return current?.providers[0].state === 'closed' ? current : undefined;
      }, { timeoutMs: 5_000, what: 'the closed circuit in the catalog' });
      // The last fault stays on record after recovery: when and why the provider last failed.
      expect(closed.providers[0]).toMatchObject({ name: 'smsc', state: 'closed', lastFailureCode: 'provider_unavailable' });
      expect(closed.providers[0].since!.getTime()).toBeGreaterThan(opened.providers[0].since!.getTime());
    } finally {
      announcement.stop();
    }
  });

  it('puts a burst of breaker changes once per interval, with the latest state', async () => {
    let state: 'closed' | 'open' = 'closed';
    const listeners = new Set<() => void>();
    const source: ProviderHealthSource = {
      health: () => [{ name: 'smtp', state, since: new Date() }],
      onHealthChange(listener) {
        listeners.add(listener);
        return () => listeners.delete(listener);
      },
    };
    const kv = await openChannelsBucket(tb.bus, ttlMs);
    const announcement = await announceChannels({ bus: tb.bus, entries: [{ ...entry, key: 'EMAIL', slug: 'email' }], logger: ctx.logger, ttlMs, health: new Map([['EMAIL', source]]), healthPutIntervalMs: 1_000 });
    const puts: busV1.ChannelCatalogEntry[] = [];
    const burstAt = Date.now();
    const unwatch = await kv.watch((key, stored) => {
      if (key !== 'EMAIL' || !stored) return;
      const decoded = busV1.ChannelCatalogEntry.decode(stored.value);
      if (decoded.announcedAt!.getTime() >= burstAt) puts.push(decoded);
    });
    try {
      for (let change = 0; change < 20; change++) {
        state = state === 'closed' ? 'open' : 'closed';
        for (const listener of listeners) listener();
      }
      state = 'open';
      for (const listener of listeners) listener();
      await waitFor(() => puts.length > 0, { timeoutMs: 5_000, what: 'the put after the burst' });
      // Well past the interval, nothing else was put: the burst joined one put.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(puts.map((p) => p.providers[0].state)).toEqual(['open']);
    } finally {
      unwatch();
      announcement.stop();
    }
  });

  it('refuses health for a channel the sender does not announce', async () => {
    const chain = new ProviderChain<string>('SMS', [switchable('smsc')]);
    await expect(announceChannels({ bus: tb.bus, entries: [entry], logger: ctx.logger, ttlMs, health: new Map([['EMAIL', chain]]) })).rejects.toThrow(/does not announce/);
  });
});
