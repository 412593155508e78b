import { join } from 'node:path';
import { contactsV1 } from '@rrs/proto';
import { createGrpcClient, type ServiceContext } from '@rrs/runtime';
import { PermanentSendError, ProviderChain, SinkOutbox, StepOutcome, startChannelSender, type StepResultPublisher, type ChannelSenderConfig, type ChannelSenderDeps, type ProviderChainOptions, type SendStep } from '@rrs/sender-kit';
import { contactsSmsBalance, type SmsBalance } from './balance';
import type { SmsConfig } from './config';
import { renderSms } from './message';
import { sinkSmsProvider, smscProvider, type SmsProvider, type SmsSendRequest } from './provider';
import { startReceiptServer } from './receipts';
import { reportStopReply, SmsRecipients } from './replies';
import { startSmscInbox } from './smscInbox';
import { PROVIDER_STOP_LIST, smsRuProvider } from './smsru';

export const CHANNEL = 'SMS';
export const SCHEMA = 'channel_sms';
/** channel-sms's own tables (who each SMS went to, the inbox cursor), beside sender-kit's send log. */
export const MIGRATIONS_DIR = join(__dirname, '..', 'migrations');

export interface SmsDeps extends ChannelSenderDeps {
  /** One provider, or several in failover order. */
  provider?: SmsProvider | SmsProvider[];
  balance?: SmsBalance;
}

const E164 = /^\+[1-9]\d{6,14}$/;

/** What the SMS step does beside sending, when the sender has a database and a bus (not in unit tests). */
export interface SmsSendExtras {
  /** Where a provider's stop-list refusal is reported as an opt-out of the person (source `stop_reply`). */
  results?: StepResultPublisher;
}

/**
 * The SMS send step: render and cut to one part, debit the organization's balance for the step (once,
 * even on redelivery), then hand to the provider. No balance → NO_BALANCE, and the scheduler reroutes.
 * A provider that refuses the number for its stop list fails the step and reports the person opted out
 * first (a failure to report fails the delivery, so the step is tried again and the report with it).
 */
export function smsSend(providers: SmsProvider | ProviderChain<SmsSendRequest>, balance: SmsBalance, extras: SmsSendExtras = {}): SendStep {
  const chain = providers instanceof ProviderChain ? providers : new ProviderChain<SmsSendRequest>(CHANNEL, [providers]);
  return async (step, ctx) => {
    const phone = step.recipient?.phone ?? '';
    if (!E164.test(phone)) throw new PermanentSendError('missing_contact', 'the recipient has no E.164 phone number');
    const sms = renderSms(step);
    const debit = await balance.debit({ organizationId: step.organizationId, stepId: step.stepId, parts: sms.parts });
    if (!debit.debited) return { outcome: StepOutcome.STEP_OUTCOME_NO_BALANCE, reason: 'no_balance' };
    try {
      const { providerMessageId, provider } = await chain.send({ stepId: step.stepId, phone, text: sms.text, link: step.reviewUrl }, ctx);
      // The number goes into the send log with the outcome, so a STOP reply finds the last SMS it answers.
      return { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId, parts: sms.parts, provider, address: phone };
    } catch (err) {
      if (err instanceof PermanentSendError && err.reason === PROVIDER_STOP_LIST && extras.results) {
        await reportStopReply(extras.results, step, 'smsru');
      }
      throw err;
    }
  };
}

export async function startSmsSender(
  config: ChannelSenderConfig & Partial<Pick<SmsConfig, 'contactsAddress' | 'smsc' | 'smscInboxPollMs' | 'smsru' | 'providers' | 'receiptsHost' | 'receiptsPort' | 'circuit'>>,
  ctx: ServiceContext,
  deps: SmsDeps = {},
) {
  const outbox = deps.outbox ?? new SinkOutbox();
  // The config decides the sink (providerOrder: never silently in production); no names = the sink (tests).
  const configured: SmsProvider[] = (config.providers ?? (config.smsc ? ['smsc'] : [])).map((name) =>
    name === 'smsc' ? smscProvider(config.smsc!) : name === 'smsru' ? smsRuProvider(config.smsru!) : sinkSmsProvider(outbox),
  );
  // Stops run last registered first: the connections close after the sender has drained its steps.
  if (configured.some((p) => p.close)) ctx.lifecycle.onStop('SMS provider connections', async () => void (await Promise.all(configured.map((p) => p.close?.()))));
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
    outbox,
    migrations: [{ dir: MIGRATIONS_DIR }],
    channels: [{
      entry: { key: CHANNEL, slug: 'sms', label: 'SMS', contactField: 'phone', capabilities: real ? ['send', 'balance', 'delivery_receipts'] : ['send', 'balance'], position: 20 },
      sendWith: ({ results }) => smsSend(chain, balance, { results }),
      provider: chain.name,
      health: chain,
      // SMSC may still process a call its caller died during, up to the call's timeout (docs/channels.md).
      sendLeaseMs: (config.smsc?.timeoutMs ?? 10_000) + 1_000,
    }],
  });
  let inbox: ReturnType<typeof startSmscInbox> | undefined;
  if (providers.some((p) => p.name === 'smsc') && config.smsc && (config.smscInboxPollMs ?? 0) > 0) {
    inbox = startSmscInbox({ smsc: config.smsc, pool: running.pool, recipients: new SmsRecipients(running.pool), results: running.results, intervalMs: config.smscInboxPollMs!, logger: ctx.logger });
    ctx.lifecycle.onStop('SMSC inbox reader', () => inbox!.stop());
  }
  let receiptsPort: number | undefined;
  const usesSmsc = providers.some((p) => p.name === 'smsc') && config.smsc !== undefined;
  const smsruSecret = providers.some((p) => p.name === 'smsru') ? config.smsru?.receiptsSecret : undefined;
  if ((usesSmsc || smsruSecret) && config.receiptsPort !== undefined) {
    const receipts = await startReceiptServer({ host: config.receiptsHost ?? '0.0.0.0', port: config.receiptsPort, results: running.results, sendLog: running.sendLog, password: usesSmsc ? config.smsc!.password : undefined, smsruSecret, logger: ctx.logger });
    ctx.lifecycle.onStop('SMS receipts server', () => receipts.close());
    receiptsPort = receipts.port;
  }
  return { ...running, outbox, provider: providers[0], chain, receiptsPort, inbox };
}
