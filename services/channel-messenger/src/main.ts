import { runService } from '@rrs/runtime';
import { buildConfig } from './config';
import { startMessengerSender } from './service';

void runService({ name: 'channel-messenger', buildConfig, start: (config, ctx) => startMessengerSender(config, ctx) });
