import pg from 'pg';
import { createTestDatabase, testLogger, uniqueName, waitFor, type TestDatabase } from '@rrs/testkit';
import { electLeader, type Leadership } from '../src/leader';

/**
 * Two replicas elect one leader for a job on PostgreSQL: only the leader runs it; when the leader's
 * session ends (its process died, its connection was cut) the other takes over.
 */
describe('leader election', () => {
  let db: TestDatabase;
  const elections: Leadership[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    for (const e of elections) await e.stop();
    await db.drop();
  });

  const elect = (name: string) => {
    const e = electLeader({ databaseUrl: db.url, name, logger: testLogger(), checkMs: 200 });
    elections.push(e);
    return e;
  };

  it('elects exactly one of two replicas, which alone runs the job; the other takes over when the leader stops', async () => {
    const name = uniqueName('purge');
    const a = elect(name);
    const b = elect(name);
    await waitFor(() => a.isLeader || b.isLeader, { what: 'a leader' });
    const runs: string[] = [];
    await a.ifLeader(async () => runs.push('a'));
    await b.ifLeader(async () => runs.push('b'));
    expect(runs).toHaveLength(1);
    expect([a.isLeader, b.isLeader].filter(Boolean)).toHaveLength(1);

    const [leader, follower] = a.isLeader ? [a, b] : [b, a];
    await leader.stop();
    await waitFor(() => follower.isLeader, { what: 'the follower takes over', timeoutMs: 5_000 });
    expect(await leader.ifLeader(async () => 'ran')).toBeUndefined();
    expect(await follower.ifLeader(async () => 'ran')).toBe('ran');
  });

  it('a leader whose session is terminated (as when its process dies) loses the lead, and the other replica takes it within seconds', async () => {
    const name = uniqueName('relay');
    const a = elect(name);
    await waitFor(() => a.isLeader, { what: 'a leads' });
    const b = elect(name);
    // b has tried at least once (it would lead at once if the lock were free).
    await b.ifLeader(async () => undefined);
    expect(b.isLeader).toBe(false);
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      const cutAt = Date.now();
      await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1 AND pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)`, [`leader:${name}`]);
      await waitFor(() => b.isLeader && !a.isLeader, { what: 'b takes over', timeoutMs: 5_000 });
      expect(Date.now() - cutAt).toBeLessThan(5_000);
    } finally {
      await admin.end();
    }
  });

  it('different jobs are elected apart', async () => {
    const a = elect(uniqueName('one'));
    const b = elect(uniqueName('two'));
    await waitFor(() => a.isLeader && b.isLeader, { what: 'both lead their own job' });
  });
});
