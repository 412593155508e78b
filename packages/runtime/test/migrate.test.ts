import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTestDatabase, type TestDatabase } from '@rrs/testkit';
import { createPool, migrate, readMigrations, type Pool } from '../src';

describe('migrate (real PostgreSQL)', () => {
  let db: TestDatabase;
  let pools: Pool[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'rrs-mig-'));
  writeFileSync(join(dir, '0001_init.sql'), 'CREATE TABLE things (id int PRIMARY KEY);');
  writeFileSync(join(dir, '0002_more.sql'), "INSERT INTO things VALUES (1); SELECT pg_sleep(0.2);");

  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
    await db.drop();
  });
  const pool = () => {
    const p = createPool({ url: db.url, schema: 'svc_a' });
    pools.push(p);
    return p;
  };

  it('applies numbered migrations once, in the service schema, even when replicas start together', async () => {
    const results = await Promise.all([migrate(pool(), { schema: 'svc_a', dir }), migrate(pool(), { schema: 'svc_a', dir }), migrate(pool(), { schema: 'svc_a', dir })]);
    expect(results.flat().sort()).toEqual([1, 2]);
    const p = pool();
    const { rows } = await p.query('SELECT count(*)::int AS n FROM things');
    expect(rows[0].n).toBe(1);
    const { rows: where } = await p.query("SELECT table_schema FROM information_schema.tables WHERE table_name = 'things'");
    expect(where).toEqual([{ table_schema: 'svc_a' }]);
    expect(await migrate(p, { schema: 'svc_a', dir })).toEqual([]);
  });

  it('rolls back a failing migration and names it', async () => {
    const bad = mkdtempSync(join(tmpdir(), 'rrs-mig-'));
    writeFileSync(join(bad, '0001_ok.sql'), 'CREATE TABLE ok (id int);');
    writeFileSync(join(bad, '0002_broken.sql'), 'CREATE TABLE half (id int); SELECT nonsense_function();');
    const p = createPool({ url: db.url, schema: 'svc_b' });
    pools.push(p);
    await expect(migrate(p, { schema: 'svc_b', dir: bad })).rejects.toThrow(/svc_b\/0002_broken failed/);
    const { rows } = await p.query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'svc_b' ORDER BY 1");
    expect(rows.map((r) => r.table_name)).toEqual(['ok', 'schema_migrations']);
  });

  it('refuses badly named migration files', () => {
    const odd = mkdtempSync(join(tmpdir(), 'rrs-mig-'));
    writeFileSync(join(odd, '1_init.sql'), '');
    expect(() => readMigrations(odd)).toThrow(/0001_name\.sql/);
  });
});
