import { join } from 'node:path';
import { contactsV1 } from '@rrs/proto';
import { IDEMPOTENCY_MIGRATIONS, startIdempotencyPurge } from '@rrs/idempotency';
import { createGrpcClient, openBus, openServiceDatabase, startGrpcServer, type Bus, type ServiceContext } from '@rrs/runtime';
import { DEFAULT_MINUTE_MS, DEFAULT_STEP_RESULT_MAX_ATTEMPTS, DEFAULT_STEP_RESULT_TIMEOUT_MINUTES, type SchedulerConfig } from './config';
import { Cascades } from './cascades';
import { ConfiguredChannels, grpcDirectory, type Directory } from './directory';
import { startDispatcher, type DispatcherOptions, type RunningDispatcher } from './dispatcher';
import { Flows } from './flows';
import { Notifier } from './notifier';
import { startOutboxRelay } from './outbox';
import { consumeStepResults, type StepResultConsumer, type StepResultHandler } from './results';
import { Reviews } from './reviews';
import { schedulerGrpcService } from './server';
import { startResultWatchdog } from './watchdog';

export const SCHEMA = 'scheduler';
/**
 * Planner costs of the scheduler's sessions. PostgreSQL's default random_page_cost (4) models spinning
 * disks; with it, claiming 1 000 steps from a due backlog of 40 000 sorts the whole backlog (~60 ms
 * instead of ~1 ms through the due index), and every batched step UPDATE hashes the whole steps table
 * instead of probing its primary key. 1.1 is the usual value for SSDs and for a working set in memory.
 */
export const SESSION_SETTINGS = { random_page_cost: '1.1' };
export const MIGRATIONS_DIR = join(__dirname, '..', 'migrations');

export interface SchedulerDeps {
  /** The in-process bus in the all-in-one mode; otherwise the service connects to NATS itself. */
  bus?: Bus;
  /** The directory; by default a gRPC client of `contactsAddress`. */
  directory?: Directory;
  onStepResult?: StepResultHandler;
  /** Test hook, see DispatcherOptions. */
  afterPublish?: DispatcherOptions['afterPublish'];
  /** Run no dispatcher in this process (tests that start their own). */
  noDispatcher?: boolean;
  /** How long the dispatcher trusts a directory answer about configured channels (default 5 000 ms). */
  channelsCacheMs?: number;
}

export type SchedulerStartConfig = Pick<SchedulerConfig, 'databaseUrl' | 'natsUrl' | 'busPrefix' | 'grpcHost' | 'grpcPort'> &
  Partial<Pick<SchedulerConfig, 'contactsAddress' | 'publicBaseUrl' | 'minuteMs' | 'feedbackWindowMinutes' | 'dispatchBatchSize' | 'stepResultTimeoutMinutes' | 'stepResultMaxAttempts'>>;

export interface RunningScheduler {
  grpcPort: number;
  bus: Bus;
  flows: Flows;
  cascades: Cascades;
  reviews: Reviews;
  dispatcher: RunningDispatcher | null;
  results: StepResultConsumer;
}

export async function startScheduler(config: SchedulerStartConfig, ctx: ServiceContext, deps: SchedulerDeps = {}): Promise<RunningScheduler> {
  const minuteMs = config.minuteMs ?? DEFAULT_MINUTE_MS;
  const publicBaseUrl = config.publicBaseUrl ?? 'http://localhost:8080';
  const pool = await openServiceDatabase(ctx, {
    url: config.databaseUrl,
    schema: SCHEMA,
    applicationName: 'cascade-scheduler',
    max: 20,
    migrations: [{ dir: MIGRATIONS_DIR }, IDEMPOTENCY_MIGRATIONS],
    settings: SESSION_SETTINGS,
  });
  startIdempotencyPurge(pool, ctx);
  const bus = await openBus(config, ctx, 'cascade-scheduler', deps.bus);

  let directory = deps.directory;
  if (!directory) {
    const contacts = createGrpcClient(contactsV1.ContactsServiceClient, config.contactsAddress ?? '127.0.0.1:50051');
    ctx.lifecycle.onStop('contacts client', () => contacts.close());
    directory = grpcDirectory(contacts.client);
  }
  const flows = new Flows(pool);
  const cascades = new Cascades(pool, flows, directory);
  const reviews = new Reviews(pool, directory, { publicBaseUrl, minuteMs, feedbackWindowMinutes: config.feedbackWindowMinutes ?? 30 });

  const notifier = new Notifier(config.databaseUrl, SCHEMA, ctx.logger);
  const results = await consumeStepResults(bus, pool, ctx.logger, { minuteMs, onApplied: deps.onStepResult });
  ctx.lifecycle.onStop('step results consumer', () => results.drain());
  let dispatcher: RunningDispatcher | null = null;
  if (!deps.noDispatcher) {
    dispatcher = await startDispatcher({
      pool, bus, notifier, logger: ctx.logger, minuteMs, publicBaseUrl,
      channels: new ConfiguredChannels(directory, deps.channelsCacheMs),
      batchSize: config.dispatchBatchSize,
      beforeRound: () => results.whenRoom(),
      afterPublish: deps.afterPublish,
    });
    ctx.lifecycle.onStop('dispatcher', () => dispatcher?.stop());
    const watchdog = startResultWatchdog({
      pool, logger: ctx.logger, minuteMs,
      timeoutMinutes: config.stepResultTimeoutMinutes ?? DEFAULT_STEP_RESULT_TIMEOUT_MINUTES,
      maxAttempts: config.stepResultMaxAttempts ?? DEFAULT_STEP_RESULT_MAX_ATTEMPTS,
    });
    ctx.lifecycle.onStop('result watchdog', () => watchdog.stop());
  }
  const relay = await startOutboxRelay({ pool, bus, notifier, logger: ctx.logger });
  ctx.lifecycle.onStop('outbox relay', () => relay.stop());
  await notifier.start();
  ctx.lifecycle.onStop('LISTEN connection', () => notifier.stop());

  const server = await startGrpcServer({
    host: config.grpcHost,
    port: config.grpcPort,
    services: [schedulerGrpcService({ flows, cascades, reviews }, ctx.logger)],
    health: ctx.health,
    logger: ctx.logger,
  });
  ctx.lifecycle.onStop('scheduler gRPC server', () => server.stop());
  ctx.logger.info({ port: server.port, minuteMs }, 'cascade-scheduler gRPC listening');
  return { grpcPort: server.port, bus, flows, cascades, reviews, dispatcher, results };
}
