import { runService } from '@rrs/runtime';
import { buildConfig, type AllInOneConfig } from './config';
import { startAllInOne, type RunningAllInOne } from './launcher';

const startedAt = Date.now();

function banner(running: RunningAllInOne, config: AllInOneConfig): string {
  return [
    '',
    `Review-request service is running at ${running.url} (started in ${Date.now() - startedAt} ms)`,
    `  Demo organization API key: ${running.demo.apiKey}`,
    `  Admin token:                ${config.adminTokens === undefined ? 'none (ADMIN_API=off)' : (running.demo.adminToken ?? 'from ADMIN_TOKEN')}`,
    `  Console:                    ${running.url}/app/  (${running.demo.email} / ${running.demo.password})`,
    ...(running.devInbox ? [`  Dev inbox:                  ${running.url}/dev/inbox`] : []),
    `  Metrics:                    http://${config.opsHost === '0.0.0.0' ? 'localhost' : config.opsHost}:${config.opsPort}/metrics`,
    `  DELAY_MINUTE_MS:            ${config.minuteMs}${config.minuteMs === 60_000 ? '' : ' (fast clock: one flow minute lasts this many ms)'}`,
    `  Try: curl -H "Authorization: Bearer ${running.demo.apiKey}" ${running.url}/api/v1/ping`,
    '',
  ].join('\n') + '\n';
}

void runService({
  name: 'all-in-one',
  displayName: 'review-request service',
  tracingName: 'review-request-service',
  buildConfig,
  start: startAllInOne,
  onReady: (running, config) => process.stdout.write(banner(running, config)),
});
