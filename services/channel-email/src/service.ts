import { openBus, type Bus, type ServiceContext } from '@rrs/runtime';
import { SinkOutbox, sinkSend, startSender } from '@rrs/sender-kit';
import type { EmailConfig } from './config';

export const CHANNEL = 'EMAIL';

export interface EmailDeps {
  bus?: Bus;
  outbox?: SinkOutbox;
}

export async function startEmailSender(config: Pick<EmailConfig, 'natsUrl' | 'busPrefix' | 'concurrency'>, ctx: ServiceContext, deps: EmailDeps = {}) {
  const bus = await openBus(config, ctx, 'channel-email', deps.bus);
  const outbox = deps.outbox ?? new SinkOutbox();
  const sub = await startSender({
    bus,
    channel: CHANNEL,
    concurrency: config.concurrency,
    logger: ctx.logger,
    send: sinkSend(CHANNEL, outbox, (step) => step.recipient?.email ?? ''),
  });
  ctx.lifecycle.onStop('email steps consumer', () => sub.drain());
  return { outbox };
}
