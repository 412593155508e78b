import { startContacts, type RunningContacts } from '@rrs/contacts';
import { startScheduler, type RunningScheduler } from '@rrs/cascade-scheduler';
import { openChannelsBucket, readChannelCatalog } from '@rrs/sender-kit';
import { createTestBus, createTestDatabase, startFakeGreenApi, testContext, waitFor, type FakeGreenApi, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startMessengerSender, type MessengerAccount, type MessengerConfig } from '../src';

export interface MessengerStack {
  db: TestDatabase;
  tb: TestBus;
  contacts: RunningContacts;
  scheduler: RunningScheduler;
  gateway: FakeGreenApi;
  messenger: Awaited<ReturnType<typeof startMessengerSender>>;
  /** The channel's entry in the live catalog. */
  catalogEntry(key: string): Promise<Awaited<ReturnType<typeof readChannelCatalog>>[number] | undefined>;
  /** An organization with SMS, MAX and TELEGRAM configured, and one location. */
  organization(name: string): Promise<{ id: string; locationId: string }>;
  /** Starts a MAX cascade to one phone and waits for its step to be sent (on whichever channel). */
  sentStep(org: { id: string; locationId: string }, phone: string): Promise<{ cascadeId: string; step: Awaited<ReturnType<RunningScheduler['cascades']['get']>>['recipients'][number]['steps'][number] }>;
  stop(): Promise<void>;
}

/**
 * channel-messenger on the real stack (contacts, the scheduler with a fast clock, the in-memory bus, a
 * fresh database) against the GREEN-API fake, one working account per messenger (its state asked only at
 * start, look-ups cached). `prepare` runs on the fake before the messenger starts (e.g. an instance state
 * to find at start); `webhookPort` serves the webhook endpoint on a free loopback port.
 */
export async function startMessengerStack(options: {
  name: string;
  accounts: { max: { idInstance: string; webhookToken?: string }; telegram?: { idInstance: string; webhookToken?: string } };
  /** The messengers on the sink (MessengerConfig.sink); unset = every one without an account. */
  sink?: MessengerConfig['sink'];
  prepare?: (gateway: FakeGreenApi) => void;
  webhookPort?: boolean;
}): Promise<MessengerStack> {
  const ctx = testContext(options.name);
  const db = await createTestDatabase();
  const tb = await createTestBus('memory');
  const gateway = await startFakeGreenApi();
  options.prepare?.(gateway);
  const contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
  const scheduler = await startScheduler(
    { databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://reviews.test', minuteMs: 40 },
    ctx,
    { bus: tb.bus, channelsCacheMs: 0 },
  );
  const account = ({ idInstance, webhookToken }: { idInstance: string; webhookToken?: string }): MessengerAccount => ({
    apiUrl: gateway.url, idInstance, apiToken: gateway.token, timeoutMs: 2_000, perAccountPerSecond: 30, perChatPerSecond: 10, healthIntervalMs: 600_000, accountCacheMs: 600_000, webhookToken,
  });
  const messenger = await startMessengerSender(
    {
      databaseUrl: db.url, concurrency: 4, max: account(options.accounts.max), telegram: options.accounts.telegram && account(options.accounts.telegram), sink: options.sink,
      ...(options.webhookPort ? { bots: { webhookHost: '127.0.0.1', webhookPort: 0, schedulerAddress: '127.0.0.1:1' } } : {}),
    },
    ctx,
    { bus: tb.bus },
  );
  return {
    db, tb, contacts, scheduler, gateway, messenger,
    catalogEntry: async (key) => (await readChannelCatalog(await openChannelsBucket(tb.bus))).find((e) => e.key === key),
    async organization(name) {
      const org = await contacts.directory.createOrganization({ name, plan: 'standard', emailConfirmed: true, locale: 'ru', defaultRegion: 'RU', smsBalance: 0, sendWindow: null, cooldownDays: 0 });
      for (const channel of ['SMS', 'MAX', 'TELEGRAM']) await contacts.channels.set({ organizationId: org.id, channel, configured: true });
      const location = await contacts.directory.createLocation({ organizationId: org.id, name: 'Кофейня', address: 'Тверская 1', city: 'Москва', timeZone: 'Europe/Moscow', reviewLinks: [] });
      return { id: org.id, locationId: location.id };
    },
    async sentStep(org, phone) {
      const { result } = await scheduler.cascades.start({ organizationId: org.id, locationId: org.locationId, name: '', flowId: '', channel: 'MAX', externalId: '', recipients: [{ name: 'Анна', email: '', phone, contactId: '', contactExternalId: '' }] });
      const step = await waitFor(async () => {
        const current = (await scheduler.cascades.get(org.id, result.id)).recipients[0].steps[0];
        return current.status === 'sent' ? current : undefined;
      }, { what: `step to ${phone} sent` });
      return { cascadeId: result.id, step };
    },
    async stop() {
      await ctx.stop();
      await gateway.close();
      await tb.cleanup();
      await db.drop();
    },
  };
}
