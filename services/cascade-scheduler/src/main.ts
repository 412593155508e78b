import { runService } from '@rrs/runtime';
import { buildConfig } from './config';
import { startScheduler } from './service';

void runService({ name: 'cascade-scheduler', buildConfig, start: (config, ctx) => startScheduler(config, ctx) });
