import { randomUUID } from 'node:crypto';
import { createPool, migrate, type Pool } from '@rrs/runtime';
import { createTestDatabase, historyScans, testLogger, type TestDatabase } from '@rrs/testkit';
import { MIGRATIONS_DIR, SCHEMA } from '../src';
import { MEMBER_TOKEN_PURGES, MEMBER_TOKENS_KEEP_AFTER_EXPIRY_DAYS, MEMBER_TOKENS_PURGE_BATCH, purgeExpiredMemberTokens } from '../src/memberTokenPurge';

const DAY = 86_400_000;

/**
 * Members' sessions, password resets and invitations are purged a month after they expired
 * (memberTokenPurge.ts, docs/operations.md "Data lifecycle"); live and recently expired ones stay; each
 * statement reads by an index.
 */
describe('expired member tokens purge', () => {
  let db: TestDatabase;
  let pool: Pool;
  const org = randomUUID();
  const member = randomUUID();

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: SCHEMA });
    await migrate(pool, { schema: SCHEMA, dir: MIGRATIONS_DIR });
    await pool.query(`INSERT INTO organizations (id, name) VALUES ($1, 'Acme')`, [org]);
    await pool.query(`INSERT INTO members (id, organization_id, email, role, password_hash) VALUES ($1, $2, 'owner@example.com', 'owner', 'x')`, [member, org]);
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  /** One row of each table, expired `days` ago (negative: still valid). */
  async function tokens(days: number): Promise<void> {
    const expiresAt = `now() - ${Number(days)} * interval '1 day'`;
    await pool.query(`INSERT INTO member_sessions (id, member_id, organization_id, token_hash, csrf_token, expires_at) VALUES ($1, $2, $3, $4, 'c', ${expiresAt})`, [randomUUID(), member, org, Buffer.from(randomUUID())]);
    await pool.query(`INSERT INTO member_password_resets (id, member_id, token_hash, expires_at) VALUES ($1, $2, $3, ${expiresAt})`, [randomUUID(), member, Buffer.from(randomUUID())]);
    await pool.query(`INSERT INTO member_invitations (id, organization_id, email, role, token_hash, expires_at) VALUES ($1, $2, 'new@example.com', 'viewer', $3, ${expiresAt})`, [randomUUID(), org, Buffer.from(randomUUID())]);
  }
  const counts = async () =>
    (await pool.query(`SELECT (SELECT count(*)::int FROM member_sessions) AS sessions, (SELECT count(*)::int FROM member_password_resets) AS resets, (SELECT count(*)::int FROM member_invitations) AS invitations`)).rows[0];

  it('deletes only what expired more than the keep ago', async () => {
    await tokens(MEMBER_TOKENS_KEEP_AFTER_EXPIRY_DAYS + 1);
    await tokens(MEMBER_TOKENS_KEEP_AFTER_EXPIRY_DAYS + 90);
    await tokens(MEMBER_TOKENS_KEEP_AFTER_EXPIRY_DAYS - 1);
    await tokens(-1);
    const logger = testLogger();
    expect(await purgeExpiredMemberTokens(pool, { logger, batch: 1 })).toEqual({ member_sessions: 2, member_password_resets: 2, member_invitations: 2 });
    expect(await counts()).toEqual({ sessions: 2, resets: 2, invitations: 2 });
    expect(logger.lines.some((line) => line.includes('expired member tokens purged'))).toBe(true);
    expect(await purgeExpiredMemberTokens(pool)).toEqual({ member_sessions: 0, member_password_resets: 0, member_invitations: 0 });
  });

  it('reads what to purge by an index, never the whole table', async () => {
    for (const table of ['member_sessions', 'member_password_resets', 'member_invitations']) {
      const columns = table === 'member_sessions' ? `(id, member_id, organization_id, token_hash, csrf_token, expires_at) SELECT gen_random_uuid(), '${member}', '${org}', decode(md5(n::text || '${table}'), 'hex'), 'c', now() - n * interval '1 hour'`
        : table === 'member_password_resets' ? `(id, member_id, token_hash, expires_at) SELECT gen_random_uuid(), '${member}', decode(md5(n::text || '${table}'), 'hex'), now() - n * interval '1 hour'`
        : `(id, organization_id, email, role, token_hash, expires_at) SELECT gen_random_uuid(), '${org}', 'x@example.com', 'viewer', decode(md5(n::text || '${table}'), 'hex'), now() - n * interval '1 hour'`;
      await pool.query(`INSERT INTO ${table} ${columns} FROM generate_series(1, 5000) n`);
      await pool.query(`ANALYZE ${table}`);
    }
    // Each prune statement planned with sequential scans off: every read goes through an index.
    const statements = new Map<string, unknown[]>(Object.values(MEMBER_TOKEN_PURGES).map((sql) => [sql, [30 * DAY, MEMBER_TOKENS_PURGE_BATCH]]));
    expect(await historyScans(db.url, statements, Object.keys(MEMBER_TOKEN_PURGES), { searchPath: SCHEMA })).toEqual([]);
  });
});
