import { contactsV1 } from '@rrs/proto';
import { createGrpcClient, type ServiceContext } from '@rrs/runtime';
import { PermanentSendError, ProviderChain, SinkOutbox, StepOutcome, startChannelSender, type ChannelSenderConfig, type ChannelSenderDeps, type ProviderChainOptions, type SendStep } from '@rrs/sender-kit';
import { contactsSmsBalance, type SmsBalance } from './balance';
import type { SmsConfig } from './config';
import { renderSms } from './message';
import { sinkSmsProvider, smscProvider, type SmsProvider, type SmsSendRequest } from './provider';
import { startReceiptServer } from './receipts';
import { smsRuProvider } from './smsru';

export const CHANNEL = 'SMS';
export const SCHEMA = 'channel_sms';

export interface SmsDeps extends ChannelSenderDeps {
  /** One provider, or several in failover order. */
  provider?: SmsProvider | SmsProvider[];
  balance?: SmsBalance;
}

const E164 = /^\+[1-9]\d{6,14}$/;

/**
 * The SMS send step: render and cut to one part, debit the organization's balance for the step (once,
 * even on redelivery), then hand to the provider. No balance → NO_BALANCE, and the scheduler reroutes.
 */
export function smsSend(providers: SmsProvider | ProviderChain<SmsSendRequest>, balance: SmsBalance): SendStep {
  const chain = providers instanceof ProviderChain ? providers : new ProviderChain<SmsSendRequest>(CHANNEL, [providers]);
  return async (step, ctx) => {
    const phone = step.recipient?.phone ?? '';
    if (!E164.test(phone)) throw new PermanentSendError('missing_contact', 'the recipient has no E.164 phone number');
    const sms = renderSms(step);
    const debit = await balance.debit({ organizationId: step.organizationId, stepId: step.stepId, parts: sms.parts });
    if (!debit.debited) return { outcome: StepOutcome.STEP_OUTCOME_NO_BALANCE, reason: 'no_balance' };
    const { providerMessageId, provider } = await chain.send({ stepId: step.stepId, phone, text: sms.text, link: step.reviewUrl }, ctx);
    return { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId, parts: sms.parts, provider };
  };
}

export async function startSmsSender(
  config: ChannelSenderConfig & Partial<Pick<SmsConfig, 'contactsAddress' | 'smsc' | 'smsru' | 'providers' | 'receiptsHost' | 'receiptsPort' | 'circuit'>>,
  ctx: ServiceContext,
  deps: SmsDeps = {},
) {
  const outbox = deps.outbox ?? new SinkOutbox();
  const configured: SmsProvider[] = (config.providers ?? (config.smsc ? ['smsc'] : [])).map((name) =>
    name === 'smsc' ? smscProvider(config.smsc!) : smsRuProvider(config.smsru!),
  );
  const given = deps.provider === undefined ? undefined : Array.isArray(deps.provider) ? deps.provider : [deps.provider];
  const providers = given ?? (configured.length > 0 ? configured : [sinkSmsProvider(outbox)]);
  const chain = new ProviderChain<SmsSendRequest>(CHANNEL, providers, config.circuit satisfies ProviderChainOptions | undefined);
  const real = providers.some((p) => p.name !== 'sink');
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
      entry: { key: CHANNEL, slug: 'sms', label: 'SMS', contactField: 'phone', capabilities: real ? ['send', 'balance', 'delivery_receipts'] : ['send', 'balance'], position: 20 },
      send: smsSend(chain, balance),
      provider: chain.name,
    }],
  });
  let receiptsPort: number | undefined;
  const usesSmsc = providers.some((p) => p.name === 'smsc') && config.smsc !== undefined;
  const smsruSecret = providers.some((p) => p.name === 'smsru') ? config.smsru?.receiptsSecret : undefined;
  if ((usesSmsc || smsruSecret) && config.receiptsPort !== undefined) {
    const receipts = await startReceiptServer({ host: config.receiptsHost ?? '0.0.0.0', port: config.receiptsPort, results: running.results, sendLog: running.sendLog, password: usesSmsc ? config.smsc!.password : undefined, smsruSecret, logger: ctx.logger });
    ctx.lifecycle.onStop('SMS receipts server', () => receipts.close());
    receiptsPort = receipts.port;
  }
  return { ...running, outbox, provider: providers[0], chain, receiptsPort };
}
