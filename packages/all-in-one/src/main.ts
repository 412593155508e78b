import { runService } from '@rrs/runtime';
import { banner } from './banner';
import { buildConfig } from './config';
import { startAllInOne } from './launcher';

const startedAt = Date.now();

void runService({
  name: 'all-in-one',
  displayName: 'review-request service',
  tracingName: 'review-request-service',
  buildConfig,
  start: startAllInOne,
  onReady: (running, config) => process.stdout.write(banner(running, config, startedAt)),
});
