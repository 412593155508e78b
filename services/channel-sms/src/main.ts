import { runService } from '@rrs/runtime';
import { buildConfig } from './config';
import { startSmsSender } from './service';

void runService({ name: 'channel-sms', buildConfig, start: (config, ctx) => startSmsSender(config, ctx) });
