import { openBus, type Bus, type ServiceContext } from '@rrs/runtime';
import { SinkOutbox, sinkSend, startSender } from '@rrs/sender-kit';
import type { SmsConfig } from './config';

export const CHANNEL = 'SMS';

export interface SmsDeps {
  bus?: Bus;
  outbox?: SinkOutbox;
}

export async function startSmsSender(config: Pick<SmsConfig, 'natsUrl' | 'busPrefix' | 'concurrency'>, ctx: ServiceContext, deps: SmsDeps = {}) {
  const bus = await openBus(config, ctx, 'channel-sms', deps.bus);
  const outbox = deps.outbox ?? new SinkOutbox();
  const sub = await startSender({
    bus,
    channel: CHANNEL,
    concurrency: config.concurrency,
    logger: ctx.logger,
    send: sinkSend(CHANNEL, outbox, (step) => step.recipient?.phone ?? ''),
  });
  ctx.lifecycle.onStop('sms steps consumer', () => sub.drain());
  return { outbox };
}
