import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { createGrpcClient, type GrpcClientHandle } from '@rrs/runtime';
import { eventsV1, eventSubject, webhooksV1 } from '@rrs/proto';
import { createTestBus, createTestDatabase, historyScans, recordStatements, testContext, waitFor, type StatementRecorder, type TestBus, type TestDatabase } from '@rrs/testkit';
import { SCHEMA, startWebhooks, type RunningWebhooks } from '../src';
import { Receiver } from './support/receiver';
import { testWebhooksConfig } from './support/service';

/**
 * Costs that do not grow with history (issue 35): every statement the webhooks service ran while serving
 * the API and the console (endpoints, an event's intake and delivery with retries, a test event, the
 * delivery log the console pages through, a redelivery, a rotated secret, an endpoint disabled for
 * failing, a deleted one) is EXPLAINed on a database seeded with a year of deliveries for many
 * organizations; none may read a history table whole.
 */
const HISTORY_TABLES = ['events', 'deliveries', 'attempts', 'idempotency_keys', 'endpoints', 'endpoint_secrets'];
const RETENTION_PURGE = /^\s*DELETE FROM (deliveries|events) WHERE id = ANY \(ARRAY\(/;
const ORGANIZATIONS = 200;
const SEEDED = 150_000;

describe('history plans: no statement webhooks runs for the API or the console reads a history table whole', () => {
  let db: TestDatabase;
  let tb: TestBus;
  const ctx = testContext('webhooks-plans');
  let grpc: GrpcClientHandle<webhooksV1.WebhooksServiceClient>;
  let recorder: StatementRecorder;
  const receiver = new Receiver();

  beforeAll(async () => {
    recorder = recordStatements();
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    await receiver.start();
    const svc: RunningWebhooks = await startWebhooks(
      testWebhooksConfig(db.url, tb.prefix, { policy: { retryScheduleMs: [0, 50, 50], disableAfterMs: 1 } }),
      ctx,
      { bus: tb.bus },
    );
    ctx.health.setReady(true);
    grpc = createGrpcClient(webhooksV1.WebhooksServiceClient, `127.0.0.1:${svc.grpcPort}`);
    recorder.start();
  });
  afterAll(async () => {
    recorder.restore();
    grpc.close();
    await ctx.stop();
    await receiver.stop();
    await tb.cleanup();
    await db.drop();
  });

  const finished = (organizationId: string): eventsV1.Event => ({
    id: randomUUID(),
    type: 'cascade.recipient.finished',
    organizationId,
    occurredAt: new Date(),
    payload: {
      $case: 'cascadeRecipientFinished',
      cascadeRecipientFinished: {
        cascadeId: 'c-1', cascadeExternalId: 'crm-42', recipient: { id: 'r-1', name: 'Anna', email: 'anna@example.com', phone: '', contactExternalId: 'cust-7' },
        rating: 5, feedback: 'Great', reason: 'rated', steps: [], finishedAt: new Date(), reviewRequestId: '', locationId: 'loc-1',
      },
    },
  });

  /** A year of settled deliveries over many organizations, two endpoints each, an attempt per delivery. */
  async function seedHistory(): Promise<void> {
    const sql = new pg.Client({ connectionString: db.url, options: `-c search_path=${SCHEMA}` });
    await sql.connect();
    try {
      await sql.query(`INSERT INTO endpoints (id, organization_id, url, events, created_at)
                       SELECT gen_random_uuid(), o, 'https://hooks.example.com/' || e, '{cascade.recipient.finished}', now() - interval '1 year'
                         FROM (SELECT gen_random_uuid() AS o FROM generate_series(1, ${ORGANIZATIONS})) orgs, generate_series(1, 2) e`);
      await sql.query(`INSERT INTO endpoint_secrets (id, endpoint_id, secret, created_at, expires_at)
                       SELECT gen_random_uuid(), id, 'sealed', created_at, created_at + interval '1 day' FROM endpoints, generate_series(1, 5)`);
      await sql.query(`
        WITH ep AS (SELECT id, organization_id, row_number() OVER () - 1 AS n, count(*) OVER () AS total FROM endpoints),
        ev AS (
          INSERT INTO events (id, type, organization_id, occurred_at, payload, body, received_at)
          SELECT 'seed-' || g, 'cascade.recipient.finished', ep.organization_id, now() - interval '1 year' + g * (interval '1 year' / ${SEEDED}), '{}', '{}',
                 now() - interval '1 year' + g * (interval '1 year' / ${SEEDED})
            FROM generate_series(1, ${SEEDED}) g JOIN ep ON ep.n = g % ep.total RETURNING id, organization_id, occurred_at),
        d AS (
          INSERT INTO deliveries (id, event_id, endpoint_id, organization_id, status, attempt_count, created_at, updated_at)
          SELECT gen_random_uuid(), ev.id, ep.id, ev.organization_id, CASE WHEN random() < 0.05 THEN 'failed' ELSE 'delivered' END, 1, ev.occurred_at, ev.occurred_at
            FROM ev JOIN ep ON ep.organization_id = ev.organization_id RETURNING id, created_at)
        INSERT INTO attempts (delivery_id, number, started_at, duration_ms, status_code, outcome)
        SELECT id, 1, created_at, 120, 200, 'delivered' FROM d`);
      await sql.query(`INSERT INTO idempotency_keys (organization_id, key, fingerprint, response, created_at, expires_at)
                       SELECT organization_id, 'seed-' || id, 'f', '\\x00', created_at, created_at + interval '1 day' FROM deliveries`);
      await sql.query('ANALYZE');
    } finally {
      await sql.end();
    }
  }

  it('every statement recorded while serving reads history through an index', async () => {
    const api = grpc.client;
    const org = randomUUID();
    const types = ['cascade.recipient.finished'];
    const { endpoint } = await api.createEndpoint({ organizationId: org, plan: 'pro', url: receiver.url('/ok'), events: types, description: 'crm' }, { metadata: { 'idempotency-key': 'ep-1', 'idempotency-fingerprint': 'f-ep' } });
    const { endpoint: failing } = await api.createEndpoint({ organizationId: org, plan: 'pro', url: receiver.url('/down'), events: types, description: '' });
    receiver.reply = (request) => (request.path === '/down' ? { status: 500 } : { status: 200 });
    await api.listEndpoints({ organizationId: org });
    await api.getEndpoint({ organizationId: org, id: endpoint!.id });

    await tb.bus.publish(eventSubject('cascade.recipient.finished'), eventsV1.Event.encode(finished(org)).finish());
    const page = (endpointId: string, cursor = '') => api.listDeliveries({ organizationId: org, endpointId, limit: 1, cursor });
    await waitFor(async () => (await page(endpoint!.id)).deliveries[0]?.status === 'delivered', { what: 'the event delivered' });
    await waitFor(async () => (await api.getEndpoint({ organizationId: org, id: failing!.id })).endpoint?.disabled, { what: 'the failing endpoint disabled' });

    const { delivery: test } = await api.sendTestEvent({ organizationId: org, id: endpoint!.id });
    await waitFor(async () => (await page(endpoint!.id)).deliveries.find((d) => d.id === test!.id)?.status === 'delivered', { what: 'the test event delivered' });
    const first = await page(endpoint!.id);
    await page(endpoint!.id, first.nextCursor);
    await api.replayDelivery({ organizationId: org, endpointId: endpoint!.id, deliveryId: test!.id });
    await waitFor(async () => (await page(endpoint!.id)).deliveries.find((d) => d.id === test!.id)?.attemptCount === 2, { what: 'the redelivery' });
    await api.rotateSecret({ organizationId: org, id: endpoint!.id });
    await api.updateEndpoint({ organizationId: org, id: endpoint!.id, description: 'renamed', events: { types } });
    await api.updateEndpoint({ organizationId: org, id: failing!.id, events: undefined, disabled: false });
    await api.deleteEndpoint({ organizationId: org, id: failing!.id });
    expect(recorder.statements.size).toBeGreaterThan(20);

    recorder.stop();
    // The delivery log's retention purge (retention.ts) runs on its own timer; its plans are the retention
    // work's to check (issue 35), not a statement the API or the console runs.
    for (const text of recorder.statements.keys()) if (RETENTION_PURGE.test(text)) recorder.statements.delete(text);
    await seedHistory();
    expect(await historyScans(db.url, recorder.statements, HISTORY_TABLES, { searchPath: SCHEMA })).toEqual([]);
  });
});
