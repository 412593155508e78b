import type { ServiceContext } from '@rrs/runtime';
import { PermanentSendError, ProviderChain, SinkOutbox, StepOutcome, startChannelSender, type ChannelSenderConfig, type ChannelSenderDeps, type ProviderChainOptions, type SendStep } from '@rrs/sender-kit';
import type { busV1 } from '@rrs/proto';
import { fromDomain, type EmailConfig, type SenderAuthentication } from './config';
import { dkimSigner } from './dkim';
import { renderEmail, type EmailMessage } from './message';
import { postmarkProvider } from './postmark';
import { sinkEmailProvider, smtpProvider, type EmailProvider } from './provider';
import { startEmailReceiptServer } from './receipts';
import { startSystemEmails } from './systemEmail';

export const CHANNEL = 'EMAIL';
export const SCHEMA = 'channel_email';

export interface EmailDeps extends ChannelSenderDeps {
  /** One provider, or several in failover order. */
  provider?: EmailProvider | EmailProvider[];
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** The email send step: render, check the address, hand to the first provider that takes it. */
export function emailSend(providers: EmailProvider | ProviderChain<EmailMessage>, from: string): SendStep {
  const chain = providers instanceof ProviderChain ? providers : new ProviderChain<EmailMessage>(CHANNEL, [providers]);
  return async (step, ctx) => {
    const message = renderEmail(step, from);
    if (!EMAIL.test(message.to)) throw new PermanentSendError('missing_contact', 'the recipient has no valid email address');
    const { providerMessageId, provider } = await chain.send(message, ctx);
    return { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId, provider };
  };
}

export async function startEmailSender(
  config: ChannelSenderConfig & Partial<Pick<EmailConfig, 'smtpUrl' | 'emailFrom' | 'smtpTimeoutMs' | 'smtpMaxConnections' | 'postmark' | 'providers' | 'receiptsHost' | 'receiptsPort' | 'circuit' | 'authentication'>>,
  ctx: ServiceContext,
  deps: EmailDeps = {},
) {
  const outbox = deps.outbox ?? new SinkOutbox();
  const from = config.emailFrom ?? 'Reviews <no-reply@localhost>';
  const names = config.providers ?? (config.smtpUrl ? ['smtp'] : []);
  const dkim = config.authentication?.dkim;
  const sign = dkim ? dkimSigner(dkim) : undefined;
  // The config decides the sink (providerOrder: never silently in production); no names = the sink (tests).
  const configured: EmailProvider[] = names.map((name) =>
    name === 'smtp' ? smtpProvider({ smtpUrl: config.smtpUrl!, from, timeoutMs: config.smtpTimeoutMs ?? 15_000, maxConnections: config.smtpMaxConnections, sign })
    : name === 'postmark' ? postmarkProvider({ ...config.postmark!, from })
    : sinkEmailProvider(outbox),
  );
  const given = deps.provider === undefined ? undefined : Array.isArray(deps.provider) ? deps.provider : [deps.provider];
  const providers = given ?? (configured.length > 0 ? configured : [sinkEmailProvider(outbox)]);
  for (const provider of providers) ctx.lifecycle.onStop(`email provider ${provider.name}`, () => provider.close());
  const chain = new ProviderChain<EmailMessage>(CHANNEL, providers, config.circuit satisfies ProviderChainOptions | undefined);
  const receipts = providers.some((p) => p.name === 'postmark') ? config.postmark?.webhookSecret : undefined;
  const running = await startChannelSender(config, ctx, {
    service: 'channel-email',
    schema: SCHEMA,
    bus: deps.bus,
    pool: deps.pool,
    outbox,
    channels: [{
      entry: {
        key: CHANNEL, slug: 'email', label: 'Email', contactField: 'email', capabilities: receipts ? ['send', 'unsubscribe', 'delivery_receipts'] : ['send', 'unsubscribe'], position: 10,
        senderDomain: senderDomainOf(from, providers, config.authentication),
      },
      send: emailSend(chain, from),
      provider: chain.name,
      health: chain,
    }],
  });
  // Invitations, password resets, rating alerts and digests, replies to customers: the same providers, the
  // same send log (docs/channels.md, "System emails").
  const systemEmails = await startSystemEmails({ bus: running.bus, sendLog: running.sendLog, chain, from, logger: ctx.logger, ackWaitMs: config.ackWaitMs });
  ctx.lifecycle.onStop('system emails consumer', () => systemEmails.drain());
  let receiptsPort: number | undefined;
  if (receipts && config.receiptsPort !== undefined) {
    const server = await startEmailReceiptServer({ host: config.receiptsHost ?? '0.0.0.0', port: config.receiptsPort, results: running.results, sendLog: running.sendLog, postmarkSecret: receipts, logger: ctx.logger });
    ctx.lifecycle.onStop('email receipts server', () => server.close());
    receiptsPort = server.port;
  }
  return { ...running, outbox, provider: providers[0], chain, receiptsPort };
}

/**
 * What the catalog says of the sender domain, for the deliverability check (docs/channels.md,
 * "Deliverability"): the From domain, our DKIM selectors with their public keys, who signs otherwise,
 * and the SPF terms that must authorize our sending servers. Public by nature: it is what DNS publishes.
 */
export function senderDomainOf(from: string, providers: readonly EmailProvider[], authentication?: SenderAuthentication): busV1.SenderDomain {
  const names = providers.map((provider) => provider.name);
  const dkim = names.includes('smtp') ? authentication?.dkim : undefined;
  const signedBy = dkim ? '' : names.includes('smtp') && authentication?.dkimSignedByRelay ? 'relay' : names.includes('postmark') ? 'postmark' : '';
  return {
    domain: authentication?.domain ?? fromDomain(from),
    dkimDomain: dkim?.domain ?? '',
    dkimKeys: (dkim?.keys ?? []).map((key) => ({ selector: key.selector, publicKey: key.publicKey })),
    dkimSignedBy: signedBy,
    spfTerms: authentication?.spfTerms ?? [],
  };
}
