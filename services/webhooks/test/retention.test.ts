import { randomUUID } from 'node:crypto';
import { createPool, migrate, type Pool } from '@rrs/runtime';
import { createTestDatabase, historyScans, type TestDatabase } from '@rrs/testkit';
import { MIGRATIONS_DIR, SCHEMA } from '../src';
import { purgeDeliveryLog, PURGE_DELIVERIES_SQL, PURGE_EVENTS_SQL } from '../src/retention';

describe('delivery log retention', () => {
  let db: TestDatabase;
  let pool: Pool;
  const DAY = 24 * 3_600_000;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: SCHEMA });
    await migrate(pool, { schema: SCHEMA, dir: MIGRATIONS_DIR });
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  async function delivery(status: 'pending' | 'delivered' | 'failed', ageDays: number, endpointId: string, org: string) {
    const eventId = randomUUID();
    await pool.query(`INSERT INTO events (id, type, organization_id, occurred_at, payload, body, received_at) VALUES ($1, 'cascade.recipient.finished', $2, now(), '{}', '{}', now() - make_interval(days => $3))`, [eventId, org, ageDays]);
    const id = randomUUID();
    await pool.query(
      `INSERT INTO deliveries (id, event_id, endpoint_id, organization_id, status, next_attempt_at, updated_at) VALUES ($1, $2, $3, $4, $5, CASE WHEN $5 = 'pending' THEN now() END, now() - make_interval(days => $6))`,
      [id, eventId, endpointId, org, status, ageDays],
    );
    await pool.query(`INSERT INTO attempts (delivery_id, number, started_at, duration_ms, outcome) VALUES ($1, 1, now(), 5, 'retry')`, [id]);
    return { id, eventId };
  }

  it('deletes settled deliveries, their attempts and unreferenced events past the retention, in bounded batches, and nothing else', async () => {
    const org = randomUUID();
    const endpointId = randomUUID();
    await pool.query(`INSERT INTO endpoints (id, organization_id, url, events) VALUES ($1, $2, 'https://hooks.example.com/', '{cascade.recipient.finished}')`, [endpointId, org]);
    const old = [await delivery('delivered', 40, endpointId, org), await delivery('failed', 31, endpointId, org), await delivery('delivered', 35, endpointId, org)];
    const kept = [await delivery('delivered', 29, endpointId, org), await delivery('pending', 60, endpointId, org)];

    expect(await purgeDeliveryLog(pool, 30 * DAY, { batch: 2 })).toEqual({ deliveries: 3, events: 3 });
    const { rows } = await pool.query('SELECT id FROM deliveries ORDER BY id');
    expect(rows.map((r) => r.id).sort()).toEqual(kept.map((k) => k.id).sort());
    const { rows: events } = await pool.query('SELECT id FROM events');
    expect(events.map((r) => r.id).sort()).toEqual(kept.map((k) => k.eventId).sort());
    const { rows: attempts } = await pool.query('SELECT count(*)::int AS n FROM attempts WHERE delivery_id = ANY ($1)', [old.map((o) => o.id)]);
    expect(attempts[0].n).toBe(0);
    expect(await purgeDeliveryLog(pool, 30 * DAY)).toEqual({ deliveries: 0, events: 0 });
  });

  it('stops after maxBatches, leaving the rest to the next run', async () => {
    const org = randomUUID();
    const endpointId = randomUUID();
    await pool.query(`INSERT INTO endpoints (id, organization_id, url, events) VALUES ($1, $2, 'https://hooks.example.com/', '{cascade.recipient.finished}')`, [endpointId, org]);
    for (let i = 0; i < 5; i++) await delivery('delivered', 40, endpointId, org);
    expect((await purgeDeliveryLog(pool, 30 * DAY, { batch: 2, maxBatches: 2 })).deliveries).toBe(4);
    expect((await purgeDeliveryLog(pool, 30 * DAY, { batch: 2, maxBatches: 2 })).deliveries).toBe(1);
  });

  it('reads what to purge by an index, never the whole delivery log', async () => {
    const org = randomUUID();
    const endpointId = randomUUID();
    await pool.query(`INSERT INTO endpoints (id, organization_id, url, events) VALUES ($1, $2, 'https://hooks.example.com/', '{cascade.recipient.finished}')`, [endpointId, org]);
    await pool.query(`INSERT INTO events (id, type, organization_id, occurred_at, payload, body, received_at)
                      SELECT 'e-' || n, 'cascade.recipient.finished', $1, now(), '{}', '{}', now() - n * interval '1 hour' FROM generate_series(1, 5000) n`, [org]);
    await pool.query(`INSERT INTO deliveries (id, event_id, endpoint_id, organization_id, status, next_attempt_at, updated_at)
                      SELECT gen_random_uuid(), 'e-' || n, $1, $2, CASE WHEN n % 10 = 0 THEN 'pending' ELSE 'delivered' END,
                             CASE WHEN n % 10 = 0 THEN now() END, now() - n * interval '1 hour' FROM generate_series(1, 5000) n`, [endpointId, org]);
    await pool.query('ANALYZE events; ANALYZE deliveries; ANALYZE attempts');
    // Each prune statement planned with sequential scans off: every read goes through an index.
    const statements = new Map<string, unknown[]>([PURGE_DELIVERIES_SQL, PURGE_EVENTS_SQL].map((sql) => [sql, [30 * DAY, 1_000]]));
    expect(await historyScans(db.url, statements, ['events', 'deliveries', 'attempts'], { searchPath: SCHEMA })).toEqual([]);
  });
});
