import { createTestDatabase, testLogger, type TestDatabase } from '@rrs/testkit';
import { createPool, InvalidError, inTransaction, type Pool } from '../src';

/** The one transaction helper: commit, roll back, and never hand a dead connection back to the pool. */
describe('inTransaction (real PostgreSQL)', () => {
  let db: TestDatabase;
  let pool: Pool;
  let admin: Pool;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: 'public', max: 1, logger: testLogger() });
    admin = createPool({ url: db.url, schema: 'public', max: 1 });
    await admin.query('CREATE TABLE things (id int PRIMARY KEY)');
  });
  afterAll(async () => {
    await pool.end();
    await admin.end();
    await db.drop();
  });

  const pid = async () => (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;

  it('commits what the function wrote and returns its value', async () => {
    const value = await inTransaction(pool, async (client) => {
      await client.query('INSERT INTO things VALUES (1)');
      return 'done';
    });
    expect(value).toBe('done');
    expect((await admin.query('SELECT count(*)::int AS n FROM things WHERE id = 1')).rows[0].n).toBe(1);
  });

  it('rolls back when the function throws, and keeps the healthy connection', async () => {
    const before = await pid();
    await expect(inTransaction(pool, async (client) => {
      await client.query('INSERT INTO things VALUES (2)');
      throw InvalidError.field('/id', 'refused');
    })).rejects.toBeInstanceOf(InvalidError);
    expect((await admin.query('SELECT count(*)::int AS n FROM things WHERE id = 2')).rows[0].n).toBe(0);
    expect(await pid()).toBe(before);
  });

  it('destroys a connection that died inside the transaction; the next transaction gets a fresh one', async () => {
    const dead = await pid();
    await expect(inTransaction(pool, async (client) => {
      await admin.query('SELECT pg_terminate_backend($1)', [dead]);
      await client.query('INSERT INTO things VALUES (3)');
    })).rejects.toThrow();
    const value = await inTransaction(pool, async (client) => (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid);
    expect(value).not.toBe(dead);
    expect((await admin.query('SELECT count(*)::int AS n FROM things WHERE id = 3')).rows[0].n).toBe(0);
  });
});
