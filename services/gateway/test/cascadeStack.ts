import { startContacts, type RunningContacts } from '@rrs/contacts';
import { startScheduler, type RunningScheduler, type SchedulerStartConfig } from '@rrs/cascade-scheduler';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, testContext, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startGateway, type GatewayStartConfig } from '../src';
import { startScriptedSender } from '../../cascade-scheduler/test/harness';

export type OrgKind = 'paid' | 'other' | 'trial' | 'unconfirmed';

const entry = (key: string, contactField: string, position: number) => ({ key, slug: key.toLowerCase(), label: key, contactField, capabilities: ['send'], sender: 'scripted', announcedAt: new Date(), providers: [], position });
/** The channels of the scripted sender, as the send endpoints see them (no sender announces them here). */
const SCRIPTED_CATALOG = { list: () => [entry('EMAIL', 'email', 1), entry('SMS', 'phone', 2)], version: 1 };

/** The admin API's token (`/admin/v1`) in this stack. */
export const STACK_ADMIN_TOKEN = 'adm_cascade_stack_token_0123456789';

export interface CascadeStack {
  base: string;
  /** Every gateway replica's base (the first is `base`); they share Redis when the stack's gateway config gives one. */
  bases: string[];
  keys: Record<OrgKind, string>;
  orgIds: Record<OrgKind, string>;
  locationId: string;
  flowId: string;
  contacts: RunningContacts;
  scheduler: RunningScheduler;
  /** The scheduler's schema, for asserting what was (not) stored. */
  pool: Pool;
  sender: Awaited<ReturnType<typeof startScriptedSender>>;
  close(): Promise<void>;
}

/**
 * Gateway → contacts + cascade-scheduler (fast clock) on a fresh database and JetStream prefix, with a
 * scripted sender answering every step SENT. Organizations: a paid one with a location and a default
 * flow (EMAIL, then SMS 1440 flow minutes later), another paid one, a trial one and an unconfirmed one.
 */
export async function startCascadeStack(options: { locale?: 'ru' | 'en'; gateway?: Partial<GatewayStartConfig>; scheduler?: Partial<SchedulerStartConfig>; replicas?: number } = {}): Promise<CascadeStack> {
  const db: TestDatabase = await createTestDatabase();
  const tb: TestBus = await createTestBus('jetstream');
  await tb.bus.ensureStreams();
  const ctx = testContext('gateway-cascades');
  const contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
  const gatewayPort = 0;
  const scheduler = await startScheduler(
    { databaseUrl: db.url, busPrefix: tb.prefix, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://reviews.test', minuteMs: 40, ...options.scheduler },
    ctx,
    { bus: tb.bus, channelsCacheMs: 0 },
  );
  const gatewayConfig = { host: '127.0.0.1', port: gatewayPort, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`, publicBaseUrl: 'http://reviews.test', adminTokens: [STACK_ADMIN_TOKEN], ...options.gateway };
  const replicas = [];
  for (let i = 0; i < (options.replicas ?? 1); i++) replicas.push(await startGateway(gatewayConfig, ctx, { channelCatalog: SCRIPTED_CATALOG }));
  const gateway = replicas[0];
  ctx.health.setReady(true);
  const setups = { paid: { plan: 'standard', emailConfirmed: true }, other: { plan: 'pro', emailConfirmed: true }, trial: { plan: 'trial', emailConfirmed: true }, unconfirmed: { plan: 'standard', emailConfirmed: false } } as const;
  const keys = {} as Record<OrgKind, string>;
  const orgIds = {} as Record<OrgKind, string>;
  for (const [k, s] of Object.entries(setups) as Array<[OrgKind, (typeof setups)[OrgKind]]>) {
    const org = await contacts.directory.createOrganization({ name: k === 'paid' ? 'Coffee Co' : k, ...s, locale: options.locale ?? 'en', defaultRegion: 'RU', sendWindow: null, cooldownDays: 0 });
    orgIds[k] = org.id;
    keys[k] = (await contacts.directory.issueApiKey({ organizationId: org.id })).secret;
    for (const channel of ['EMAIL', 'SMS']) await contacts.channels.set({ organizationId: org.id, channel, configured: true });
  }
  const locationId = (await contacts.directory.createLocation({ organizationId: orgIds.paid, name: 'Tverskaya', address: 'Tverskaya 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'google', url: 'https://g.example/r' }] })).id;
  const flowId = (await scheduler.flows.create({ organizationId: orgIds.paid, name: 'Email then SMS', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 1440 }] })).id;
  const sender = await startScriptedSender(tb.bus, ['EMAIL', 'SMS']);
  const pool = createPool({ url: db.url, schema: 'scheduler' });
  return {
    base: gateway.url, bases: replicas.map((r) => r.url), keys, orgIds, locationId, flowId, contacts, scheduler, pool, sender,
    async close() {
      await sender.stop();
      await pool.end();
      await ctx.stop();
      await tb.cleanup();
      await db.drop();
    },
  };
}
