import { registry } from '@rrs/runtime';
import { testLogger, type FakeGreenApi } from '@rrs/testkit';
import { AccountHealth, accountDownReason, AccountLookupCache } from '../src';
import { startMessengerStack, type MessengerStack } from './realStack';

const MAX_INSTANCE = '3303';
const TELEGRAM_INSTANCE = '4404';

const availableGauge = async (channel: string) => (await registry.getSingleMetric('messenger_account_available')!.get()).values.find((v) => v.labels.channel === channel && v.labels.instance === (channel === 'MAX' ? MAX_INSTANCE : TELEGRAM_INSTANCE))?.value;

/**
 * Account health on the real stack (contacts, the scheduler, channel-messenger) against the GREEN-API fake:
 * a blocked MAX account is out of the catalog and its steps go to TELEGRAM without a call to the MAX
 * gateway; once authorized again, MAX is back. checkAccount answers are reused.
 */
describe('messenger account health', () => {
  let stack: MessengerStack;
  let gateway: FakeGreenApi;
  let messenger: MessengerStack['messenger'];

  beforeAll(async () => {
    stack = await startMessengerStack({
      name: 'messenger-health',
      accounts: { max: { idInstance: MAX_INSTANCE }, telegram: { idInstance: TELEGRAM_INSTANCE } },
      prepare: (fake) => fake.setState(MAX_INSTANCE, 'blocked'),
    });
    ({ gateway, messenger } = stack);
  });
  afterAll(() => stack.stop());

  const organization = () => stack.organization('health');
  const sentStep = async (org: { id: string; locationId: string }, phone: string) => (await stack.sentStep(org, phone)).step;
  const catalogEntry = (key: string) => stack.catalogEntry(key);

  it('a blocked account: MAX unavailable in the catalog with its reason, the alert gauge at 0, and MAX steps go to TELEGRAM (reroute reason account_unavailable) without calling the MAX gateway', async () => {
    expect(await catalogEntry('MAX')).toMatchObject({ unavailable: true, unavailableReason: 'account_blocked' });
    expect((await catalogEntry('TELEGRAM'))?.unavailable).toBeFalsy();
    expect(await availableGauge('MAX')).toBe(0);
    expect(await availableGauge('TELEGRAM')).toBe(1);

    const org = await organization();
    const step = await sentStep(org, '+79995550001');
    expect(step).toMatchObject({ sentChannel: 'TELEGRAM', reroutes: [{ fromChannel: 'MAX', toChannel: 'TELEGRAM', reason: 'account_unavailable' }] });
    expect(gateway.calls('sendMessage', MAX_INSTANCE)).toBe(0);
    expect(gateway.calls('checkAccount', MAX_INSTANCE)).toBe(0);
    expect(gateway.messages.filter((m) => m.chatId === '79995550001@c.us').map((m) => m.instance)).toEqual([TELEGRAM_INSTANCE]);
  });

  it('authorized again: MAX is back in the catalog at the next check and sends; the state is asked only at start and at each check', async () => {
    expect(gateway.calls('getStateInstance', MAX_INSTANCE)).toBe(1);
    gateway.setState(MAX_INSTANCE, 'authorized');
    await messenger.health.MAX!.check();
    expect(gateway.calls('getStateInstance', MAX_INSTANCE)).toBe(2);
    expect((await catalogEntry('MAX'))?.unavailable).toBeFalsy();
    expect(await availableGauge('MAX')).toBe(1);
    const org = await organization();
    await sentStep(org, '+79995550002');
    expect(gateway.messages.filter((m) => m.chatId === '79995550002@c.us').map((m) => [m.instance, m.where])).toEqual([[MAX_INSTANCE, 'journal']]);
  });

  it.each([
    ['notAuthorized', 'account_not_authorized'],
    ['suspended', 'account_suspended'],
    ['yellowCard', 'account_yellow_card'],
  ] as const)('takes MAX out for %s (%s); starting and sleepMode keep it', async (state, reason) => {
    gateway.setState(MAX_INSTANCE, state);
    await messenger.health.MAX!.check();
    expect(await catalogEntry('MAX')).toMatchObject({ unavailable: true, unavailableReason: reason });
    for (const passing of ['starting', 'sleepMode', 'authorized'] as const) {
      gateway.setState(MAX_INSTANCE, passing);
      await messenger.health.MAX!.check();
      expect((await catalogEntry('MAX'))?.unavailable).toBeFalsy();
    }
  });

  it('reuses checkAccount answers: a second step to the same number asks the gateway no more', async () => {
    const before = gateway.calls('checkAccount', MAX_INSTANCE);
    const org = await organization();
    await sentStep(org, '+79995550003');
    await sentStep(org, '+79995550003');
    expect(gateway.calls('checkAccount', MAX_INSTANCE) - before).toBe(1);
    expect(gateway.messages.filter((m) => m.chatId === '79995550003@c.us')).toHaveLength(2);
  });
});

describe('AccountHealth and AccountLookupCache', () => {
  it('keeps the last known state when the gateway can not be asked', async () => {
    const changes: boolean[] = [];
    const health = new AccountHealth({
      channel: 'TEST_DOWN', logger: testLogger(), intervalMs: 600_000, onChange: (usable) => void changes.push(usable),
      account: { apiUrl: 'http://127.0.0.1:9/v3', idInstance: '1', apiToken: 'token-123456', timeoutMs: 500, perAccountPerSecond: 1, perChatPerSecond: 1 },
    });
    await health.check();
    expect(health.usable).toEqual({ usable: true });
    expect(changes).toEqual([]);
  });

  it('names the reason after the state', () => {
    expect(accountDownReason('blocked')).toBe('account_blocked');
    expect(accountDownReason('pendingPassword')).toBe('account_pending_password');
  });

  it('reuses an answer until it expires (a number without an account for a tenth of the time) and shares a look-up in flight', async () => {
    let now = 0;
    let calls = 0;
    const cache = new AccountLookupCache(1_000, 10, () => now);
    const lookup = (exist: boolean) => async () => {
      calls++;
      return { exist, chatId: 'c' };
    };
    await Promise.all([cache.get('1', lookup(true)), cache.get('1', lookup(true))]);
    expect(calls).toBe(1);
    now = 999;
    expect(await cache.get('1', lookup(true))).toMatchObject({ cached: true });
    now = 1_000;
    expect(await cache.get('1', lookup(true))).toMatchObject({ cached: false });
    await cache.get('2', lookup(false));
    now = 1_100;
    expect(await cache.get('2', lookup(false))).toMatchObject({ cached: false, exist: false });
    expect(calls).toBe(4);
  });
});
