import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { eventsV1, eventSubject } from '@rrs/proto';
import { createTestBus, createTestDatabase, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startWebhooks, type RunningWebhooks } from '../src';
import { Receiver } from './support/receiver';
import { queueDeliveryElsewhere, testWebhooksConfig } from './support/service';

/**
 * The delivery worker of one replica: no more attempts in flight than its concurrency, the next one
 * started as soon as a slot frees (not after an idle wait), a shutdown that waits for the attempts in
 * flight and records them, and a LISTEN connection that comes back after it was lost.
 */
interface Replica {
  db: TestDatabase;
  tb: TestBus;
  ctx: ReturnType<typeof testContext>;
  webhooks: RunningWebhooks;
  sql: pg.Pool;
  stop(): Promise<void>;
}

async function startReplica(concurrency: number): Promise<Replica> {
  const db = await createTestDatabase();
  const tb = await createTestBus('memory');
  const ctx = testContext('webhooks-worker');
  const webhooks = await startWebhooks(
    // Attempts never time out here: the receiver answers when the test says so.
    testWebhooksConfig(db.url, tb.prefix, { concurrency, policy: { retryScheduleMs: [0, 100], timeoutMs: 20_000 } }),
    ctx,
    { bus: tb.bus },
  );
  const sql = new pg.Pool({ connectionString: db.url, options: '-c search_path=webhooks', max: 2 });
  return {
    db, tb, ctx, webhooks, sql,
    async stop() {
      await sql.end();
      await ctx.stop();
      await tb.cleanup();
      await db.drop();
    },
  };
}

const finished = (organizationId: string): eventsV1.Event => ({
  id: randomUUID(), type: 'cascade.recipient.finished', organizationId, occurredAt: new Date(),
  payload: { $case: 'cascadeRecipientFinished', cascadeRecipientFinished: { cascadeId: 'c', cascadeExternalId: '', recipient: undefined, rating: 5, feedback: '', reason: 'rated', steps: [], finishedAt: undefined, reviewRequestId: '', locationId: '' } },
});

describe('webhook delivery worker', () => {
  const receiver = new Receiver();
  beforeAll(() => receiver.start());
  afterAll(() => receiver.stop());

  it('keeps at most its concurrency of attempts in flight and takes the next as soon as a slot frees', async () => {
    const replica = await startReplica(2);
    try {
      const org = randomUUID();
      const { endpoint } = await replica.webhooks.endpoints.create({ organizationId: org, url: receiver.url('/slots'), events: ['cascade.recipient.finished'], description: '' });
      receiver.reply = () => ({ hang: true });
      for (let i = 0; i < 5; i++) await replica.tb.bus.publish(eventSubject('cascade.recipient.finished'), eventsV1.Event.encode(finished(org)).finish());
      await waitFor(() => receiver.at('/slots').length === 2, { what: 'two attempts in flight' });
      await waitFor(async () => (await replica.sql.query(`SELECT count(*)::int AS n FROM deliveries WHERE endpoint_id = $1`, [endpoint.id])).rows[0].n === 5, { what: 'five deliveries queued' });
      await new Promise((r) => setTimeout(r, 300));
      expect(receiver.at('/slots')).toHaveLength(2);

      // Far sooner than the worker's 30 s idle bound: a finished attempt frees its slot at once.
      receiver.reply = () => ({ status: 200 });
      expect(receiver.answerHanging({ status: 200 })).toBe(2);
      await waitFor(async () => (await replica.sql.query(`SELECT count(*)::int AS n FROM deliveries WHERE endpoint_id = $1 AND status = 'delivered'`, [endpoint.id])).rows[0].n === 5, { what: 'all delivered', timeoutMs: 10_000 });
      expect(new Set(receiver.at('/slots').map((r) => r.headers['webhook-id'])).size).toBe(5);
      expect(receiver.at('/slots')).toHaveLength(5);
    } finally {
      await replica.stop();
    }
  });

  it('stops claiming on shutdown but waits for the attempts in flight and records them', async () => {
    const replica = await startReplica(4);
    let stopped = false;
    try {
      const org = randomUUID();
      const { endpoint } = await replica.webhooks.endpoints.create({ organizationId: org, url: receiver.url('/shutdown'), events: ['cascade.recipient.finished'], description: '' });
      receiver.reply = () => ({ hang: true });
      await replica.tb.bus.publish(eventSubject('cascade.recipient.finished'), eventsV1.Event.encode(finished(org)).finish());
      await waitFor(() => receiver.at('/shutdown').length === 1, { what: 'an attempt in flight' });

      const stopping = replica.webhooks.worker.stop().then(() => (stopped = true));
      await new Promise((r) => setTimeout(r, 300));
      expect(stopped).toBe(false);
      receiver.answerHanging({ status: 200 });
      await stopping;
      const { rows } = await replica.sql.query(`SELECT d.status, a.number, a.status_code, a.outcome FROM deliveries d JOIN attempts a ON a.delivery_id = d.id WHERE d.endpoint_id = $1`, [endpoint.id]);
      expect(rows).toEqual([{ status: 'delivered', number: 1, status_code: 200, outcome: 'delivered' }]);

      // Stopped: a delivery queued now waits for the next worker.
      await replica.webhooks.endpoints.sendTestEvent(org, endpoint.id);
      await new Promise((r) => setTimeout(r, 300));
      expect(receiver.at('/shutdown')).toHaveLength(1);
    } finally {
      await replica.stop();
    }
  });

  it('hears deliveries queued elsewhere again after its LISTEN connection was lost', async () => {
    const replica = await startReplica(2);
    try {
      const org = randomUUID();
      const { endpoint } = await replica.webhooks.endpoints.create({ organizationId: org, url: receiver.url('/relisten'), events: ['cascade.recipient.finished'], description: '' });
      receiver.reply = () => ({ status: 200 });
      const listeners = `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN webhook_deliveries_due'`;
      const [lost] = (await waitFor(async () => (await replica.sql.query<{ pid: number }>(listeners)).rows.length === 1 && (await replica.sql.query<{ pid: number }>(listeners)).rows, { what: 'the LISTEN connection' }));
      await replica.sql.query('SELECT pg_terminate_backend($1)', [lost.pid]);
      await waitFor(async () => {
        const { rows } = await replica.sql.query<{ pid: number }>(listeners);
        return rows.length === 1 && rows[0].pid !== lost.pid;
      }, { what: 'a new LISTEN connection', timeoutMs: 10_000 });
      // Let the round the reconnection starts finish, so the worker is asleep on its idle bound again.
      await new Promise((r) => setTimeout(r, 200));

      const queuedAt = Date.now();
      const eventId = await queueDeliveryElsewhere(replica.sql, { endpointId: endpoint.id, organizationId: org });
      const [got] = await waitFor(() => receiver.at('/relisten').length === 1 && receiver.at('/relisten'), { what: 'the delivery heard through the new connection', timeoutMs: 5_000 });
      expect(got.headers['webhook-id']).toBe(eventId);
      expect(got.at - queuedAt).toBeLessThan(2_000);
    } finally {
      await replica.stop();
    }
  });
});
