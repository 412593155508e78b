import { startContacts, type RunningContacts } from '@rrs/contacts';
import { startScheduler, type RunningScheduler } from '@rrs/cascade-scheduler';
import { busV1, connectorsV1, eventsV1 } from '@rrs/proto';
import { createGrpcClient, createPool, generateSecretKey, type Pool, type PromiseClient } from '@rrs/runtime';
import { createTestBus, createTestDatabase, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startScriptedSender } from '../../../cascade-scheduler/test/harness';
import { DEFAULT_CONNECTOR_POLICY, startConnectors, type AmoCrmOAuthApp, type ConnectorPolicy, type RunningConnectors } from '../../src';

/** Fast retries and a long sync interval (a sync runs at creation and on RunSync only). */
export const TEST_POLICY: ConnectorPolicy = {
  ...DEFAULT_CONNECTOR_POLICY,
  syncIntervalMs: 3_600_000,
  syncOverlapMs: 60_000,
  retryBaseMs: 100,
  retryMaxMs: 500,
  maxAttempts: 4,
  leaseMs: 10_000,
  maxRateWaitMs: 4_000,
};

export interface ConnectorStack {
  db: TestDatabase;
  tb: TestBus;
  contacts: RunningContacts;
  scheduler: RunningScheduler;
  running: RunningConnectors;
  grpc: PromiseClient<connectorsV1.ConnectorsServiceClient>;
  organizationId: string;
  otherOrganizationId: string;
  locationId: string;
  otherLocationId: string;
  flowId: string;
  /** The connectors service's schema and the scheduler's, for asserting what was (not) stored. */
  pool: Pool;
  schedulerPool: Pool;
  sender: Awaited<ReturnType<typeof startScriptedSender>>;
  /** Every integrator event on the bus, with its bytes (to redeliver one). */
  events: Array<{ event: eventsV1.Event; data: Uint8Array }>;
  secretKeys: Buffer[];
  /** POSTs a CRM webhook body to an inbound URL (form-encoded unless said otherwise). */
  hook(url: string, body: string, contentType?: string): Promise<{ status: number; body: Record<string, unknown> }>;
  /** Waits until the connector's inbox has nothing pending. */
  settled(connectorId: string): Promise<void>;
  /**
   * Waits for the connector's first reconciliation (run as soon as it is created) to end, well or not:
   * until then a deal a test wins may be found by that pass as well as by the test's webhook.
   */
  firstPass(connectorId: string): Promise<void>;
  cascadesOf(externalId: string): Promise<Array<{ id: string }>>;
  close(): Promise<void>;
}

/**
 * contacts + cascade-scheduler (fast clock) + connectors on a fresh database and JetStream prefix, with
 * a scripted sender answering every email and SMS step SENT. A paid organization with two locations and
 * a default flow (EMAIL, then SMS a day later), and a second organization.
 */
