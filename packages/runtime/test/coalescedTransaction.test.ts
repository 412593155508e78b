import { createTestDatabase, testLogger, type TestDatabase } from '@rrs/testkit';
import { createPool, execute, inCoalescedTransaction, inlineParameters, queryEach, readAfterCommit, sqlArray, type Pool, type PoolClient } from '../src';

/** Counts the requests a client sends (a simple Query or an extended-protocol query is one each). */
function countRequests(client: PoolClient): { count: () => number } {
  let n = 0;
  const original = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { query: unknown }).query = (...args: unknown[]) => {
    n++;
    return original(...args);
  };
  return { count: () => n };
}

describe('inCoalescedTransaction (real PostgreSQL)', () => {
  let db: TestDatabase;
  let pool: Pool;
  let admin: Pool;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: 'public', max: 1, logger: testLogger() });
    admin = createPool({ url: db.url, schema: 'public', max: 1 });
    await admin.query('CREATE TABLE things (id int PRIMARY KEY, label text, at timestamptz, data bytea, tags text[])');
  });
  afterAll(async () => {
    await pool.end();
    await admin.end();
    await db.drop();
  });

  const count = async (where: string) => (await admin.query(`SELECT count(*)::int AS n FROM things WHERE ${where}`)).rows[0].n as number;

  it('sends BEGIN with the first read, writes with COMMIT, in order, and commits', async () => {
    const seen = await inCoalescedTransaction(pool, async (client) => {
      await execute(client, { text: 'INSERT INTO things (id, label) VALUES ($1, $2)', values: [1, 'one'] });
      // The read sees the write that waited in front of it.
      const [a, b] = await queryEach(client, [
        { text: 'SELECT label FROM things WHERE id = $1', values: [1] },
        { text: 'SELECT id, label FROM things WHERE id = ANY($1::int[])', values: [sqlArray([1, 2])], rowMode: 'array' },
      ]);
      await execute(client, { text: 'UPDATE things SET label = $2 WHERE id = $1', values: [1, 'uno'] });
      await execute(client, { text: 'INSERT INTO things (id, label) VALUES ($1, $2)', values: [2, 'two'] });
      return { a: a.rows, b: b.rows };
    });
    expect(seen).toEqual({ a: [{ label: 'one' }], b: [[1, 'one']] });
    expect(await count(`id = 1 AND label = 'uno'`)).toBe(1);
    expect(await count('id = 2')).toBe(1);
  });

  it('is two requests for a read and any number of writes', async () => {
    const client = await pool.connect();
    const requests = countRequests(client);
    client.release();
    await inCoalescedTransaction(pool, async (tx) => {
      await tx.query('SELECT 1');
      for (let id = 10; id < 15; id++) await execute(tx, { text: 'INSERT INTO things (id) VALUES ($1)', values: [id] });
    });
    expect(requests.count()).toBe(2);
    expect(await count('id BETWEEN 10 AND 14')).toBe(5);
  });

  it('writes values as the driver would: quotes, backslashes, dates, bytes, nulls, arrays', async () => {
    const at = new Date('2026-01-02T03:04:05.678Z');
    const label = `it's a \\ test "quoted" $1 ;`;
    await inCoalescedTransaction(pool, async (client) => {
      await client.query('SELECT 1');
      await execute(client, { text: 'INSERT INTO things (id, label, at, data, tags) VALUES ($1, $2, $3, $4, $5::text[])', values: [20, label, at, Buffer.from([0, 1, 254, 255]), sqlArray(['a b', 'c"d', null])] });
      await execute(client, { text: 'INSERT INTO things (id, label) VALUES ($1, $2)', values: [21, null] });
    });
    const { rows } = await admin.query('SELECT id, label, at, data, tags FROM things WHERE id IN (20, 21) ORDER BY id');
    expect(rows[0]).toEqual({ id: 20, label, at, data: Buffer.from([0, 1, 254, 255]), tags: ['a b', 'c"d', null] });
    expect(rows[1].label).toBeNull();
  });

  it('rolls back everything when a waiting write fails, with that write’s error', async () => {
    await expect(
      inCoalescedTransaction(pool, async (client) => {
        await client.query('SELECT 1');
        await execute(client, { text: 'INSERT INTO things (id) VALUES ($1)', values: [30] });
        await execute(client, { text: 'INSERT INTO things (id) VALUES ($1)', values: [30] });
      }),
    ).rejects.toThrow(/duplicate key/);
    expect(await count('id = 30')).toBe(0);
    // The connection is usable again (rolled back, not left in a failed transaction).
    expect((await pool.query('SELECT 1 AS one')).rows[0].one).toBe(1);
  });

  it('rolls back when the function throws after its first request', async () => {
    await expect(
      inCoalescedTransaction(pool, async (client) => {
        await queryEach(client, [{ text: 'INSERT INTO things (id) VALUES ($1) RETURNING id', values: [40] }]);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect(await count('id = 40')).toBe(0);
  });

  it('sends nothing when the function sent nothing', async () => {
    const client = await pool.connect();
    const requests = countRequests(client);
    client.release();
    expect(await inCoalescedTransaction(pool, async () => 'nothing')).toBe('nothing');
    expect(requests.count()).toBe(0);
  });

  it('a read after COMMIT travels in its request and sees what the transaction wrote; after a rollback it did not run', async () => {
    const client = await pool.connect();
    const requests = countRequests(client);
    client.release();
    let after!: ReturnType<typeof readAfterCommit>;
    await inCoalescedTransaction(pool, async (tx) => {
      await tx.query('SELECT 1');
      await execute(tx, { text: 'INSERT INTO things (id, label) VALUES ($1, $2)', values: [60, 'sixty'] });
      after = readAfterCommit(tx, { text: 'SELECT label, (SELECT count(*)::int FROM pg_stat_activity WHERE pid = pg_backend_pid() AND xact_start IS NOT NULL) AS open FROM things WHERE id = $1', values: [60] });
    });
    const read = await after;
    // BEGIN with the read; the write, COMMIT and the read after it.
    expect(requests.count()).toBe(2);
    expect(read?.result.rows).toEqual([{ label: 'sixty', open: 1 }]);
    expect(read?.sentAt).toBeLessThanOrEqual(Date.now());

    let rolledBack!: ReturnType<typeof readAfterCommit>;
    await expect(inCoalescedTransaction(pool, async (tx) => {
      await tx.query('SELECT 1');
      rolledBack = readAfterCommit(tx, { text: 'SELECT 1 AS one' });
      throw new Error('changed my mind');
    })).rejects.toThrow('changed my mind');
    expect(await rolledBack).toBeNull();
    // Outside a coalesced transaction there is no COMMIT to travel with.
    const plain = await pool.connect();
    try {
      expect(await readAfterCommit(plain, { text: 'SELECT 1' })).toBeNull();
    } finally {
      plain.release();
    }
  });

  it('a prepared statement is parsed once per connection and run by name after; a request that failed has it prepared again under a new name', async () => {
    const read = (id: number) => ({ text: 'SELECT label FROM things WHERE id = ANY($1::int[])', values: [sqlArray([id])], prepared: true });
    const client = await pool.connect();
    const sent: string[] = [];
    const original = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: unknown }).query = (...args: unknown[]) => {
      const [config] = args as [string | { text: string }];
      sent.push(typeof config === 'string' ? config : config.text);
      return original(...args);
    };
    client.release();
    await admin.query(`INSERT INTO things (id, label) VALUES (70, 'seventy'), (71, 'seventy-one')`);
    const labels: unknown[] = [];
    for (const id of [70, 71]) {
      await inCoalescedTransaction(pool, async (tx) => {
        const [result] = await queryEach(tx, [read(id)]);
        labels.push(result.rows);
      });
    }
    expect(labels).toEqual([[{ label: 'seventy' }], [{ label: 'seventy-one' }]]);
    expect(sent[0]).toMatch(/^PREPARE rrs_\w+ AS SELECT label FROM things/);
    // The second transaction runs it by name: no text to parse, a plan PostgreSQL may keep.
    expect(sent[2]).toMatch(/^BEGIN;\s*EXECUTE rrs_\w+\('\{71\}'\)$/);
    // A request that fails after its PREPARE: the next one prepares under a new name (the failed one's stays, unused).
    await admin.query('CREATE TABLE other_things (id int)');
    const other = { text: 'SELECT count(*)::int AS n FROM other_things', prepared: true };
    await expect(inCoalescedTransaction(pool, async (tx) => {
      await queryEach(tx, [other, { text: 'SELECT 1/0' }]);
    })).rejects.toThrow(/division by zero/);
    const [{ rows }] = await inCoalescedTransaction(pool, (tx) => queryEach(tx, [other]));
    expect(rows).toEqual([{ n: 0 }]);
    const { rows: prepared } = await pool.query(`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE '%other_things%'`);
    expect(prepared[0].n).toBe(2);
  });

  it('on any other client, execute and queryEach run each statement at once', async () => {
    const client = await pool.connect();
    try {
      await execute(client, { text: 'INSERT INTO things (id) VALUES ($1)', values: [50] });
      const [r] = await queryEach(client, [{ text: 'SELECT id FROM things WHERE id = $1', values: [50] }]);
      expect(r.rows).toEqual([{ id: 50 }]);
    } finally {
      client.release();
    }
  });

  it('leaves placeholders inside quoted strings and identifiers alone', () => {
    expect(inlineParameters(`SELECT '$1', "$1", $1, 'it''s $2', $2`, ['x', 7])).toBe(`SELECT '$1', "$1", 'x', 'it''s $2', '7'`);
    expect(() => inlineParameters('SELECT $3', [1])).toThrow(/\$3/);
  });
});
