import { randomUUID } from 'node:crypto';
import { createPool, migrate, SecretBox, type Pool } from '@rrs/runtime';
import { createTestDatabase, waitFor, type TestDatabase } from '@rrs/testkit';
import { DEFAULT_DELIVERY_POLICY, MIGRATIONS_DIR, SCHEMA } from '../src';
import { recordAttempt, type ClaimedDelivery } from '../src/deliveries';
import { WebhookEndpoints } from '../src/endpoints';
import { UrlGuard } from '../src/urlGuard';
import { TEST_SECRET_KEY } from './support/service';

/**
 * Deleting an endpoint while one of its deliveries records an attempt. The interleaving that deadlocked
 * (issue 13: the DELETE answered 500) is forced with a third transaction holding a share lock on the
 * endpoint: the DELETE queues for the endpoint first, then the attempt's transaction (which on the old
 * code already held its delivery row) queues behind it; when the share lock goes, the DELETE cascades
 * into the delivery row while the attempt waits for the endpoint.
 */
describe('deleting a webhook endpoint while its deliveries are in flight', () => {
  let db: TestDatabase;
  let pool: Pool;
  let endpoints: WebhookEndpoints;

  beforeAll(async () => {
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: SCHEMA, max: 6 });
    await migrate(pool, { schema: SCHEMA, dir: MIGRATIONS_DIR });
    endpoints = new WebhookEndpoints(pool, new UrlGuard({ allowLoopbackHttp: true }), DEFAULT_DELIVERY_POLICY, new SecretBox([TEST_SECRET_KEY]), () => {});
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
  });

  /** A delivery claimed by a worker whose attempt is in flight (its lease far ahead, so nothing else claims it). */
  async function claimedDelivery(endpointId: string, organizationId: string): Promise<ClaimedDelivery> {
    const eventId = randomUUID();
    await pool.query(`INSERT INTO events (id, type, organization_id, occurred_at, payload, body) VALUES ($1, 'cascade.recipient.finished', $2, now(), '{}', '{}')`, [eventId, organizationId]);
    const id = randomUUID();
    const { rows } = await pool.query<{ claim_token: string }>(
      `INSERT INTO deliveries (id, event_id, endpoint_id, organization_id, status, next_attempt_at, attempt_count, claim_token)
       VALUES ($1, $2, $3, $4, 'pending', now() + interval '1 hour', 1, gen_random_uuid()) RETURNING claim_token`,
      [id, eventId, endpointId, organizationId],
    );
    return { id, eventId, eventType: 'cascade.recipient.finished', body: '{}', endpointId, url: 'http://127.0.0.1:1/', secrets: [], attemptNumber: 1, retryIndex: 0, claimToken: rows[0].claim_token, traceContext: {} };
  }

  const waitingOnLocks = async () =>
    (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`)).rows[0].n;

  it.each(['retry', 'delivered'] as const)('the DELETE succeeds and the %s attempt is dropped, without a deadlock', async (outcome) => {
    const org = randomUUID();
    const { endpoint } = await endpoints.create({ organizationId: org, url: 'http://127.0.0.1:1/hook', events: ['cascade.recipient.finished'], description: '' });
    // A failing endpoint: a delivered attempt then clears failing_since, which writes the endpoint row too.
    await pool.query(`UPDATE endpoints SET failing_since = now() WHERE id = $1`, [endpoint.id]);
    const claim = await claimedDelivery(endpoint.id, org);

    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM endpoints WHERE id = $1 FOR SHARE', [endpoint.id]);
      const deleting = endpoints.delete(org, endpoint.id);
      await waitFor(async () => (await waitingOnLocks()) === 1, { what: 'the DELETE waiting for the endpoint' });
      const recording = recordAttempt(
        pool,
        claim,
        new Date(),
        outcome === 'retry' ? { kind: 'response', status: 500, body: '', durationMs: 3 } : { kind: 'response', status: 200, body: '', durationMs: 3 },
        outcome === 'retry' ? { outcome: 'retry', retryInMs: 1_000, gone: false } : { outcome: 'delivered', gone: false },
        { disableAfterMs: DEFAULT_DELIVERY_POLICY.disableAfterMs },
      );
      await waitFor(async () => (await waitingOnLocks()) === 2, { what: 'the attempt waiting too' });
      await holder.query('COMMIT');
      const [deleted, recorded] = await Promise.allSettled([deleting, recording]);
      expect(deleted).toEqual({ status: 'fulfilled', value: undefined });
      expect(recorded).toEqual({ status: 'fulfilled', value: { held: false, endpointDisabled: null } });
    } finally {
      holder.release();
    }
    for (const table of ['endpoints', 'endpoint_secrets', 'deliveries', 'attempts']) {
      const column = table === 'endpoints' ? 'id' : table === 'attempts' ? 'delivery_id' : table === 'deliveries' ? 'endpoint_id' : 'endpoint_id';
      const value = table === 'attempts' ? claim.id : endpoint.id;
      expect((await pool.query(`SELECT count(*)::int AS n FROM ${table} WHERE ${column} = $1`, [value])).rows[0]).toEqual({ n: 0 });
    }
  });
});
