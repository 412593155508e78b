import { randomUUID } from 'node:crypto';
import { createPool, migrate, registry, type Pool } from '@rrs/runtime';
import { createTestDatabase, type TestDatabase } from '@rrs/testkit';
import { MIGRATIONS_DIR, SCHEMA } from '../src';
import { watchDeliveryBacklog } from '../src/backlog';
import { countBacklog } from '../src/deliveries';

/**
 * The delivery backlog gauges, read the way Prometheus reads them (the registry's exposition at scrape
 * time), over deliveries put in each state directly in PostgreSQL. No worker runs, so nothing moves.
 */
describe('webhook delivery backlog metrics', () => {
  let db: TestDatabase;
  let pool: Pool;
  const org = randomUUID();
  const endpointId = randomUUID();

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: SCHEMA });
    await migrate(pool, { schema: SCHEMA, dir: MIGRATIONS_DIR });
    await pool.query(`INSERT INTO endpoints (id, organization_id, url, events) VALUES ($1, $2, 'https://hooks.example.com/', '{cascade.recipient.finished}')`, [endpointId, org]);
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  /** A delivery `dueInS` seconds from now (negative: overdue), claimed or not. */
  async function delivery(status: 'pending' | 'delivered' | 'failed', dueInS: number | null, claimed = false) {
    const eventId = randomUUID();
    await pool.query(`INSERT INTO events (id, type, organization_id, occurred_at, payload, body) VALUES ($1, 'cascade.recipient.finished', $2, now(), '{}', '{}')`, [eventId, org]);
    await pool.query(
      `INSERT INTO deliveries (id, event_id, endpoint_id, organization_id, status, next_attempt_at, claim_token)
       VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6), CASE WHEN $7 THEN gen_random_uuid() END)`,
      [randomUUID(), eventId, endpointId, org, status, dueInS, claimed],
    );
  }

  /** The samples of the backlog metrics in the exposition, by series. */
  async function scrape(): Promise<Record<string, number>> {
    const text = await registry.metrics();
    const out: Record<string, number> = {};
    for (const match of text.matchAll(/^(webhook_deliveries_(?:pending\{state="\w+"\}|oldest_due_seconds)) (\S+)$/gm)) out[match[1]] = Number(match[2]);
    return out;
  }

  it('reports pending deliveries by state and the wait of the oldest due one, and nothing settled', async () => {
    await delivery('pending', -120); // due for two minutes
    await delivery('pending', -1);
    await delivery('pending', -30, true); // a claim whose lease ran out (its worker died): due again
    await delivery('pending', 40, true); // an attempt in flight
    for (let i = 0; i < 3; i++) await delivery('pending', 300 * (i + 1)); // waiting on the retry schedule
    await delivery('delivered', null);
    await delivery('failed', null);

    expect(await countBacklog(pool)).toEqual({ due: 3, inFlight: 1, retryScheduled: 3, oldestDueSeconds: expect.any(Number) });
    const stop = watchDeliveryBacklog(pool);
    try {
      const got = await scrape();
      expect(got).toEqual({
        'webhook_deliveries_pending{state="due"}': 3,
        'webhook_deliveries_pending{state="in_flight"}': 1,
        'webhook_deliveries_pending{state="retry_scheduled"}': 3,
        webhook_deliveries_oldest_due_seconds: expect.any(Number),
      });
      expect(got.webhook_deliveries_oldest_due_seconds).toBeGreaterThanOrEqual(120);
      expect(got.webhook_deliveries_oldest_due_seconds).toBeLessThan(180);
    } finally {
      stop();
    }
  });

  it('reports 0 waiting when nothing is due, and a scrape right after another reuses its sample', async () => {
    await pool.query(`DELETE FROM deliveries`);
    await delivery('pending', 600);
    const stop = watchDeliveryBacklog(pool);
    try {
      expect(await scrape()).toEqual({
        'webhook_deliveries_pending{state="due"}': 0,
        'webhook_deliveries_pending{state="in_flight"}': 0,
        'webhook_deliveries_pending{state="retry_scheduled"}': 1,
        webhook_deliveries_oldest_due_seconds: 0,
      });
      // Several scrapers within the sampling interval cost one query.
      await delivery('pending', -5);
      expect((await scrape())['webhook_deliveries_pending{state="due"}']).toBe(0);
    } finally {
      stop();
    }
    const again = watchDeliveryBacklog(pool);
    try {
      expect((await scrape())['webhook_deliveries_pending{state="due"}']).toBe(1);
    } finally {
      again();
    }
  });

  it('leaves the backlog out of the scrape, rather than reporting 0, when PostgreSQL cannot be read', async () => {
    const broken = createPool({ url: db.url.replace(/\/[^/]+$/, '/no_such_database'), schema: SCHEMA });
    const stop = watchDeliveryBacklog(broken);
    try {
      const text = await registry.metrics();
      expect(text).not.toMatch(/^webhook_deliveries_pending\{/m);
      // prom-client writes NaN as `Nan`; Prometheus parses special values case-insensitively.
      expect(text).toMatch(/^webhook_deliveries_oldest_due_seconds (NaN|Nan)$/m);
    } finally {
      stop();
      await broken.end();
    }
  });
});
