import { join } from 'node:path';
import { contactsV1, DEFAULT_ALERT_HOLD_MS } from '@rrs/proto';
import { IDEMPOTENCY_MIGRATIONS, startIdempotencyPurge } from '@rrs/idempotency';
import { createGrpcClient, electHousekeepingLeader, Notifier, openBus, openServiceDatabase, SSD_PLANNER_SETTINGS, startGrpcServer, type Bus, type BusConfig, type ServiceContext } from '@rrs/runtime';
import { Cascades } from './cascades';
import { DEFAULT_DISPATCH_IN_FLIGHT_PER_CHANNEL, DEFAULT_DISPATCH_IN_FLIGHT_TARGET_MS, DISPATCH_IN_FLIGHT_MIN, DISPATCH_SMALL_REQUEST_HEADROOM, DEFAULT_MINUTE_MS, DEFAULT_STEP_RESULT_MAX_ATTEMPTS, DEFAULT_STEP_RESULT_TIMEOUT_MINUTES, type SchedulerConfig } from './config';
import { startDispatcher, type DispatcherOptions, type RunningDispatcher } from './dispatchDueSteps';
import type { InFlightBound } from './sql/dueSteps';
import { Flows } from './flows';
import { schedulerGrpcService } from './grpcApi';
import { People } from './people';
import { ConfiguredChannels, grpcOrganizationProfiles, type OrganizationProfiles } from './organizationProfiles';
import { startOutboxRelay } from './outboxRelay';
import { startRatingAlerts } from './ratingAlerts';
import { startRatingDigests } from './ratingDigests';
import { startRatingIntake, type RatingIntake, type RecordRating } from './ratingIntake';
import { startResponseWindowCloser } from './responseWindows';
import { startResultWatchdog } from './resultWatchdog';
import { Reviews } from './reviews';
import { SnapshotWriter } from './snapshots';
import { RecipientBudgets } from './recipientBudget';
import { consumeStepResults, type StepResultConsumer, type StepResultHandler } from './stepResultConsumer';
import { AddressHasher, DEVELOPMENT_PERSON_HASH_KEY } from './personHash';
import { PersonErasures } from './personErasures';
import { startRetention } from './retention';
import { startOverviewRollup } from './overviewRollup';

export const SCHEMA = 'scheduler';
/**
 * Planner costs of the scheduler's sessions (runtime's SSD_PLANNER_SETTINGS): with PostgreSQL's default
 * random_page_cost, claiming 1 000 steps from a due backlog of 40 000 sorts the whole backlog (~60 ms
 * instead of ~1 ms through the due index), and every batched step UPDATE hashes the whole steps table.
 * No JIT: a statement over a range whose bounds the planner cannot see (the overview's parts, an
 * array of ranges) is estimated at a ninth of the organization's history, and JIT compiled it in
 * ~200 ms — more than any statement of the scheduler takes to run (they all read through an index).
 */
export const SESSION_SETTINGS: Readonly<Record<string, string>> = Object.freeze({ ...SSD_PLANNER_SETTINGS, jit: 'off' });
export const MIGRATIONS_DIR = join(__dirname, '..', 'migrations');

export interface SchedulerDeps {
  /** The in-process bus in the all-in-one mode; otherwise the service connects to NATS itself. */
  bus?: Bus;
  /** What the scheduler asks `contacts`; by default a gRPC client of `contactsAddress`. */
  profiles?: OrganizationProfiles;
  onStepResult?: StepResultHandler;
  /** Test hook, see DispatcherOptions. */
  afterPublish?: DispatcherOptions['afterPublish'];
  /** Run no dispatcher in this process (tests that start their own). */
  noDispatcher?: boolean;
  /** How long the dispatcher trusts an answer of `contacts` about configured channels (default 5 000 ms). */
  channelsCacheMs?: number;
  /** Test hook: wraps how the ratings intake records a rating (e.g. to hold it while a test looks). */
  recordRating?: (record: RecordRating) => RecordRating;
}

