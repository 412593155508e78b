import { Redis } from 'ioredis';
import { TEST_REDIS_URL, uniqueName } from '@rrs/testkit';
import { createRequestPacer } from '../src/crm';
import { CrmError } from '../src/crm/types';

/** The per-account pace of CRM requests: spacing in a process, one budget across replicas through Redis. */
describe('CRM request pace', () => {
  let redis: Redis;
  beforeAll(async () => {
    redis = new Redis(TEST_REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await redis.connect();
  });
  afterAll(async () => {
    await redis.quit();
  });

  /** Starts of `n` turns taken at once through the given pacers (round robin), in ms from the first. */
  async function turns(pacers: Array<ReturnType<typeof createRequestPacer>>, n: number, perSecond: number): Promise<number[]> {
    const t0 = Date.now();
    const at = await Promise.all(Array.from({ length: n }, async (_, i) => {
      await pacers[i % pacers.length].acquire('https://shop.amocrm.ru', perSecond, 10_000);
      return Date.now() - t0;
    }));
    return at.sort((a, b) => a - b);
  }
  const maxInAnySecond = (times: number[]) => Math.max(...times.map((t, i) => times.filter((u, j) => j >= i && u - t < 1000).length));

  it('keeps the spacing after the event loop stalled: turns whose timers fired late start apart, not in a burst', async () => {
    const pacer = createRequestPacer({ keyPrefix: uniqueName('pace-stall') });
    const t0 = Date.now();
    await pacer.acquire('https://stall.amocrm.ru', 7, 10_000);
    const pending = Array.from({ length: 5 }, () => pacer.acquire('https://stall.amocrm.ru', 7, 10_000).then(() => Date.now() - t0));
    // Blocks the event loop past the next four reserved slots (about 158, 316, 474 and 632 ms).
    while (Date.now() - t0 < 700) {
      // busy: no timer can fire
    }
    const starts = [0, ...(await Promise.all(pending))].sort((a, b) => a - b);
    const gaps = starts.slice(1).map((at, i) => at - starts[i]);
    // The pacer keeps 158 ms between real starts; the test sees each start a little later (the budget's
    // promise, then this callback), by a jitter that a loaded CI machine stretches to ~10 ms. A burst
    // puts the late turns within a millisecond of each other, so two thirds of the spacing tells them apart.
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(105);
  });

  it('in one process, turns of an account start apart: never more than the limit in any second', async () => {
    const times = await turns([createRequestPacer({ keyPrefix: uniqueName('pace') })], 15, 7);
    expect(maxInAnySecond(times)).toBeLessThanOrEqual(7);
    expect(times[14]).toBeGreaterThanOrEqual(14 * 150);
  });

  it('two replicas sharing Redis draw from one budget of 7 a second', async () => {
    const keyPrefix = uniqueName('pace');
    const shared = [createRequestPacer({ redis, keyPrefix }), createRequestPacer({ redis, keyPrefix })];
    const times = await turns(shared, 21, 7);
    // 21 turns at 7 a second need three one-second windows: the last starts at least 2 s after the first.
    // (Each replica alone would be done after its 10th or 11th turn, about 1.6 s.)
    expect(times[20]).toBeGreaterThanOrEqual(1_900);
  });

  it('a turn further away than the wait allowed fails rate_limited, to be retried later', async () => {
    const pacer = createRequestPacer({ keyPrefix: uniqueName('pace') });
    await Promise.all([pacer.acquire('https://p.bitrix24.ru', 2, 10_000), pacer.acquire('https://p.bitrix24.ru', 2, 10_000)]);
    await expect(pacer.acquire('https://p.bitrix24.ru', 2, 100)).rejects.toMatchObject({ kind: 'rate_limited', code: 'crm_rate_limited' });
    await expect(pacer.acquire('https://p.bitrix24.ru', 2, 100)).rejects.toBeInstanceOf(CrmError);
  });
});
