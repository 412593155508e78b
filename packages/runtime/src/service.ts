import { connectJetStreamBus, type Bus, type StreamDrift } from './bus';
import { createPool, migrate, type Pool, type PoolOptions } from './db';
import type { Logger } from 'pino';
import { whereUrlPoints, type BusConfig } from './config';
import { ConfigError } from './errors';
import { startGrpcServer, type GrpcServerOptions } from './grpc';
import { Health, startOpsServer, type CheckOptions } from './health';
import { Lifecycle } from './lifecycle';
import { createLogger } from './logger';
import { collectProcessMetrics, gauge } from './metrics';
import { observeBus } from './busObservability';
import { electLeader, type Leadership } from './leader';
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

export interface RunServiceOptions<C, R = unknown> {
  /** The service's name: in its logs, its traces and a configuration error's message. */
  name: string;
  buildConfig: (env: NodeJS.ProcessEnv) => C & { logLevel: string; opsPort?: number; opsHost?: string };
  start: (config: C, ctx: ServiceContext) => Promise<R>;
  /** How a configuration error introduces the program on stderr, when not by `name`. */
  displayName?: string;
  /** The OpenTelemetry service name, when not `name`. */
  tracingName?: string;
  /** Called once the service is ready, e.g. to print where it can be reached. */
  onReady?: (running: R, config: C) => void;
}

/**
 * The config from the environment; on a wrong variable the process exits 78 (EX_CONFIG) with a message
 * that names it, before anything has started.
 */
