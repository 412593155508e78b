import { openBus, runService } from '@rrs/runtime';
import { startChannelCatalog } from './catalog/channelCatalog';
import { buildConfig } from './config';
import { startGateway } from './service';

void runService({
  name: 'gateway',
  buildConfig,
  start: async (config, ctx) => {
    // One bus connection: the channel catalog and the review form's ratings outbox. The gateway serves
    // without it (the catalog it has, ratings go to the keep-trying page): degraded, still ready.
    const bus = await openBus(config, ctx, 'gateway', undefined, { required: false });
    const channelCatalog = await startChannelCatalog({ bus, logger: ctx.logger, ttlMs: config.channelTtlMs });
    ctx.lifecycle.onStop('channel catalog', () => channelCatalog.stop());
    return startGateway(config, ctx, { channelCatalog, bus });
  },
});
