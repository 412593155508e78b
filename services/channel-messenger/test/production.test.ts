import { waitFor } from '@rrs/testkit';
import { startMessengerStack, type MessengerStack } from './realStack';

const MAX_INSTANCE = '5505';

/**
 * "Production never pretends" for the messengers (docs/channels.md, "The sink and production"): with a MAX
 * working account and no TELEGRAM one, as production configures it (no MESSENGER_SINK: `sink: []`),
 * TELEGRAM is in the catalog unavailable (`account_missing`), never a sink that records and says
 * "sent"; MAX announces its account as its provider, `open` while the account is blocked.
 */
describe('channel-messenger with one working account, as in production', () => {
  let stack: MessengerStack;

  beforeAll(async () => {
    stack = await startMessengerStack({ name: 'messenger-production', accounts: { max: { idInstance: MAX_INSTANCE } }, sink: [] });
  });
  afterAll(() => stack.stop());

  it('announces TELEGRAM unavailable for want of an account, and MAX with its account as provider', async () => {
    expect(await stack.catalogEntry('TELEGRAM')).toMatchObject({ unavailable: true, unavailableReason: 'account_missing', providers: [] });
    expect(await stack.catalogEntry('MAX')).toMatchObject({ providers: [expect.objectContaining({ name: 'max', state: 'closed' })] });
    expect(stack.messenger.outbox.list().length).toBe(0);
  });

  it('a TELEGRAM step is never sent to a sink: it does not go out, and no provider is called', async () => {
    const org = await stack.organization('production');
    const { result } = await stack.scheduler.cascades.start({ organizationId: org.id, locationId: org.locationId, name: '', flowId: '', channel: 'TELEGRAM', externalId: '', recipients: [{ name: 'Анна', email: '', phone: '+79995550101', contactId: '', contactExternalId: '' }] });
    const step = await waitForStep(stack, org.id, result.id);
    expect(step.status).not.toBe('sent');
    expect(stack.gateway.messages.filter((m) => m.chatId === '79995550101@c.us')).toEqual([]);
    expect(stack.messenger.outbox.list().length).toBe(0);
  });

  it('a blocked MAX account shows its provider open, with the reason', async () => {
    stack.gateway.setState(MAX_INSTANCE, 'blocked');
    await stack.messenger.health.MAX!.check();
    expect(await stack.catalogEntry('MAX')).toMatchObject({ unavailable: true, providers: [expect.objectContaining({ name: 'max', state: 'open', lastFailureCode: 'account_blocked' })] });
  });
});

function waitForStep(stack: MessengerStack, organizationId: string, cascadeId: string) {
  return waitFor(async () => {
    const step = (await stack.scheduler.cascades.get(organizationId, cascadeId)).recipients[0].steps[0];
    return ['failed', 'skipped', 'canceled', 'sent'].includes(step.status) ? step : undefined;
  }, { what: 'the TELEGRAM step settled' });
}
