import { readEnv, envField, ConfigError, type Env } from '@rrs/runtime';
import { z } from 'zod';
import { DEFAULT_ALERT_HOLD_MS, PLAN_RECIPIENT_QUOTAS, SMALL_REQUEST_LANE, type Plan } from '@rrs/proto';
import type { RecipientBudgetConfig } from './recipientBudget';
import { DEVELOPMENT_PERSON_HASH_KEY } from './personHash';

export const DEFAULT_MINUTE_MS = 60_000;

export interface SchedulerConfig {
  databaseUrl: string;
  natsUrl: string;
  busPrefix: string;
  /** Replicas of the streams when this service creates them (never changed on existing ones). */
  streamReplicas: number;
  grpcHost: string;
  grpcPort: number;
  opsPort: number;
  logLevel: string;
  /** The directory (`contacts`) gRPC address. */
  contactsAddress: string;
  /** Absolute base of the public links put in messages (`<base>/r/<token>`, `<base>/u/<token>`). */
  publicBaseUrl: string;
  /** Length of one flow minute in ms; less than 60 000 only with the fast clock (never in production). */
  minuteMs: number;
  /** How long (flow minutes) a low rating's finish event waits for the private feedback. */
  feedbackWindowMinutes: number;
  dispatchBatchSize: number;
  /**
   * Steps of one channel dispatched and still without a result, at most (0: no bound): the senders
   * take this much, the rest waits in PostgreSQL where the claim is fair (docs/operations.md, "Fair share").
   */
  dispatchInFlightPerChannel: number;
  /** How long a step waits behind its channel's steps in flight, about: the bound follows the channel's pace. */
  dispatchInFlightTargetMs: number;
  /** Flow minutes a dispatched step waits for its sender's result before the watchdog acts. */
  stepResultTimeoutMinutes: number;
  /** Dispatches of a step without a result before it fails `no_result`. */
  stepResultMaxAttempts: number;
  /** How long a low rating's alert waits for the private feedback (ms). */
  alertHoldMs: number;
  /** Recipients per minute and per day by plan (RECIPIENT_QUOTA_<PLAN>; unset = PLAN_RECIPIENT_QUOTAS of @rrs/proto). */
  recipientQuotas: RecipientBudgetConfig;
  /** The key of the keyed hashes the opt-out ledger keeps of erased addresses (personHash.ts). */
  personHashKey: string;
  /** Production without PERSON_HASH_KEY: warned about at start (personHashKey below). */
  personHashKeyMissing: boolean;
  /** Wait between retention rounds that found nothing more (ms). */
  retentionIntervalMs: number;
  /** Rows per retention transaction. */
  retentionBatchSize: number;
  /** Wait between the overview's roll-up rounds (overviewRollup.ts). */
  overviewRollupIntervalMs: number;
}

/**
 * RECIPIENT_QUOTA_TRIAL / _STANDARD / _PRO: `<per minute>/<per day>` recipients, overriding a plan's
 * budget of PLAN_RECIPIENT_QUOTAS (@rrs/proto, the documented numbers) for this deployment. Read by the
 * scheduler, which takes the budget for every entry point (recipientBudget.ts).
 */
const recipientQuotaField = (plan: Plan) =>
  z
    .string()
    .regex(/^\d{1,9}\/\d{1,10}$/, 'must be <recipients per minute>/<recipients per day>, e.g. 1000/20000')
    .transform((value) => {
      const [perMinute, perDay] = value.split('/').map(Number);
      return { perMinute, perDay };
    })
    .default(PLAN_RECIPIENT_QUOTAS[plan]);

export const recipientQuotaEnvShape = () => ({
  RECIPIENT_QUOTA_TRIAL: recipientQuotaField('trial'),
  RECIPIENT_QUOTA_STANDARD: recipientQuotaField('standard'),
  RECIPIENT_QUOTA_PRO: recipientQuotaField('pro'),
});

