import { runService } from '@rrs/runtime';
import { buildConfig } from './config';
import { startConnectors } from './service';

void runService({ name: 'connectors', buildConfig, start: (config, ctx) => startConnectors(config, ctx) });
