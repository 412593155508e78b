import { createTestDatabase, type TestDatabase } from '@rrs/testkit';
import { createPool, LaneBatcher, queryTogether, type Pool, type PoolClient } from '../src';

/** Group commit across kinds of writes: what waits in every lane goes in one request, all or nothing. */
describe('LaneBatcher and queryTogether (real PostgreSQL)', () => {
  let db: TestDatabase;
  let pool: Pool;
  let requests = 0;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: 'public', max: 2 });
    // Counts the requests every client of the pool sends.
    pool.on('connect', (client: PoolClient) => {
      const original = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: unknown }).query = (...args: unknown[]) => {
        requests++;
        return original(...args);
      };
    });
    await pool.query('CREATE TABLE claims (id text PRIMARY KEY)');
    await pool.query('CREATE TABLE outcomes (id text PRIMARY KEY, outcome text NOT NULL)');
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  const lanes = (outcomeOptions: { lingerMs?: number; lingerWhile?: () => boolean } = {}) => {
    const batches = new LaneBatcher(pool);
    const outcome = batches.lane<{ id: string; outcome: string | null }, void>({
      key: (item) => item.id,
      statement: (items) => ({ text: 'INSERT INTO outcomes (id, outcome) SELECT * FROM unnest($1::text[], $2::text[])', values: [items.map((i) => i.id), items.map((i) => i.outcome)] }),
      answers: (_result, items) => items.map(() => undefined),
    }, outcomeOptions);
    const claim = batches.lane<string, boolean>({
      key: (id) => id,
      statement: (ids) => ({ text: 'INSERT INTO claims (id) SELECT unnest($1::text[]) ON CONFLICT DO NOTHING RETURNING id', values: [ids] }),
      answers: (result, ids) => {
        const claimed = new Set((result.rows as Array<{ id: string }>).map((row) => row.id));
        return ids.map((id) => claimed.has(id));
      },
    });
    return { outcome, claim };
  };

  it('writes what waits in both lanes with one request, and answers each item from its own statement', async () => {
    const { outcome, claim } = lanes();
    await pool.query("INSERT INTO claims VALUES ('taken')");
    requests = 0;
    const answers = await Promise.all([claim('a'), claim('taken'), outcome({ id: 'x', outcome: 'sent' }), claim('b'), outcome({ id: 'y', outcome: "it's" })]);
    expect(answers).toEqual([true, false, undefined, true, undefined]);
    expect(requests).toBe(1);
    expect((await pool.query('SELECT id, outcome FROM outcomes ORDER BY id')).rows).toEqual([{ id: 'x', outcome: 'sent' }, { id: 'y', outcome: "it's" }]);
  });

  it('fails every item of a request when one statement fails, and writes none of them', async () => {
    const { outcome, claim } = lanes();
    const results = await Promise.allSettled([claim('c'), outcome({ id: 'z', outcome: null })]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect((await pool.query("SELECT count(*)::int AS n FROM claims WHERE id = 'c'")).rows[0].n).toBe(0);
    // The next request goes on as usual.
    expect(await claim('c')).toBe(true);
  });

  describe('a lingering lane', () => {
    const settled = (promise: Promise<unknown>) => {
      const state = { done: false };
      void promise.then(() => (state.done = true), () => (state.done = true));
      return state;
    };
    const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

    it('waits while more of its items are on their way, then rides with the next request another lane starts', async () => {
      let onTheirWay = true;
      const { outcome, claim } = lanes({ lingerMs: 5_000, lingerWhile: () => onTheirWay });
      requests = 0;
      const first = settled(outcome({ id: 'l1', outcome: 'sent' }));
      const second = settled(outcome({ id: 'l2', outcome: 'sent' }));
      await tick(50);
      expect([first.done, second.done, requests]).toEqual([false, false, 0]);
      expect(await claim('l-claim')).toBe(true);
      await tick(0);
      expect([first.done, second.done, requests]).toEqual([true, true, 1]);
      onTheirWay = false;
      expect((await pool.query("SELECT id FROM outcomes WHERE id LIKE 'l_' ORDER BY id")).rows).toEqual([{ id: 'l1' }, { id: 'l2' }]);
    });

    it('goes at once when nothing more is on its way, and on its own when the time is up', async () => {
      let onTheirWay = false;
      const { outcome } = lanes({ lingerMs: 100, lingerWhile: () => onTheirWay });
      requests = 0;
      await outcome({ id: 'm1', outcome: 'sent' });
      expect(requests).toBe(1);
      onTheirWay = true;
      const started = Date.now();
      await Promise.all([outcome({ id: 'm2', outcome: 'sent' }), outcome({ id: 'm3', outcome: 'sent' })]);
      expect(Date.now() - started).toBeGreaterThanOrEqual(95);
      expect(requests).toBe(2);
    });

    it('goes when the last item on its way joins it, without waiting out the time', async () => {
      let onTheirWay = 2;
      const { outcome } = lanes({ lingerMs: 5_000, lingerWhile: () => onTheirWay > 0 });
      requests = 0;
      onTheirWay--;
      const first = settled(outcome({ id: 'n1', outcome: 'sent' }));
      await tick(50);
      expect(first.done).toBe(false);
      onTheirWay--;
      await outcome({ id: 'n2', outcome: 'sent' });
      await tick(0);
      expect([first.done, requests]).toEqual([true, 1]);
    });
  });

  it('queryTogether answers each statement, in its row mode', async () => {
    const [a, b] = await queryTogether(pool, [
      { text: 'SELECT $1::int AS n', values: [1] },
      { text: 'SELECT $1::text AS t, $2::int AS n', values: ['two', 2], rowMode: 'array' },
    ]);
    expect(a.rows).toEqual([{ n: 1 }]);
    expect(b.rows).toEqual([['two', 2]]);
  });
});
