import { runService } from '@rrs/runtime';
import { buildConfig } from './config';
import { startEmailSender } from './service';

void runService({ name: 'channel-email', buildConfig, start: (config, ctx) => startEmailSender(config, ctx) });
