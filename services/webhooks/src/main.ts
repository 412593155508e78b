import { runService } from '@rrs/runtime';
import { buildConfig } from './config';
import { startWebhooks } from './service';

void runService({ name: 'webhooks', buildConfig, start: (config, ctx) => startWebhooks(config, ctx) });
