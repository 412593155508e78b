import { runService } from '@rrs/runtime';
import { buildConfig } from './config';
import { startGateway } from './service';

void runService({ name: 'gateway', buildConfig, start: startGateway });
