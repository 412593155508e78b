import { runService } from '@rrs/runtime';
import { openChannelCatalog } from './catalog/channelCatalog';
import { buildConfig } from './config';
import { startGateway } from './service';

void runService({
  name: 'gateway',
  buildConfig,
  start: async (config, ctx) => startGateway(config, ctx, { channelCatalog: await openChannelCatalog(config, ctx) }),
});
