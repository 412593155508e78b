import type { KvEntry } from '../src/bus';
import { describeEachBus, dec, enc, unique, waitFor } from './busHarness';

/** The bus contract, both transports: KV buckets. */

describeEachBus(({ bus }) => {
  test('KV: put, get, entries, delete and watch', async () => {
    const bucket = unique('kv');
    const kv = await bus().kv(bucket, { ttlMs: 60_000 });
    const changes: [string, string | null][] = [];
    const stop = await kv.watch((key, entry) => changes.push([key, entry ? dec(entry.value) : null]));
    const before = Date.now();
    const r1 = await kv.put('alpha', enc('1'));
    const r2 = await kv.put('beta', enc('2'));
    const r3 = await kv.put('alpha', enc('1b'));
    expect(r2).toBeGreaterThan(r1);
    expect(r3).toBeGreaterThan(r2);
    const alpha = (await kv.get('alpha')) as KvEntry;
    expect({ ...alpha, value: dec(alpha.value) }).toEqual({ key: 'alpha', value: '1b', revision: r3, createdAt: expect.any(Number) });
    expect(alpha.createdAt).toBeGreaterThanOrEqual(before - 1_000);
    expect(alpha.createdAt).toBeLessThanOrEqual(Date.now() + 1_000);
    expect(await kv.get('missing')).toBeNull();
    await kv.delete('beta');
    expect(await kv.get('beta')).toBeNull();
    const entries = await kv.entries();
    expect(entries.map((e) => [e.key, dec(e.value), e.revision])).toEqual([['alpha', '1b', r3]]);
    const sameBucket = await bus().kv(bucket, { ttlMs: 60_000 });
    expect((await sameBucket.entries()).map((e) => e.key)).toEqual(['alpha']);
    await waitFor('watch events', () => changes.length === 4);
    expect(changes).toEqual([
      ['alpha', '1'],
      ['beta', '2'],
      ['alpha', '1b'],
      ['beta', null],
    ]);
    stop();
    const later: string[] = [];
    const stopLater = await kv.watch((key) => later.push(key));
    await kv.put('gamma', enc('3'));
    await waitFor('second watcher sees gamma', () => later.includes('gamma'));
    stopLater();
    expect(changes).toHaveLength(4);
  });

  test('KV: entries expire after the bucket TTL', async () => {
    const ttlMs = 1_000;
    const kv = await bus().kv(unique('kvttl'), { ttlMs });
    const putAt = Date.now();
    await kv.put('short', enc('lived'));
    expect(await kv.get('short')).not.toBeNull();
    expect((await kv.entries()).map((e) => e.key)).toEqual(['short']);
    await waitFor('expiry', async () => (await kv.get('short')) === null, ttlMs + 3_000);
    expect(Date.now() - putAt).toBeGreaterThanOrEqual(ttlMs - 100);
    expect(await kv.entries()).toEqual([]);
  });
});