export function recipientQuotasOf(vars: { RECIPIENT_QUOTA_TRIAL: RecipientBudgetConfig[Plan]; RECIPIENT_QUOTA_STANDARD: RecipientBudgetConfig[Plan]; RECIPIENT_QUOTA_PRO: RecipientBudgetConfig[Plan] }): RecipientBudgetConfig {
  return { trial: vars.RECIPIENT_QUOTA_TRIAL, standard: vars.RECIPIENT_QUOTA_STANDARD, pro: vars.RECIPIENT_QUOTA_PRO };
}

/**
 * The dispatcher's in-flight bound (docs/operations.md, "Fair share"), read the same way by the scheduler
 * and by the all-in-one, which runs the scheduler in its process.
 */
export const dispatchBoundEnvShape = () => ({
  DISPATCH_IN_FLIGHT_PER_CHANNEL: envField.int(DEFAULT_DISPATCH_IN_FLIGHT_PER_CHANNEL, 0),
  DISPATCH_IN_FLIGHT_TARGET_MS: envField.int(DEFAULT_DISPATCH_IN_FLIGHT_TARGET_MS, 10),
});

export function dispatchBoundOf(vars: { DISPATCH_IN_FLIGHT_PER_CHANNEL: number; DISPATCH_IN_FLIGHT_TARGET_MS: number }): { dispatchInFlightPerChannel: number; dispatchInFlightTargetMs: number } {
  return { dispatchInFlightPerChannel: vars.DISPATCH_IN_FLIGHT_PER_CHANNEL, dispatchInFlightTargetMs: vars.DISPATCH_IN_FLIGHT_TARGET_MS };
}

/**
 * A sender retries a step for at most SENDER_MAX_DELIVER (10) deliveries, backing off 1 s doubling to
 * 60 s (243 s of waits) with up to SENDER_ACK_WAIT_MS (4 s, kept alive while a step is worked on) per delivery: a few minutes. Twice
 * that and more covers a provider's Retry-After and a short backlog, so the watchdog acts only on
 * results that are really lost.
 */
export const DEFAULT_STEP_RESULT_TIMEOUT_MINUTES = 30;
/** Steps of one channel in flight at most, by default: well above the senders' windows (128 per replica). */
export const DEFAULT_DISPATCH_IN_FLIGHT_PER_CHANNEL = 1000;
/** A step claimed now waits about this long behind its channel's steps in flight (ms). */
export const DEFAULT_DISPATCH_IN_FLIGHT_TARGET_MS = 100;
/**
 * However slow a channel, this many of its steps may be in flight: two sender replicas' windows (128
 * each), so the next window's steps already wait in the stream when a sender finishes one, across the
 * pipeline's own turnaround (dispatch → sender → result applied, 60–120 ms, about the target). An order's
 * message does not queue behind them: small requests' steps have their own subject and consumer, and go
 * ahead in a provider adapter's queue for a connection (docs/operations.md, "Fair share").
 */
export const DISPATCH_IN_FLIGHT_MIN = 256;
/**
 * Steps of small requests (fairShare.ts) have a lane of this many in flight past a channel's in-flight
 * bound, counted off their own steps in flight: an order's message is claimed as soon as it is due, not
 * when another organization's bulk has drained below the bound (docs/operations.md, "Fair share").
 */
export const DISPATCH_SMALL_REQUEST_HEADROOM = SMALL_REQUEST_LANE;
export const DEFAULT_STEP_RESULT_MAX_ATTEMPTS = 3;

