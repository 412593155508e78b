import { randomUUID } from 'node:crypto';
import { createPool, migrate, type Pool } from '@rrs/runtime';
import { createTestDatabase, historyScans, testLogger, type TestDatabase } from '@rrs/testkit';
import { MIGRATIONS_DIR, SCHEMA } from '../src';
import { HISTORY_PURGE_BATCH, OAUTH_STATE_KEEP_AFTER_EXPIRY_MS, purgeConnectorHistory, PURGE_STATEMENTS } from '../src/history';

const DAY = 86_400_000;

/**
 * The connectors' history is purged by age (history.ts, docs/operations.md "Data lifecycle"): processed
 * inbox events and settled write-backs past the retention, OAuth states a day past their expiry; pending
 * work and younger rows stay; each statement reads by an index.
 */
describe('connector history purge', () => {
  let db: TestDatabase;
  let pool: Pool;
  let connectorId: string;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: SCHEMA });
    await migrate(pool, { schema: SCHEMA, dir: MIGRATIONS_DIR });
    connectorId = randomUUID();
    await pool.query(
      `INSERT INTO connectors (id, organization_id, kind, name, crm_url, auth_mode, credentials, inbound_secret_hash, settings, active_since, sync_cursor)
       VALUES ($1, $2, 'amocrm', 'Sales', 'https://crm.example.com', 'long_lived_token', 'sealed', '\\x00', '{}', now(), now())`,
      [connectorId, randomUUID()],
    );
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  async function crmEvent(status: string, ageDays: number): Promise<string> {
    const { rows } = await pool.query<{ id: string }>(
      `INSERT INTO crm_events (connector_id, source, event, deal_id, payload, status, processed_at) VALUES ($1, 'webhook', 'won', $2, '{}', $3, CASE WHEN $3 <> 'pending' THEN now() - $4 * interval '1 day' END) RETURNING id::text`,
      [connectorId, randomUUID(), status, ageDays],
    );
    return rows[0].id;
  }
  async function writeBack(status: string, ageDays: number): Promise<string> {
    const eventId = randomUUID();
    await pool.query(
      `INSERT INTO write_backs (event_id, connector_id, deal_id, event_type, cascade_id, feedback, reason, occurred_at, status, created_at, done_at)
       VALUES ($1, $2, 'deal', 'cascade.recipient.finished', 'cascade', '', '', now(), $3, now() - $4 * interval '1 day', CASE WHEN $3 = 'done' THEN now() - $4 * interval '1 day' END)`,
      [eventId, connectorId, status, ageDays],
    );
    return eventId;
  }
  async function oauthState(expiredMsAgo: number): Promise<void> {
    await pool.query(
      `INSERT INTO amocrm_oauth_states (state_hash, organization_id, member_id, name, location_id, flow_id, expires_at) VALUES ($1, $2, 'm', 'Sales', 'l', '', now() - $3 * interval '1 millisecond')`,
      [Buffer.from(randomUUID()), randomUUID(), expiredMsAgo],
    );
  }

  it('deletes processed events, settled write-backs and expired OAuth states past their age, and nothing else', async () => {
    // Past the retention: these go.
    await crmEvent('done', 31);
    await crmEvent('ignored', 40);
    await writeBack('done', 31);
    await writeBack('failed', 45);
    const keptEvents = [await crmEvent('done', 29), await crmEvent('pending', 0)];
    const keptWriteBacks = [await writeBack('done', 29), await writeBack('pending', 60)];
    await oauthState(OAUTH_STATE_KEEP_AFTER_EXPIRY_MS + 60_000);
    await oauthState(60_000);
    await oauthState(-600_000);
    const logger = testLogger();

    expect(await purgeConnectorHistory(pool, { retentionMs: 30 * DAY, logger, batch: 1 })).toEqual({ crm_events: 2, write_backs: 2, amocrm_oauth_states: 1 });
    expect((await pool.query('SELECT id::text FROM crm_events ORDER BY id')).rows.map((row) => row.id)).toEqual(keptEvents);
    expect((await pool.query('SELECT event_id FROM write_backs')).rows.map((row) => row.event_id).sort()).toEqual([...keptWriteBacks].sort());
    expect((await pool.query('SELECT count(*)::int AS n FROM amocrm_oauth_states')).rows[0].n).toBe(2);
    expect(logger.lines.some((line) => line.includes('connector history purged'))).toBe(true);
    expect(await purgeConnectorHistory(pool, { retentionMs: 30 * DAY })).toEqual({ crm_events: 0, write_backs: 0, amocrm_oauth_states: 0 });
  });

  it('reads what to purge by an index, never the whole table', async () => {
    await pool.query(`INSERT INTO crm_events (connector_id, source, event, deal_id, payload, status, processed_at)
                      SELECT $1, 'webhook', 'won', 'd-' || n, '{}', 'done', now() - n * interval '1 hour' FROM generate_series(1, 5000) n`, [connectorId]);
    await pool.query(`INSERT INTO write_backs (event_id, connector_id, deal_id, event_type, cascade_id, feedback, reason, occurred_at, status, done_at)
                      SELECT 'w-' || n, $1, 'd-' || n, 'cascade.recipient.finished', 'c', '', '', now(), 'done', now() - n * interval '1 hour' FROM generate_series(1, 5000) n`, [connectorId]);
    await pool.query(`INSERT INTO amocrm_oauth_states (state_hash, organization_id, member_id, name, location_id, flow_id, expires_at)
                      SELECT decode(md5(n::text), 'hex'), gen_random_uuid(), 'm', 'Sales', 'l', '', now() - n * interval '1 hour' FROM generate_series(1, 5000) n`);
    await pool.query('ANALYZE crm_events; ANALYZE write_backs; ANALYZE amocrm_oauth_states');
    // Each prune statement planned with sequential scans off: every read goes through an index.
    const statements = new Map<string, unknown[]>(Object.values(PURGE_STATEMENTS).map((sql) => [sql, [30 * DAY, HISTORY_PURGE_BATCH]]));
    expect(await historyScans(db.url, statements, ['crm_events', 'write_backs', 'amocrm_oauth_states'], { searchPath: SCHEMA })).toEqual([]);
  });
});
