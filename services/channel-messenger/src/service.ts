import { openBus, type Bus, type ServiceContext } from '@rrs/runtime';
import { SinkOutbox, sinkSend, startSender } from '@rrs/sender-kit';
import type { MessengerConfig } from './config';

/** MAX comes first among the phone channels. */
export const CHANNELS = ['MAX', 'TELEGRAM'] as const;

export interface MessengerDeps {
  bus?: Bus;
  outbox?: SinkOutbox;
}

export async function startMessengerSender(config: Pick<MessengerConfig, 'natsUrl' | 'busPrefix' | 'concurrency'>, ctx: ServiceContext, deps: MessengerDeps = {}) {
  const bus = await openBus(config, ctx, 'channel-messenger', deps.bus);
  const outbox = deps.outbox ?? new SinkOutbox();
  for (const channel of CHANNELS) {
    const sub = await startSender({
      bus,
      channel,
      concurrency: config.concurrency,
      logger: ctx.logger,
      send: sinkSend(channel, outbox, (step) => step.recipient?.phone ?? ''),
    });
    ctx.lifecycle.onStop(`${channel.toLowerCase()} steps consumer`, () => sub.drain());
  }
  return { outbox };
}
