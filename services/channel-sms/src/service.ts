import { contactsV1 } from '@rrs/proto';
import { createGrpcClient, type ServiceContext } from '@rrs/runtime';
import { PermanentSendError, SinkOutbox, StepOutcome, startChannelSender, type ChannelSenderConfig, type ChannelSenderDeps, type SendStep } from '@rrs/sender-kit';
import { contactsSmsBalance, type SmsBalance } from './balance';
import type { SmsConfig } from './config';
import { renderSms } from './message';
import { sinkSmsProvider, smscProvider, type SmsProvider } from './provider';
import { startReceiptServer } from './receipts';

export const CHANNEL = 'SMS';
export const SCHEMA = 'channel_sms';

export interface SmsDeps extends ChannelSenderDeps {
  provider?: SmsProvider;
  balance?: SmsBalance;
}

const E164 = /^\+[1-9]\d{6,14}$/;

/**
 * The SMS send step: render and cut to one part, debit the organization's balance for the step (once,
 * even on redelivery), then hand to the provider. No balance → NO_BALANCE, and the scheduler reroutes.
 */
export function smsSend(provider: SmsProvider, balance: SmsBalance): SendStep {
  return async (step, ctx) => {
    const phone = step.recipient?.phone ?? '';
    if (!E164.test(phone)) throw new PermanentSendError('missing_contact', 'the recipient has no E.164 phone number');
    const sms = renderSms(step);
    const debit = await balance.debit({ organizationId: step.organizationId, stepId: step.stepId, parts: sms.parts });
    if (!debit.debited) return { outcome: StepOutcome.STEP_OUTCOME_NO_BALANCE, reason: 'no_balance' };
    const { providerMessageId } = await provider.send({ stepId: step.stepId, phone, text: sms.text, link: step.reviewUrl, resumed: ctx.resumed });
    return { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId, parts: sms.parts };
  };
}

export async function startSmsSender(
  config: ChannelSenderConfig & Partial<Pick<SmsConfig, 'contactsAddress' | 'smsc' | 'receiptsHost' | 'receiptsPort'>>,
  ctx: ServiceContext,
  deps: SmsDeps = {},
) {
  const outbox = deps.outbox ?? new SinkOutbox();
  const provider = deps.provider ?? (config.smsc ? smscProvider(config.smsc) : sinkSmsProvider(outbox));
  let balance = deps.balance;
  if (!balance) {
    if (!config.contactsAddress) throw new Error('channel-sms needs the contacts address (CONTACTS_ADDR) to debit SMS balances');
    const contacts = createGrpcClient(contactsV1.ContactsServiceClient, config.contactsAddress);
    ctx.lifecycle.onStop('contacts client', () => contacts.close());
    balance = contactsSmsBalance(contacts.client);
  }
  const running = await startChannelSender(config, ctx, {
    service: 'channel-sms',
    schema: SCHEMA,
    bus: deps.bus,
    pool: deps.pool,
    channels: [{
      entry: { key: CHANNEL, slug: 'sms', label: 'SMS', contactField: 'phone', capabilities: config.smsc ? ['send', 'balance', 'delivery_receipts'] : ['send', 'balance'], position: 20 },
      send: smsSend(provider, balance),
      provider: provider.name,
    }],
  });
  let receiptsPort: number | undefined;
  if (config.smsc && config.receiptsPort !== undefined) {
    const receipts = await startReceiptServer({ host: config.receiptsHost ?? '0.0.0.0', port: config.receiptsPort, results: running.results, sendLog: running.sendLog, password: config.smsc.password, logger: ctx.logger });
    ctx.lifecycle.onStop('SMS receipts server', () => receipts.close());
    receiptsPort = receipts.port;
  }
  return { ...running, outbox, provider, receiptsPort };
}
