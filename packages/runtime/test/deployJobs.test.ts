import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'nats';
import { createTestDatabase, deleteJetStreamPrefix, TEST_NATS_URL, uniqueName, type TestDatabase } from '@rrs/testkit';
import { ConfigError, createPool, migrate, parseMigrationPlan, provisionBus, readProvisionEnv, runMigrationPlan } from '../src';

describe('parseMigrationPlan', () => {
  it('reads the schema and the component=dir pairs in order', () => {
    expect(parseMigrationPlan(['--schema', 'contacts', 'service=migrations', 'idempotency=node_modules/@rrs/idempotency/migrations'])).toEqual({
      schema: 'contacts',
      steps: [
        { component: 'service', dir: 'migrations' },
        { component: 'idempotency', dir: 'node_modules/@rrs/idempotency/migrations' },
      ],
    });
  });

  it.each([
    [['service=migrations'], /--schema/],
    [['--schema', 'Bad-Name', 'service=migrations'], /--schema/],
    [['--schema', 'contacts'], /no component=dir/],
    [['--schema', 'contacts', 'migrations'], /component=dir/],
    [['--schema', 'contacts', 'service=a', 'service=b'], /listed twice/],
  ])('refuses %j', (args, message) => {
    expect(() => parseMigrationPlan(args)).toThrow(ConfigError);
    expect(() => parseMigrationPlan(args)).toThrow(message);
  });
});

describe('runMigrationPlan (real PostgreSQL)', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(() => db.drop());

  it('applies what the service would apply at start, so the service then finds nothing to do', async () => {
    const own = mkdtempSync(join(tmpdir(), 'rrs-plan-'));
    writeFileSync(join(own, '0001_init.sql'), 'CREATE TABLE things (id int PRIMARY KEY);');
    const lib = mkdtempSync(join(tmpdir(), 'rrs-plan-'));
    writeFileSync(join(lib, '0001_lib.sql'), 'CREATE TABLE lib_records (id int PRIMARY KEY);');
    const plan = parseMigrationPlan(['--schema', 'svc_plan', `service=${own}`, `idempotency=${lib}`]);
    expect(await runMigrationPlan(db.url, plan)).toEqual({ service: [1], idempotency: [1] });
    expect(await runMigrationPlan(db.url, plan)).toEqual({ service: [], idempotency: [] });
    const pool = createPool({ url: db.url, schema: 'svc_plan' });
    try {
      expect(await migrate(pool, { schema: 'svc_plan', dir: own })).toEqual([]);
      expect(await migrate(pool, { schema: 'svc_plan', dir: lib, component: 'idempotency' })).toEqual([]);
    } finally {
      await pool.end();
    }
  });

  it('fails naming the migration, and leaves the schema as it was', async () => {
    const bad = mkdtempSync(join(tmpdir(), 'rrs-plan-'));
    writeFileSync(join(bad, '0001_broken.sql'), 'CREATE TABLE nope (id int PRIMARY KEY); SELECT no_such_function();');
    await expect(runMigrationPlan(db.url, parseMigrationPlan(['--schema', 'svc_bad', `service=${bad}`]))).rejects.toThrow(/svc_bad\/0001_broken failed/);
    const pool = createPool({ url: db.url, schema: 'svc_bad' });
    try {
      const { rows } = await pool.query("SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'svc_bad' AND table_name = 'nope'");
      expect(rows[0].n).toBe(0);
    } finally {
      await pool.end();
    }
  });
});

describe('provisionBus (real NATS)', () => {
  const prefix = uniqueName('p');
  afterAll(() => deleteJetStreamPrefix(prefix));

  it('creates the streams and the channels bucket, and is idempotent', async () => {
    const config = readProvisionEnv({ NATS_URL: TEST_NATS_URL, BUS_PREFIX: prefix, CHANNEL_TTL_MS: '45000' });
    await provisionBus(config);
    await provisionBus(config);
    const nc = await connect({ servers: TEST_NATS_URL });
    try {
      const jsm = await nc.jetstreamManager();
      const upper = prefix.toUpperCase();
      expect((await jsm.streams.info(`${upper}_STEPS`)).config.subjects).toEqual([`${prefix}.steps.>`]);
      expect((await jsm.streams.info(`${upper}_EVENTS`)).config.subjects).toEqual([`${prefix}.events.>`]);
      expect((await jsm.streams.info(`KV_${prefix}_channels`)).config.max_age).toBe(45_000 * 1_000_000);
    } finally {
      await nc.close();
    }
  });

  it('refuses a configuration without NATS_URL, naming it', () => {
    expect(() => readProvisionEnv({})).toThrow(/NATS_URL/);
  });
});
