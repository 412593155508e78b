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
          testWebhooksConfig(db.url, tb.prefix, { concurrency: 3, policy: { retryScheduleMs: [0, 100], timeoutMs: 2000, disableAfterMs: 60_000, secretGraceMs: 60_000 } }),
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
});
