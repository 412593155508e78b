import { registry } from '@rrs/runtime';
import { waitFor, type FakeGreenApi } from '@rrs/testkit';
import { mapGreenApiStatus } from '../src';
import { startMessengerStack, type MessengerStack } from './realStack';

const MAX_INSTANCE = '5505';
const TELEGRAM_INSTANCE = '6606';
const MAX_WEBHOOK_TOKEN = 'max-receipts-token-0123456789';

const receiptsCounted = async (result: string) =>
  (await registry.getSingleMetric('sender_receipts_total')!.get()).values.find((v) => v.labels.channel === 'MAX' && v.labels.provider === 'greenapi' && v.labels.result === result)?.value ?? 0;

/**
 * GREEN-API delivery receipts on the real stack (contacts, the scheduler, channel-messenger) against the
 * GREEN-API fake, which posts `outgoingMessageStatus` webhooks with `Authorization: Bearer <webhookUrlToken>`
 * to `/receipts/greenapi/max` on the messenger's webhook port: the receipt lands on the cascade's step.
 */
describe('GREEN-API delivery receipts', () => {
  let stack: MessengerStack;
  let gateway: FakeGreenApi;
  let scheduler: MessengerStack['scheduler'];
  let receiptsUrl: string;
  let org: { id: string; locationId: string };

  beforeAll(async () => {
    stack = await startMessengerStack({
      name: 'messenger-receipts',
      accounts: { max: { idInstance: MAX_INSTANCE, webhookToken: MAX_WEBHOOK_TOKEN }, telegram: { idInstance: TELEGRAM_INSTANCE } },
      webhookPort: true,
    });
    ({ gateway, scheduler } = stack);
    receiptsUrl = `http://127.0.0.1:${stack.messenger.botWebhookPort}/receipts/greenapi/max`;
    // What the operator does once (docs/channels.md): point the MAX instance's webhooks at the endpoint.
    const settings = await fetch(`${gateway.url}/waInstance${MAX_INSTANCE}/setSettings/${gateway.token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ webhookUrl: receiptsUrl, webhookUrlToken: MAX_WEBHOOK_TOKEN, outgoingWebhook: 'yes', outgoingAPIMessageWebhook: 'yes' }),
    });
    expect(await settings.json()).toEqual({ saveSettings: true });
    org = await stack.organization('receipts');
  });
  afterAll(() => stack.stop());

  /** A MAX cascade to one phone, once its step is sent: the cascade id and the GREEN-API message id. */
  async function sentMaxStep(phone: string) {
    const { cascadeId } = await stack.sentStep(org, phone);
    const message = gateway.messages.find((m) => m.chatId === `${phone.slice(1)}@c.us`);
    expect(message?.instance).toBe(MAX_INSTANCE);
    return { cascadeId, idMessage: message!.idMessage };
  }
  const cascade = (id: string) => scheduler.cascades.get(org.id, id);
  const countsOf = async (id: string) => Object.fromEntries((await cascade(id)).counts.map(({ key, value }) => [key, value]));
  const stepOf = async (id: string) => (await cascade(id)).recipients[0].steps[0];
  const post = (body: unknown, authorization?: string) =>
    fetch(receiptsUrl, { method: 'POST', headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) }, body: typeof body === 'string' ? body : JSON.stringify(body) });

  it('lists delivery_receipts for MAX, whose account has a webhook token, and not for TELEGRAM, whose account has none (its receipts path is 404)', async () => {
    expect((await stack.catalogEntry('MAX'))?.capabilities).toContain('delivery_receipts');
    expect((await stack.catalogEntry('TELEGRAM'))?.capabilities).not.toContain('delivery_receipts');
    const res = await fetch(`http://127.0.0.1:${stack.messenger.botWebhookPort}/receipts/greenapi/telegram`, { method: 'POST', headers: { authorization: `Bearer ${MAX_WEBHOOK_TOKEN}` }, body: '{}' });
    expect(res.status).toBe(404);
  });

  it('a `delivered` webhook marks the MAX step delivered at its timestamp (deliveredAt, counts.stepsDelivered); `sent` before it changes nothing, a redelivery and a later `read` keep the first time', async () => {
    const { cascadeId, idMessage } = await sentMaxStep('+79996660001');
    // The webhook's time (Unix seconds): the first whole second after the send, once it has passed.
    const timestamp = Math.floor((await stepOf(cascadeId)).sentAt!.getTime() / 1000) + 1;
    await waitFor(async () => (Date.now() > timestamp * 1000 + 50 ? true : undefined), { what: 'the webhook time passed' });
    expect(await gateway.reportStatus(idMessage, 'sent', { timestamp: timestamp - 1 })).toBe(200);
    expect(await gateway.reportStatus(idMessage, 'delivered', { timestamp })).toBe(200);
    const delivered = await waitFor(async () => (await stepOf(cascadeId)).deliveredAt, { what: 'deliveredAt' });
    expect(delivered).toEqual(new Date(timestamp * 1000));
    const before = await cascade(cascadeId);
    expect(await countsOf(cascadeId)).toMatchObject({ stepsDelivered: 1, stepsUndelivered: 0 });
    expect(before.recipients[0].steps[0].reason).toBe('');

    expect(await gateway.reportStatus(idMessage, 'delivered', { timestamp })).toBe(200);
    expect(await gateway.reportStatus(idMessage, 'read', { timestamp: timestamp + 1 })).toBe(200);
    // A receipt for another step, applied after these: once it shows, the redelivery and `read` were handled too.
    const other = await sentMaxStep('+79996660002');
    expect(await gateway.reportStatus(other.idMessage, 'read')).toBe(200);
    expect(await waitFor(async () => (await stepOf(other.cascadeId)).deliveredAt, { what: 'read marks delivered' })).toBeInstanceOf(Date);
    expect((await stepOf(cascadeId)).deliveredAt).toEqual(delivered);
    expect(await countsOf(cascadeId)).toMatchObject({ stepsDelivered: 1, stepsUndelivered: 0 });
  });

  it.each([
    ['failed', 'undelivered: failed', '+79996660003'],
    ['noAccount', 'undelivered: no_account', '+79996660004'],
  ] as const)('a `%s` webhook marks the step undelivered (%s) and counts it', async (status, reason, phone) => {
    const { cascadeId, idMessage } = await sentMaxStep(phone);
    expect(await gateway.reportStatus(idMessage, status, { description: 'the recipient has no MAX account' })).toBe(200);
    const step = await waitFor(async () => {
      const current = await stepOf(cascadeId);
      return current.reason ? current : undefined;
    }, { what: `${status} applied` });
    expect(step).toMatchObject({ status: 'sent', reason });
    expect(step.deliveredAt).toBeUndefined();
    expect(await countsOf(cascadeId)).toMatchObject({ stepsDelivered: 0, stepsUndelivered: 1 });
  });

  it('a wrong or missing token is 401 and applies nothing', async () => {
    const { cascadeId, idMessage } = await sentMaxStep('+79996660005');
    const refusedBefore = await receiptsCounted('bad_signature');
    expect(await gateway.reportStatus(idMessage, 'failed', { token: 'not-the-token-0123456789' })).toBe(401);
    expect(await gateway.reportStatus(idMessage, 'failed', { token: null })).toBe(401);
    expect((await post({ typeWebhook: 'outgoingMessageStatus', idMessage, status: 'failed' }, `Basic ${Buffer.from(`x:${MAX_WEBHOOK_TOKEN}`).toString('base64')}`)).status).toBe(401);
    expect((await post({ typeWebhook: 'outgoingMessageStatus', idMessage, status: 'failed' }, `Bearer ${MAX_WEBHOOK_TOKEN}x`)).status).toBe(401);
    expect(await receiptsCounted('bad_signature')).toBe(refusedBefore + 4);
    // The step's true receipt, sent after: had a refused one been applied, it would show beside it. Its
    // time, from a clock far behind, is kept at the send.
    expect(await gateway.reportStatus(idMessage, 'delivered', { timestamp: 1 })).toBe(200);
    expect(await waitFor(async () => (await stepOf(cascadeId)).deliveredAt, { what: 'deliveredAt' })).toEqual((await stepOf(cascadeId)).sentAt);
    expect((await stepOf(cascadeId)).reason).toBe('');
    expect(await countsOf(cascadeId)).toMatchObject({ stepsDelivered: 1, stepsUndelivered: 0 });
  });

  it('an unknown idMessage, another instance, or another kind of webhook is answered 200 and applies nothing; a body that is not a webhook is 400', async () => {
    const auth = `Bearer ${MAX_WEBHOOK_TOKEN}`;
    const unknownBefore = await receiptsCounted('unknown_message');
    const ignoredBefore = await receiptsCounted('not_final');
    expect((await post({ typeWebhook: 'outgoingMessageStatus', instanceData: { idInstance: Number(MAX_INSTANCE) }, timestamp: 1, idMessage: 'NOT-OURS-1', status: 'delivered' }, auth)).status).toBe(200);
    const { cascadeId, idMessage } = await sentMaxStep('+79996660006');
    expect((await post({ typeWebhook: 'outgoingMessageStatus', instanceData: { idInstance: 999 }, timestamp: 1, idMessage, status: 'failed' }, auth)).status).toBe(200);
    expect(await receiptsCounted('unknown_message')).toBe(unknownBefore + 2);
    expect((await post({ typeWebhook: 'incomingMessageReceived', instanceData: { idInstance: Number(MAX_INSTANCE) }, idMessage: 'IN-1', senderData: { chatId: '79996660006@c.us' } }, auth)).status).toBe(200);
    expect((await post({ typeWebhook: 'stateInstanceChanged', instanceData: { idInstance: Number(MAX_INSTANCE) }, stateInstance: 'blocked' }, auth)).status).toBe(200);
    expect(await receiptsCounted('not_final')).toBe(ignoredBefore + 2);
    expect((await post('not json', auth)).status).toBe(400);
    // The bare token in the header (how the v3 SetSettings page words webhookUrlToken) is taken too.
    expect((await post('not json', MAX_WEBHOOK_TOKEN)).status).toBe(400);
    expect((await post({ typeWebhook: 'outgoingMessageStatus', status: 'delivered' }, auth)).status).toBe(400);
    // The step's true receipt, sent after: none of the above touched the step.
    expect(await gateway.reportStatus(idMessage, 'delivered')).toBe(200);
    await waitFor(async () => (await stepOf(cascadeId)).deliveredAt, { what: 'deliveredAt' });
    expect((await stepOf(cascadeId)).reason).toBe('');
  });

  it('maps the documented statuses: delivered and read deliver, failed / noAccount / notInGroup do not, sent and yellowCard end nothing', () => {
    expect(mapGreenApiStatus('delivered')).toMatchObject({ reason: 'delivered' });
    expect(mapGreenApiStatus('read')).toMatchObject({ reason: 'read' });
    expect(mapGreenApiStatus('notInGroup')).toMatchObject({ reason: 'not_in_group' });
    expect(mapGreenApiStatus('sent')).toBeNull();
    expect(mapGreenApiStatus('yellowCard')).toBeNull();
    expect(mapGreenApiStatus('constructor')).toBeNull();
  });
});
