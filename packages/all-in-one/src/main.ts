import { ConfigError, createServiceContext, startTracing } from '@rrs/runtime';
import { buildConfig } from './config';
import { startAllInOne } from './launcher';

async function main(): Promise<void> {
  let config;
  try {
    config = buildConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`review-request service: invalid configuration: ${err.message}\n`);
      process.exit(78);
    }
    throw err;
  }
  const ctx = createServiceContext('all-in-one', config.logLevel);
  // Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set; registered first so it stops last.
  const tracing = startTracing({ serviceName: 'review-request-service' });
  if (tracing) ctx.lifecycle.onStop('tracing', () => tracing.shutdown());
  ctx.lifecycle.handleSignals();
  const started = Date.now();
  try {
    const running = await startAllInOne(config, ctx);
    ctx.health.setReady(true);
    ctx.lifecycle.onStop('readiness', () => ctx.health.setReady(false));
    process.stdout.write(
      [
        '',
        `Review-request service is running at ${running.url} (started in ${Date.now() - started} ms)`,
        `  Demo organization API key: ${running.demo.apiKey}`,
        `  Admin token:                ${running.demo.adminToken}`,
        `  Dev inbox:                  ${running.url}/dev/inbox`,
        `  DELAY_MINUTE_MS:            ${config.minuteMs}${config.minuteMs === 60_000 ? '' : ' (fast clock: one flow minute lasts this many ms)'}`,
        `  Try: curl -H "Authorization: Bearer ${running.demo.apiKey}" ${running.url}/api/v1/ping`,
        '',
      ].join('\n') + '\n',
    );
  } catch (err) {
    ctx.logger.fatal({ err }, 'failed to start');
    await ctx.lifecycle.shutdown('start failed');
    process.exit(1);
  }
}

void main();