export function configOrExit<C>(label: string, buildConfig: (env: NodeJS.ProcessEnv) => C): C {
  try {
    return buildConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${label}: invalid configuration: ${err.message}\n`);
      process.exit(78);
    }
    throw err;
  }
}

/**
 * The body of every `main.ts`: config from the environment (exiting with a message that names the
 * variable when it is wrong), start, then ready, with graceful shutdown on SIGTERM.
 */
export async function runService<C, R = unknown>(options: RunServiceOptions<C, R>): Promise<void> {
  const config = configOrExit(options.displayName ?? options.name, options.buildConfig);
  const ctx = createServiceContext(options.name, config.logLevel);
  collectProcessMetrics();
  // Registered first so it stops last: spans of the shutdown itself are still exported.
  const tracing = startTracing({ serviceName: options.tracingName ?? options.name });
  if (tracing) {
    ctx.lifecycle.onStop('tracing', () => tracing.shutdown());
    ctx.logger.info('OpenTelemetry tracing on (OTLP export)');
  }
  ctx.lifecycle.handleSignals();
  let running: R;
  try {
    running = await options.start(config, ctx);
    if (config.opsPort !== undefined) {
      const ops = await startOpsServer({ host: config.opsHost ?? '0.0.0.0', port: config.opsPort, health: ctx.health, logger: ctx.logger });
      ctx.lifecycle.onStop('ops server', () => ops.close());
      ctx.logger.info({ port: ops.port }, 'ops endpoints listening (/healthz, /readyz, /metrics)');
    }
    ctx.health.setReady(true);
    ctx.lifecycle.onStop('readiness', () => ctx.health.setReady(false));
    ctx.logger.info('started');
  } catch (err) {
    // The message first: a dependency unreachable at start names the variable that points at it (StartError).
    // A library may reject with anything, even undefined: the message is never read from nothing.
    const message = err instanceof Error ? err.message : `${String(err)} (not an error object)`;
    ctx.logger.fatal({ err }, `failed to start: ${message}`);
    process.stderr.write(`${options.displayName ?? options.name}: failed to start: ${message}\n`);
    await ctx.lifecycle.shutdown('start failed');
    process.exit(1);
  }
  options.onReady?.(running, config);
}

/**
 * A service's gRPC server on host:port (0 = any free port) with its services and grpc.health.v1
 * following the process readiness; on shutdown it refuses new calls and drains those in flight.
 * Returns the port it listens on.
 */
export async function serveGrpc(
  ctx: ServiceContext,
  options: { name: string; host: string; port: number; services: GrpcServerOptions['services']; logFields?: Record<string, unknown> },
): Promise<number> {
  const server = await startGrpcServer({ host: options.host, port: options.port, services: options.services, health: ctx.health, logger: ctx.logger });
  ctx.lifecycle.onStop(`${options.name} gRPC server`, () => server.stop());
  ctx.logger.info({ ...options.logFields, port: server.port }, `${options.name} gRPC listening`);
  return server.port;
}

/**
 * The bus a service uses: the one handed in (all-in-one mode, tests), or else a JetStream connection
 * to `natsUrl` it owns and closes last on shutdown; either way with tracing and consumer-lag metrics
 * (see busObservability). Connection settings are needed only when no bus is handed in.
 */
export async function openBus(config: Partial<BusConfig>, ctx: ServiceContext, name: string, provided?: Bus, readiness: CheckOptions = {}): Promise<Bus> {
  const bus = provided ? observeBus(provided) : await connectOwnBus(config, ctx, name);
  watchBusConnection(ctx.health, bus, readiness);
  return bus;
}

/** 1 for each setting of an existing stream that differs from this service's configuration (left as the server has it). */
const streamDrift = gauge({
  name: 'rrs_bus_stream_config_drift',
  help: 'Settings of an existing JetStream stream that differ from what this service would create (1 = differs; the stream is not changed)',
  labelNames: ['stream', 'setting'] as const,
});

/**
 * The election of this service's housekeeping leader (`<service>-housekeeping`): retention purges and
 * other periodic jobs that are not claimed row by row run on one replica at a time (see leader.ts).
 * Released on shutdown, before the pool closes.
 */
export function electHousekeepingLeader(ctx: ServiceContext, databaseUrl: string, service: string): Leadership {
  const leadership = electLeader({ databaseUrl, name: `${service}-housekeeping`, logger: ctx.logger });
  ctx.lifecycle.onStop('housekeeping leadership', () => leadership.stop());
  return leadership;
}

async function connectOwnBus(config: Partial<BusConfig>, ctx: ServiceContext, name: string): Promise<Bus> {
  if (!config.natsUrl) throw new Error(`${name}: no bus was handed in and no NATS URL is configured`);
  const url = config.natsUrl;
  const onStreamDrift = (drift: StreamDrift) => {
    streamDrift.set({ stream: drift.stream, setting: drift.setting }, 1);
    ctx.logger.warn({ ...drift }, `stream ${drift.stream} has ${drift.setting} ${drift.existing} where this service would create ${drift.configured}; left as it is`);
  };
  const bus = observeBus(
    await reachAtStart({ variable: 'NATS_URL', url, what: 'NATS' }, () =>
      connectJetStreamBus({ url, prefix: config.busPrefix ?? '', name, streamReplicas: config.streamReplicas ?? 1, onStreamDrift }),
    ),
  );
  ctx.lifecycle.onStop('bus', () => bus.close());
  await reachAtStart({ variable: 'NATS_URL', url, what: 'NATS JetStream' }, () => bus.ensureStreams());
  return bus;
}

/**
 * Readiness check `nats`: fails while the bus is not connected (the transport reconnects by itself).
 * `required: false` for a service that keeps doing its job without the bus (it is then reported
 * degraded); a service whose work arrives over the bus (a sender) cannot, and is not ready.
 */
export function watchBusConnection(health: Health, bus: Bus, options: CheckOptions = {}): void {
  health.addCheck(
    'nats',
    async () => {
      if (!bus.isConnected()) throw new Error('not connected to NATS (reconnecting)');
    },
    options,
  );
}

/**
 * Thrown when a dependency cannot be reached at start: the message names the environment variable that
 * points at it, where it points (scheme, host and port, never credentials) and the cause, e.g.
 * `cannot reach Redis at redis://cache:6379 (REDIS_URL): Connection is closed.`
 */
export class StartError extends Error {
  readonly variable: string;
  constructor(variable: string, message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'StartError';
    this.variable = variable;
  }
}

/** Runs a start step that reaches a dependency; its failure becomes a StartError naming `variable`. */
export async function reachAtStart<T>(dependency: { variable: string; url: string; what: string }, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    if (err instanceof StartError) throw err;
    const cause = err instanceof Error ? err.message : String(err);
    throw new StartError(dependency.variable, `cannot reach ${dependency.what} at ${whereUrlPoints(dependency.url)} (${dependency.variable}): ${cause}`, { cause: err });
  }
}

export interface ServiceDatabaseOptions {
  url: string;
  /** The service's own schema. */
  schema: string;
  applicationName?: string;
  max?: number;
  /** The environment variable `url` came from, named when it cannot be reached at start (default DATABASE_URL). */
  urlVariable?: string;
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
  const dependency = { variable: options.urlVariable ?? 'DATABASE_URL', url: options.url, what: 'PostgreSQL' };
  // The first query is what finds an unreachable server, so it runs on its own before the migrations.
  await reachAtStart(dependency, () => pool.query('SELECT 1'));
  for (const migrations of options.migrations) await migrate(pool, { schema: options.schema, dir: migrations.dir, component: migrations.component, logger: ctx.logger });
  ctx.health.addCheck(`${options.schema}-postgres`, async () => {
    await pool.query('SELECT 1');
  });
  return pool;
}
