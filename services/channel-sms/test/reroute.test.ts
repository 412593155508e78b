import { startContacts, type RunningContacts } from '@rrs/contacts';
import { startScheduler, type RunningScheduler } from '@rrs/cascade-scheduler';
import { startMessengerSender } from '@rrs/channel-messenger';
import { SinkOutbox } from '@rrs/sender-kit';
import { createTestBus, createTestDatabase, testContext, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startSmsSender } from '../src';

/**
 * The SMS balance is real (contacts' DebitSmsBalance over gRPC): with none left, the SMS sender reports
 * NO_BALANCE and the scheduler reroutes the step to MAX; with balance, one part is debited once.
 */
describe('SMS balance: debit per step, reroute when empty', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let contacts: RunningContacts;
  let scheduler: RunningScheduler;
  const ctx = testContext('sms-reroute');
  const outbox = new SinkOutbox();

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    scheduler = await startScheduler(
      { databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://reviews.test', minuteMs: 40 },
      ctx,
      { bus: tb.bus, channelsCacheMs: 0 },
    );
    const senderConfig = { databaseUrl: db.url, concurrency: 4 };
    await startSmsSender({ ...senderConfig, contactsAddress: `127.0.0.1:${contacts.grpcPort}` }, ctx, { bus: tb.bus, outbox });
    await startMessengerSender(senderConfig, ctx, { bus: tb.bus, outbox });
  });
  afterAll(async () => {
    await ctx.stop();
    await tb.cleanup();
    await db.drop();
  });

  async function org(smsBalance: number) {
    const organization = await contacts.directory.createOrganization({ name: `org ${smsBalance}`, plan: 'standard', emailConfirmed: true, locale: 'ru', defaultRegion: 'RU', smsBalance, sendWindow: null, cooldownDays: 0 });
    for (const channel of ['SMS', 'MAX', 'TELEGRAM']) await contacts.channels.set({ organizationId: organization.id, channel, configured: true });
    const location = await contacts.directory.createLocation({ organizationId: organization.id, name: 'Кофейня', address: 'Тверская 1', city: 'Москва', timeZone: 'Europe/Moscow', reviewLinks: [] });
    return { id: organization.id, locationId: location.id };
  }
  const balanceOf = async (organizationId: string) => (await contacts.directory.getOrganization(organizationId)).smsBalance;

  it('sends the SMS and debits one part when there is balance', async () => {
    const organization = await org(5);
    const { result } = await scheduler.cascades.start({ organizationId: organization.id, locationId: organization.locationId, name: '', flowId: '', channel: 'SMS', externalId: '', recipients: [{ name: 'Анна', email: '', phone: '+79161110001', contactId: '', contactExternalId: '' }] });
    const msg = await waitFor(() => outbox.list().find((m) => m.to === '+79161110001'), { what: 'the SMS' });
    expect(msg.channel).toBe('SMS');
    expect(await balanceOf(organization.id)).toBe(4);
    const cascade = await waitFor(async () => {
      const cascadeNow = await scheduler.cascades.get(organization.id, result.id);
      return cascadeNow.recipients[0].steps[0].status === 'sent' ? cascadeNow : undefined;
    }, { what: 'step sent' });
    expect(cascade.recipients[0].steps[0].channel).toBe('SMS');
  });

  it('reports no_balance with an empty balance, and the step is rerouted to MAX', async () => {
    const organization = await org(0);
    const { result } = await scheduler.cascades.start({ organizationId: organization.id, locationId: organization.locationId, name: '', flowId: '', channel: 'SMS', externalId: '', recipients: [{ name: 'Борис', email: '', phone: '+79161110002', contactId: '', contactExternalId: '' }] });
    const msg = await waitFor(() => outbox.list().find((m) => m.to === '+79161110002'), { what: 'the rerouted message' });
    expect(msg.channel).toBe('MAX');
    expect(msg.text.split('\n')[0]).toBe('Кофейня');
    expect(outbox.list().filter((m) => m.to === '+79161110002' && m.channel === 'SMS')).toHaveLength(0);
    expect(await balanceOf(organization.id)).toBe(0);
    const step = await waitFor(async () => {
      const cascadeNow = await scheduler.cascades.get(organization.id, result.id);
      const firstStep = cascadeNow.recipients[0].steps[0];
      return firstStep.status === 'sent' ? firstStep : undefined;
    }, { what: 'rerouted step sent' });
    expect(JSON.stringify(step)).toContain('no_balance');
  });
});