export async function startConnectorStack(options: { policy?: Partial<ConnectorPolicy>; redisUrl?: string; amoCrmOAuth?: AmoCrmOAuthApp } = {}): Promise<ConnectorStack> {
  const db = await createTestDatabase();
  const tb = await createTestBus('jetstream');
  await tb.bus.ensureStreams();
  const ctx = testContext('connectors-test');
  const contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
  const scheduler = await startScheduler(
    { databaseUrl: db.url, busPrefix: tb.prefix, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://reviews.test', minuteMs: 40, feedbackWindowMinutes: 50 },
    ctx,
    { bus: tb.bus, channelsCacheMs: 0 },
  );
  const secretKeys = [Buffer.from(generateSecretKey(), 'base64')];
  const running = await startConnectors(
    {
      databaseUrl: db.url, busPrefix: tb.prefix, grpcHost: '127.0.0.1', grpcPort: 0, hooksHost: '127.0.0.1', hooksPort: 0,
      contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`, publicBaseUrl: 'http://hooks.test',
      secretKeys, allowHttpCrm: true, redisUrl: options.redisUrl, policy: { ...TEST_POLICY, ...options.policy }, amoCrmOAuth: options.amoCrmOAuth,
    },
    ctx,
    { bus: tb.bus },
  );
  ctx.health.setReady(true);
  const org = await contacts.directory.createOrganization({ name: 'Coffee Co', plan: 'standard', emailConfirmed: true, locale: 'en', defaultRegion: 'RU', sendWindow: null, cooldownDays: 0 });
  const other = await contacts.directory.createOrganization({ name: 'Other', plan: 'standard', emailConfirmed: true, locale: 'ru', defaultRegion: 'RU', sendWindow: null, cooldownDays: 0 });
  for (const id of [org.id, other.id]) for (const channel of ['EMAIL', 'SMS']) await contacts.channels.set({ organizationId: id, channel, configured: true });
  const location = (name: string) => contacts.directory.createLocation({ organizationId: org.id, name, address: `${name} 1`, city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'google', url: 'https://g.example/r' }] });
  const locationId = (await location('Tverskaya')).id;
  const otherLocationId = (await location('Arbat')).id;
  const flowId = (await scheduler.flows.create({ organizationId: org.id, name: 'Email then SMS', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 1440 }] })).id;
  await scheduler.flows.create({ organizationId: other.id, name: 'Email', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] });
  const sender = await startScriptedSender(tb.bus, ['EMAIL', 'SMS']);
  const events: ConnectorStack['events'] = [];
  const eventsSub = await tb.bus.consume({ stream: 'EVENTS', durable: 'test-connector-events', filterSubject: 'events.>', concurrency: 8 }, async (msg) => {
    events.push({ event: eventsV1.Event.decode(msg.data), data: msg.data });
    msg.ack();
  });
  const grpc = createGrpcClient(connectorsV1.ConnectorsServiceClient, `127.0.0.1:${running.grpcPort}`);
  const pool = createPool({ url: db.url, schema: 'connectors' });
  const schedulerPool = createPool({ url: db.url, schema: 'scheduler' });
  const hooksBase = `http://127.0.0.1:${running.hooksPort}`;
  return {
    db, tb, contacts, scheduler, running, grpc: grpc.client, organizationId: org.id, otherOrganizationId: other.id, locationId, otherLocationId, flowId, pool, schedulerPool, sender, events, secretKeys,
    async hook(url, body, contentType = 'application/x-www-form-urlencoded') {
      const res = await fetch(url.replace('http://hooks.test', hooksBase), { method: 'POST', headers: { 'content-type': contentType }, body });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    },
    async settled(connectorId) {
      await waitFor(async () => {
        const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM crm_events WHERE connector_id = $1 AND status = 'pending'`, [connectorId]);
        return rows[0].n === 0;
      }, { what: 'the inbox to settle', timeoutMs: 20_000 });
    },
    async firstPass(connectorId) {
      await waitFor(async () => {
        const { rows } = await pool.query('SELECT 1 FROM connectors WHERE id = $1 AND (last_sync_at IS NOT NULL OR last_error_at IS NOT NULL)', [connectorId]);
        return rows.length === 1;
      }, { what: "the connector's first reconciliation", timeoutMs: 20_000 });
    },
    async cascadesOf(externalId) {
      return (await schedulerPool.query<{ id: string }>('SELECT id FROM cascades WHERE external_id = $1', [externalId])).rows;
    },
    async close() {
      await eventsSub.drain();
      await sender.stop();
      grpc.close();
      await pool.end();
      await schedulerPool.end();
      await ctx.stop();
      await tb.cleanup();
      await db.drop();
    },
  };
}

/** The review token of the first step the sender received for a cascade. */
export async function reviewTokenOf(stack: ConnectorStack, cascadeId: string): Promise<string> {
  const step = await waitFor(() => stack.sender.received.find((s: busV1.StepDue) => s.cascadeId === cascadeId), { what: `a step of cascade ${cascadeId} at the sender`, timeoutMs: 20_000 });
  return step.reviewUrl.split('/r/')[1];
}