export function buildConfig(env: Env): SchedulerConfig {
  const vars = readEnv(
    {
      DATABASE_URL: envField.url(['postgres', 'postgresql']),
      NATS_URL: envField.natsUrls().default('nats://127.0.0.1:4222'),
      BUS_PREFIX: envField.busPrefix(),
      BUS_STREAM_REPLICAS: envField.streamReplicas(),
      GRPC_HOST: envField.host(),
      GRPC_PORT: envField.port(50052),
      OPS_PORT: envField.port(9465),
      LOG_LEVEL: envField.logLevel(),
      NODE_ENV: envField.nodeEnv(),
      CONTACTS_ADDR: envField.address('127.0.0.1:50051'),
      PUBLIC_BASE_URL: envField.url(['http', 'https']).default('http://localhost:8080'),
      DELAY_MINUTE_MS: z.coerce.number().int().min(1).max(DEFAULT_MINUTE_MS).optional(),
      FEEDBACK_WINDOW_MINUTES: envField.int(30, 0),
      DISPATCH_BATCH_SIZE: envField.int(500, 1),
      ...dispatchBoundEnvShape(),
      STEP_RESULT_TIMEOUT_MINUTES: envField.int(DEFAULT_STEP_RESULT_TIMEOUT_MINUTES, 1),
      STEP_RESULT_MAX_ATTEMPTS: envField.int(DEFAULT_STEP_RESULT_MAX_ATTEMPTS, 1),
      ALERT_HOLD_MS: envField.int(DEFAULT_ALERT_HOLD_MS, 0),
      ...recipientQuotaEnvShape(),
      PERSON_HASH_KEY: z.string().min(16, 'must be at least 16 characters').optional(),
      RETENTION_INTERVAL_MS: envField.int(3_600_000, 1_000),
      RETENTION_BATCH_SIZE: envField.int(500, 1),
      OVERVIEW_ROLLUP_INTERVAL_MS: envField.int(600_000, 1_000),
    },
    env,
  );
  return {
    databaseUrl: vars.DATABASE_URL,
    natsUrl: vars.NATS_URL,
    busPrefix: vars.BUS_PREFIX,
    streamReplicas: vars.BUS_STREAM_REPLICAS,
    grpcHost: vars.GRPC_HOST,
    grpcPort: vars.GRPC_PORT,
    opsPort: vars.OPS_PORT,
    logLevel: vars.LOG_LEVEL,
    contactsAddress: vars.CONTACTS_ADDR,
    publicBaseUrl: vars.PUBLIC_BASE_URL.replace(/\/+$/, ''),
    minuteMs: fastClock(vars.DELAY_MINUTE_MS, vars.NODE_ENV),
    feedbackWindowMinutes: vars.FEEDBACK_WINDOW_MINUTES,
    dispatchBatchSize: vars.DISPATCH_BATCH_SIZE,
    ...dispatchBoundOf(vars),
    stepResultTimeoutMinutes: vars.STEP_RESULT_TIMEOUT_MINUTES,
    stepResultMaxAttempts: vars.STEP_RESULT_MAX_ATTEMPTS,
    alertHoldMs: vars.ALERT_HOLD_MS,
    recipientQuotas: recipientQuotasOf(vars),
    personHashKey: personHashKey(vars.PERSON_HASH_KEY),
    personHashKeyMissing: vars.NODE_ENV === 'production' && vars.PERSON_HASH_KEY === undefined,
    retentionIntervalMs: vars.RETENTION_INTERVAL_MS,
    retentionBatchSize: vars.RETENTION_BATCH_SIZE,
    overviewRollupIntervalMs: vars.OVERVIEW_ROLLUP_INTERVAL_MS,
  };
}

/** The fast clock is for demos and tests: refused in production, where a flow minute is a minute. */
export function fastClock(value: number | undefined, nodeEnv: string): number {
  if (value === undefined || value === DEFAULT_MINUTE_MS) return DEFAULT_MINUTE_MS;
  if (nodeEnv === 'production') throw new ConfigError('DELAY_MINUTE_MS', 'the fast clock is refused when NODE_ENV=production');
  return value;
}

/**
 * The person hash key. A hash made with the development key could be reversed by hashing candidate
 * addresses, so production must set its own (and keep it: a new key forgets the hashed opt-outs). For
 * now a production start without one is warned about (startScheduler), not refused: the chart does
 * not yet carry the variable (docs/operations.md, "Data lifecycle").
 */
export function personHashKey(value: string | undefined): string {
  return value ?? DEVELOPMENT_PERSON_HASH_KEY;
}
