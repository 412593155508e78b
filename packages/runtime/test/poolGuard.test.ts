import { createTestDatabase, testLogger, waitFor, type TestDatabase } from '@rrs/testkit';
import { createPool, type Pool } from '../src';

/**
 * A pg client that loses its connection while checked out emits 'error'; an EventEmitter 'error' with
 * no listener is thrown, and would crash the process. createPool listens on every client it makes.
 */
describe('createPool and lost connections (real PostgreSQL)', () => {
  let db: TestDatabase;
  let pool: Pool;
  let admin: Pool;
  const logger = testLogger();

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: 'public', max: 2, applicationName: 'pool_guard_test', logger });
    admin = createPool({ url: db.url, schema: 'public', max: 1 });
  });
  afterAll(async () => {
    await pool.end();
    await admin.end();
    await db.drop();
  });

  it('survives the backend of a checked-out client being terminated, and the pool recovers', async () => {
    const client = await pool.connect();
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const ended = new Promise<void>((resolve) => client.once('end', () => resolve()));

    await admin.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
    await ended;
    await waitFor(() => logger.lines.some((l) => l.includes('database connection lost')), { what: 'the lost connection logged' });
    await expect(client.query('SELECT 1')).rejects.toThrow();
    client.release(new Error('connection lost'));

    // The broken client is discarded; new work gets fresh connections.
    const results = await Promise.all([1, 2, 3].map((n) => pool.query<{ n: number }>('SELECT $1::int AS n', [n])));
    expect(results.map((r) => r.rows[0].n)).toEqual([1, 2, 3]);
    const pids = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    expect(pids.rows[0].pid).not.toBe(rows[0].pid);
  });

  it('survives an idle client being terminated', async () => {
    const client = await pool.connect();
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    client.release();
    const before = pool.totalCount;
    await admin.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
    await waitFor(() => pool.totalCount < before, { what: 'the idle client dropped from the pool' });
    const { rows: ok } = await pool.query<{ one: number }>('SELECT 1 AS one');
    expect(ok).toEqual([{ one: 1 }]);
  });
});
