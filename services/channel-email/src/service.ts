import type { ServiceContext } from '@rrs/runtime';
import { PermanentSendError, SinkOutbox, StepOutcome, startChannelSender, type ChannelSenderConfig, type ChannelSenderDeps, type SendStep } from '@rrs/sender-kit';
import type { EmailConfig } from './config';
import { renderEmail } from './message';
import { sinkEmailProvider, smtpProvider, type EmailProvider } from './provider';

export const CHANNEL = 'EMAIL';
export const SCHEMA = 'channel_email';

export interface EmailDeps extends ChannelSenderDeps {
  provider?: EmailProvider;
}

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** The email send step: render, check the address, hand to the provider. */
export function emailSend(provider: EmailProvider, from: string): SendStep {
  return async (step) => {
    const message = renderEmail(step, from);
    if (!EMAIL.test(message.to)) throw new PermanentSendError('missing_contact', 'the recipient has no valid email address');
    const { providerMessageId } = await provider.send(message, step.stepId);
    return { outcome: StepOutcome.STEP_OUTCOME_SENT, providerMessageId };
  };
}

export async function startEmailSender(config: ChannelSenderConfig & Partial<Pick<EmailConfig, 'smtpUrl' | 'emailFrom' | 'smtpTimeoutMs' | 'smtpMaxConnections'>>, ctx: ServiceContext, deps: EmailDeps = {}) {
  const outbox = deps.outbox ?? new SinkOutbox();
  const from = config.emailFrom ?? 'Reviews <no-reply@localhost>';
  const provider = deps.provider ?? (config.smtpUrl ? smtpProvider({ smtpUrl: config.smtpUrl, from, timeoutMs: config.smtpTimeoutMs ?? 15_000, maxConnections: config.smtpMaxConnections }) : sinkEmailProvider(outbox));
  ctx.lifecycle.onStop('email provider', () => provider.close());
  const running = await startChannelSender(config, ctx, {
    service: 'channel-email',
    schema: SCHEMA,
    bus: deps.bus,
    pool: deps.pool,
    channels: [{
      entry: { key: CHANNEL, slug: 'email', label: 'Email', contactField: 'email', capabilities: ['send', 'unsubscribe'], position: 10 },
      send: emailSend(provider, from),
      provider: provider.name,
    }],
  });
  return { ...running, outbox, provider };
}
