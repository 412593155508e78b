import type { AllInOneConfig } from './config';
import type { RunningAllInOne } from './launcher';

/** What the process prints once it is ready: where it runs and, outside production, the demo's credentials. */
export function banner(running: RunningAllInOne, config: AllInOneConfig, startedAt: number): string {
  const { demo } = running;
  return [
    '',
    `Review-request service is running at ${running.url} (started in ${Date.now() - startedAt} ms)`,
    ...(demo
      ? [
          `  Demo organization API key: ${demo.apiKey}`,
          `  Admin token:                ${config.adminTokens === undefined ? 'none (ADMIN_API=off)' : (demo.adminToken ?? 'from ADMIN_TOKEN')}`,
          `  Console:                    ${running.url}/app/  (${demo.email} / ${demo.password})`,
        ]
      : [
          // Production: nothing seeded, no secret printed.
          `  Admin API:                  ${config.adminTokens === undefined ? 'off (ADMIN_API=off)' : `${running.url}/admin/v1 (ADMIN_TOKEN): create organizations and invite their owners`}`,
          `  Console:                    ${running.url}/app/`,
        ]),
    ...(running.devInbox ? [`  Dev inbox:                  ${running.url}/dev/inbox`] : []),
    `  Metrics:                    http://${config.opsHost === '0.0.0.0' ? 'localhost' : config.opsHost}:${config.opsPort}/metrics`,
    `  DELAY_MINUTE_MS:            ${config.minuteMs}${config.minuteMs === 60_000 ? '' : ' (fast clock: one flow minute lasts this many ms)'}`,
    ...(demo ? [`  Try: curl -H "Authorization: Bearer ${demo.apiKey}" ${running.url}/api/v1/ping`] : []),
    '',
  ].join('\n') + '\n';
}
