import { connectJetStreamBus, type Bus } from './bus';
import { createPool, migrate, type Pool, type PoolOptions } from './db';
import type { Logger } from 'pino';
import { ConfigError } from './errors';
import { Health, startOpsServer } from './health';
import { Lifecycle } from './lifecycle';
import { createLogger } from './logger';
import { collectProcessMetrics } from './metrics';
import { observeBus } from './busObservability';
import { startTracing } from './otel';

/** What a service's start function gets: its logger, the process health and the shutdown sequence. */
export interface ServiceContext {
  logger: Logger;
  health: Health;
  lifecycle: Lifecycle;
}

export function createServiceContext(service: string, level = 'info'): ServiceContext {
  const logger = createLogger({ service, level });
  return { logger, health: new Health(), lifecycle: new Lifecycle(logger) };
}

export interface RunServiceOptions<C> {
  name: string;
  buildConfig: (env: NodeJS.ProcessEnv) => C & { logLevel: string; opsPort?: number; opsHost?: string };
  start: (config: C, ctx: ServiceContext) => Promise<unknown>;
}

/**
 * The body of every service's `main.ts`: config from the environment (exiting with a message that
 * names the variable when it is wrong), start, then ready, with graceful shutdown on SIGTERM.
 */
export async function runService<C>(options: RunServiceOptions<C>): Promise<void> {
  let config: ReturnType<RunServiceOptions<C>['buildConfig']>;
  try {
    config = options.buildConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${options.name}: invalid configuration: ${err.message}\n`);
      process.exit(78);
    }
    throw err;
  }
  const ctx = createServiceContext(options.name, config.logLevel);
  collectProcessMetrics();
  // Registered first so it stops last: spans of the shutdown itself are still exported.
  const tracing = startTracing({ serviceName: options.name });
  if (tracing) {
    ctx.lifecycle.onStop('tracing', () => tracing.shutdown());
    ctx.logger.info('OpenTelemetry tracing on (OTLP export)');
  }
  ctx.lifecycle.handleSignals();
  try {
    await options.start(config, ctx);
    if (config.opsPort !== undefined) {
      const ops = await startOpsServer({ host: config.opsHost ?? '0.0.0.0', port: config.opsPort, health: ctx.health, logger: ctx.logger });
      ctx.lifecycle.onStop('ops server', () => ops.close());
      ctx.logger.info({ port: ops.port }, 'ops endpoints listening (/healthz, /readyz, /metrics)');
    }
    ctx.health.setReady(true);
    ctx.lifecycle.onStop('readiness', () => ctx.health.setReady(false));
    ctx.logger.info('started');
  } catch (err) {
    ctx.logger.fatal({ err }, 'failed to start');
    await ctx.lifecycle.shutdown('start failed');
    process.exit(1);
  }
}

/**
 * The bus a service uses: the one handed in (all-in-one mode, tests) or a JetStream connection it owns
 * and closes last on shutdown; either way with tracing and consumer-lag metrics (see busObservability).
 */
export async function openBus(config: { natsUrl: string; busPrefix: string }, ctx: ServiceContext, name: string, provided?: Bus): Promise<Bus> {
  if (provided) return observeBus(provided);
  const bus = observeBus(await connectJetStreamBus({ url: config.natsUrl, prefix: config.busPrefix, name }));
  await bus.ensureStreams();
  ctx.lifecycle.onStop('bus', () => bus.close());
  return bus;
}

export interface ServiceDatabaseOptions {
  url: string;
  /** The service's own schema. */
  schema: string;
  applicationName?: string;
  max?: number;
  /** Migration folders applied in order: the service's own, then library components (idempotency, …). */
  migrations: Array<{ dir: string; component?: string }>;
  settings?: PoolOptions['settings'];
}

/**
 * A service's PostgreSQL: a pool on its own schema, migrated, checked by /readyz (`<schema>-postgres`),
 * and closed last on shutdown.
 */
export async function openServiceDatabase(ctx: ServiceContext, options: ServiceDatabaseOptions): Promise<Pool> {
  const pool = createPool({ url: options.url, schema: options.schema, applicationName: options.applicationName ?? options.schema, max: options.max, logger: ctx.logger, settings: options.settings });
  ctx.lifecycle.onStop(`${options.schema} pool`, () => pool.end());
  for (const m of options.migrations) await migrate(pool, { schema: options.schema, dir: m.dir, component: m.component, logger: ctx.logger });
  ctx.health.addCheck(`${options.schema}-postgres`, async () => {
    await pool.query('SELECT 1');
  });
  return pool;
}