/** The bus settings are needed only when no bus is handed in (`deps.bus`, as the all-in-one does). */
export type SchedulerStartConfig = Pick<SchedulerConfig, 'databaseUrl' | 'grpcHost' | 'grpcPort'> &
  Partial<BusConfig> &
  Partial<Pick<SchedulerConfig, 'contactsAddress' | 'publicBaseUrl' | 'minuteMs' | 'feedbackWindowMinutes' | 'dispatchBatchSize' | 'dispatchInFlightPerChannel' | 'dispatchInFlightTargetMs' | 'stepResultTimeoutMinutes' | 'stepResultMaxAttempts' | 'alertHoldMs' | 'recipientQuotas' | 'personHashKey' | 'personHashKeyMissing' | 'retentionIntervalMs' | 'retentionBatchSize' | 'overviewRollupIntervalMs'>>;

export interface RunningScheduler {
  grpcPort: number;
  bus: Bus;
  flows: Flows;
  cascades: Cascades;
  reviews: Reviews;
  dispatcher: RunningDispatcher | null;
  results: StepResultConsumer;
  ratings: RatingIntake;
}

/** The dispatcher's in-flight bound per channel (docs/operations.md, "Fair share"); 0 in-flight: none. */
function inFlightBound(config: SchedulerStartConfig): InFlightBound | null {
  const max = config.dispatchInFlightPerChannel ?? DEFAULT_DISPATCH_IN_FLIGHT_PER_CHANNEL;
  if (max === 0) return null;
  return { max, min: DISPATCH_IN_FLIGHT_MIN, targetMs: config.dispatchInFlightTargetMs ?? DEFAULT_DISPATCH_IN_FLIGHT_TARGET_MS, smallHeadroom: DISPATCH_SMALL_REQUEST_HEADROOM };
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
  startIdempotencyPurge(pool, ctx, undefined, electHousekeepingLeader(ctx, config.databaseUrl, 'cascade-scheduler'));
  // Without NATS the scheduler still takes cascades and ratings over gRPC (they wait in PostgreSQL): degraded, not unready.
  const bus = await openBus(config, ctx, 'cascade-scheduler', deps.bus, { required: false });

  let profiles = deps.profiles;
  if (!profiles) {
    const contacts = createGrpcClient(contactsV1.ContactsServiceClient, config.contactsAddress ?? '127.0.0.1:50051');
    ctx.lifecycle.onStop('contacts client', () => contacts.close());
    profiles = grpcOrganizationProfiles(contacts.client);
  }
  const snapshots = new SnapshotWriter();
  const flows = new Flows(pool);
  const hasher = new AddressHasher(config.personHashKey ?? DEVELOPMENT_PERSON_HASH_KEY);
  if (config.personHashKeyMissing) {
    ctx.logger.warn('PERSON_HASH_KEY is not set: the opt-outs of erased people are hashed with the development key; set a key of your own and keep it');
  }
  const budgets = new RecipientBudgets(config.recipientQuotas);
  const cascades = new Cascades({ pool, flows, profiles, snapshots, budgets, minuteMs, hasher });
  const reviews = new Reviews({ pool, bus, profiles, snapshots, budgets, publicBaseUrl, minuteMs, feedbackWindowMinutes: config.feedbackWindowMinutes ?? 30, alertHoldMs: config.alertHoldMs ?? DEFAULT_ALERT_HOLD_MS, hasher });

  // One LISTEN connection for the process: the dispatcher and the relay register their channels on it.
  const notifier = new Notifier(config.databaseUrl, SCHEMA, ctx.logger);
  let dispatcher: RunningDispatcher | null = null;
  const results = await consumeStepResults(bus, pool, ctx.logger, { minuteMs, onApplied: deps.onStepResult, onBatchApplied: () => dispatcher?.roomFreed() });
  ctx.lifecycle.onStop('step results consumer', () => results.drain());
  const recordRating: RecordRating = (token, rating) => reviews.submitRating(token, rating);
  // Before the dispatcher: ratings accepted during an outage are applied before any step is dispatched.
  const ratings = await startRatingIntake({ bus, logger: ctx.logger, record: deps.recordRating ? deps.recordRating(recordRating) : recordRating });
  ctx.lifecycle.onStop('ratings intake', () => ratings.drain());
  if (!deps.noDispatcher) {
    dispatcher = await startDispatcher({
      pool, bus, notifier, logger: ctx.logger, minuteMs, publicBaseUrl,
      channels: new ConfiguredChannels(profiles, deps.channelsCacheMs),
      hasher,
      batchSize: config.dispatchBatchSize,
      inFlight: inFlightBound(config),
      // Ratings first: a step due for a customer whose rating waits on the RATINGS stream must not go out.
      beforeRound: async () => {
        await ratings.ratingsFirst();
        await results.whenRoom();
      },
      afterPublish: deps.afterPublish,
    });
    ctx.lifecycle.onStop('dispatcher', () => dispatcher?.stop());
    const watchdog = startResultWatchdog({
      pool, bus, logger: ctx.logger, minuteMs,
      timeoutMinutes: config.stepResultTimeoutMinutes ?? DEFAULT_STEP_RESULT_TIMEOUT_MINUTES,
      maxAttempts: config.stepResultMaxAttempts ?? DEFAULT_STEP_RESULT_MAX_ATTEMPTS,
      resultsHeld: () => results.heldSteps(),
    });
    ctx.lifecycle.onStop('result watchdog', () => watchdog.stop());
  }
  const windows = startResponseWindowCloser({ pool, notifier, logger: ctx.logger, minuteMs });
  ctx.lifecycle.onStop('response windows', () => windows.stop());
  const relay = await startOutboxRelay({ pool, bus, notifier, logger: ctx.logger });
  ctx.lifecycle.onStop('outbox relay', () => relay.stop());
  // Rating alerts and digests go to the organization's people (docs/console.md, "Rating alerts").
  const alerts = startRatingAlerts({ pool, bus, notifier, logger: ctx.logger, profiles, publicBaseUrl });
  ctx.lifecycle.onStop('rating alerts', () => alerts.stop());
  // Personal data past each organization's retention is anonymized in the background (retention.ts).
  const retention = startRetention({ pool, hasher, logger: ctx.logger, dayMs: minuteMs * 1440, intervalMs: config.retentionIntervalMs, batchSize: config.retentionBatchSize });
  ctx.lifecycle.onStop('retention', () => retention.stop());
  // The overview's counters of past days (overviewRollup.ts): the console's overview reads them instead of every request in range.
  const rollup = startOverviewRollup({ pool, logger: ctx.logger, intervalMs: config.overviewRollupIntervalMs });
  ctx.lifecycle.onStop('overview rollup', () => rollup.stop());
  const digests = startRatingDigests({ pool, bus, logger: ctx.logger, profiles, publicBaseUrl });
  ctx.lifecycle.onStop('rating digests', () => digests.stop());
  await notifier.start();
  ctx.lifecycle.onStop('LISTEN connection', () => notifier.stop());

  const server = await startGrpcServer({
    host: config.grpcHost,
    port: config.grpcPort,
    services: [schedulerGrpcService({ flows, cascades, reviews, people: new People({ pool, profiles }), erasures: new PersonErasures({ pool, profiles, hasher }), pool }, ctx.logger)],
    health: ctx.health,
    logger: ctx.logger,
  });
  ctx.lifecycle.onStop('scheduler gRPC server', () => server.stop());
  ctx.logger.info({ port: server.port, minuteMs }, 'cascade-scheduler gRPC listening');
  return { grpcPort: server.port, bus, flows, cascades, reviews, dispatcher, results, ratings };
}
