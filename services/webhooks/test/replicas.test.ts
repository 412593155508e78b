import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { eventsV1, eventSubject } from '@rrs/proto';
import { createTestBus, createTestDatabase, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startWebhooks, type RunningWebhooks } from '../src';
import { Receiver } from './support/receiver';
import { queueDeliveryElsewhere, testWebhooksConfig } from './support/service';

/**
 * Two replicas of the webhooks service on one database and one bus: they share the events and the
 * deliveries, and no delivery is sent twice. A delivery queued through one replica (or anywhere in the
 * database) wakes the other's worker through Postgres NOTIFY, not after an idle timeout.
 */
/** Short claim leases, renewed every third: an attempt may outlast several of them. */
const LEASE_MS = 600;

describe('webhooks replicas', () => {
  let db: TestDatabase;
  let tb: TestBus;
  const ctxs = [testContext('replica-a'), testContext('replica-b')];
  const replicas: RunningWebhooks[] = [];
  const receiver = new Receiver();
  let sql: pg.Pool;

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    await receiver.start();
    for (const ctx of ctxs) {
      replicas.push(
        await startWebhooks(
          testWebhooksConfig(db.url, tb.prefix, { concurrency: 3, policy: { retryScheduleMs: [0, 100], timeoutMs: 5000, disableAfterMs: 60_000, secretGraceMs: 60_000, claimLeaseMs: LEASE_MS } }),
          ctx,
          { bus: tb.bus },
        ),
      );
    }
    sql = new pg.Pool({ connectionString: db.url, options: '-c search_path=webhooks', max: 2 });
  });
  afterAll(async () => {
    await sql.end();
    for (const ctx of ctxs) await ctx.stop();
    await receiver.stop();
    await tb.cleanup();
    await db.drop();
  });

  const attemptsLogged = (i: number) => (ctxs[i].logger as unknown as { lines: string[] }).lines.filter((l) => l.includes('"msg":"webhook attempt"')).length;

  it('share the work and send every delivery exactly once', async () => {
    const org = randomUUID();
    const { endpoint } = await replicas[0].endpoints.create({ organizationId: org, url: receiver.url('/shared'), events: ['cascade.recipient.finished'], description: '' });
    receiver.reply = () => ({ status: 200 });
    const ids: string[] = [];
    for (let index = 0; index < 40; index++) {
      const event: eventsV1.Event = {
        id: randomUUID(), type: 'cascade.recipient.finished', organizationId: org, occurredAt: new Date(),
        payload: { $case: 'cascadeRecipientFinished', cascadeRecipientFinished: { cascadeId: `c${index}`, cascadeExternalId: '', recipient: undefined, rating: 3, feedback: '', reason: 'rated', steps: [], finishedAt: undefined, reviewRequestId: '', locationId: '' } },
      };
      ids.push(event.id);
      await tb.bus.publish(eventSubject(event.type), eventsV1.Event.encode(event).finish());
    }
    await waitFor(async () => {
      const { rows } = await sql.query(`SELECT count(*)::int AS n FROM deliveries WHERE endpoint_id = $1 AND status = 'delivered'`, [endpoint.id]);
      return rows[0].n === ids.length;
    }, { what: 'all delivered' });
    const got = receiver.at('/shared').map((r) => r.headers['webhook-id']);
    expect(got.sort()).toEqual([...ids].sort());
    expect(attemptsLogged(0) + attemptsLogged(1)).toBe(ids.length);
    expect(attemptsLogged(0)).toBeGreaterThan(0);
    expect(attemptsLogged(1)).toBeGreaterThan(0);
  });

  it('wake on a delivery queued elsewhere in the database at once', async () => {
    const org = randomUUID();
    const { endpoint } = await replicas[1].endpoints.create({ organizationId: org, url: receiver.url('/woken'), events: ['cascade.recipient.finished'], description: '' });
    receiver.reply = () => ({ status: 200 });
    // Both workers are idle now (nothing pending), sleeping up to their 30 s bound.
    await new Promise((r) => setTimeout(r, 200));
    const queuedAt = Date.now();
    const eventId = await queueDeliveryElsewhere(sql, { endpointId: endpoint.id, organizationId: org });
    const [got] = await waitFor(() => receiver.at('/woken').length === 1 && receiver.at('/woken'), { what: 'woken delivery', timeoutMs: 5_000 });
    expect(got.headers['webhook-id']).toBe(eventId);
    expect(got.at - queuedAt).toBeLessThan(2_000);
  });

  it('keep an attempt that outlasts its claim lease: the lease is renewed while it runs, so the other replica never sends it too', async () => {
    const org = randomUUID();
    const { endpoint } = await replicas[0].endpoints.create({ organizationId: org, url: receiver.url('/slow'), events: ['cascade.recipient.finished'], description: '' });
    receiver.reply = () => ({ hang: true });
    const eventId = await queueDeliveryElsewhere(sql, { endpointId: endpoint.id, organizationId: org });
    await waitFor(() => receiver.at('/slow').length === 1, { what: 'attempt in flight' });
    const { rows: claimed } = await sql.query(`SELECT next_attempt_at FROM deliveries WHERE endpoint_id = $1`, [endpoint.id]);
    // Renewed until the lease has moved three leases past the claim's: the attempt has outlived the first lease twice over.
    await waitFor(async () => {
      const { rows } = await sql.query(`SELECT next_attempt_at > $2::timestamptz + make_interval(secs => $3 / 1000.0) AS renewed FROM deliveries WHERE endpoint_id = $1`, [endpoint.id, claimed[0].next_attempt_at, 2 * LEASE_MS]);
      return rows[0].renewed;
    }, { what: 'lease renewed past two leases', timeoutMs: 4_000 });
    expect(receiver.at('/slow')).toHaveLength(1);
    expect(receiver.answerHanging({ status: 200 })).toBe(1);
    await waitFor(async () => {
      const { rows } = await sql.query(`SELECT status FROM deliveries WHERE endpoint_id = $1`, [endpoint.id]);
      return rows[0].status === 'delivered';
    }, { what: 'delivered' });
    expect(receiver.at('/slow').map((r) => r.headers['webhook-id'])).toEqual([eventId]);
    const { rows } = await sql.query(`SELECT a.number, a.outcome FROM attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1`, [endpoint.id]);
    expect(rows).toEqual([{ number: 1, outcome: 'delivered' }]);
  });
});
