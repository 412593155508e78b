import { busV1 } from '@rrs/proto';
import { createTestBus, testContext, waitFor, type TestBus } from '@rrs/testkit';
import { announceChannels, openChannelsBucket, readChannelCatalog } from '../src';

const entry = (key: string, position: number) => ({ key, slug: key.toLowerCase(), label: key, contactField: 'phone', capabilities: ['send'], sender: 'test', position });

describe.each(['memory', 'jetstream'] as const)('channel registry on the %s bus', (kind) => {
  let tb: TestBus;
  const ctx = testContext('registry-test');
  const ttlMs = 1_500;

  beforeAll(async () => {
    tb = await createTestBus(kind);
  });
  afterAll(async () => {
    await ctx.stop();
    await tb.cleanup();
  });

  it('announces entries, keeps them while refreshed, and lets them expire when the sender is gone', async () => {
    const announcement = await announceChannels({ bus: tb.bus, entries: [entry('TELEGRAM', 40), entry('MAX', 30)], logger: ctx.logger, ttlMs });
    const kv = await openChannelsBucket(tb.bus, ttlMs);
    expect((await readChannelCatalog(kv, ttlMs)).map((e) => e.key)).toEqual(['MAX', 'TELEGRAM']);
    const first = await readChannelCatalog(kv, ttlMs);
    expect(first[0]).toMatchObject({ key: 'MAX', slug: 'max', contactField: 'phone', capabilities: ['send'], sender: 'test' });
    // Still there well past one TTL, because it is refreshed.
    await new Promise((r) => setTimeout(r, ttlMs * 1.5));
    expect((await readChannelCatalog(kv, ttlMs)).map((e) => e.key)).toEqual(['MAX', 'TELEGRAM']);
    announcement.stop();
    await waitFor(async () => (await readChannelCatalog(kv, ttlMs)).length === 0, { timeoutMs: ttlMs * 3, what: 'entries to expire' });
  });

  it('ignores entries older than the TTL and entries that do not decode or do not match their key', async () => {
    const kv = await openChannelsBucket(tb.bus, ttlMs);
    await kv.put('BROKEN', new Uint8Array([0xff, 0xff, 0xff]));
    await kv.put('WRONGKEY', busV1.ChannelCatalogEntry.encode(busV1.ChannelCatalogEntry.fromPartial(entry('OTHER', 1))).finish());
    await kv.put('GOOD', busV1.ChannelCatalogEntry.encode(busV1.ChannelCatalogEntry.fromPartial(entry('GOOD', 1))).finish());
    expect((await readChannelCatalog(kv, ttlMs)).map((e) => e.key)).toEqual(['GOOD']);
    expect(await readChannelCatalog(kv, ttlMs, Date.now() + ttlMs)).toEqual([]);
  });

  it('refuses bad keys and slugs', async () => {
    await expect(announceChannels({ bus: tb.bus, entries: [entry('bad key', 1)], logger: ctx.logger, ttlMs })).rejects.toThrow(/invalid channel key/);
    await expect(announceChannels({ bus: tb.bus, entries: [{ ...entry('OK', 1), slug: 'Bad/Slug' }], logger: ctx.logger, ttlMs })).rejects.toThrow(/invalid channel slug/);
    // Its steps would go to steps.result, where senders answer the scheduler.
    await expect(announceChannels({ bus: tb.bus, entries: [entry('RESULT', 1)], logger: ctx.logger, ttlMs })).rejects.toThrow(/RESULT is reserved/);
  });
});
