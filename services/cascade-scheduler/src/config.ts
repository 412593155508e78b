import { readEnv, envField, ConfigError, type Env } from '@rrs/runtime';
import { z } from 'zod';
import { DEFAULT_ALERT_HOLD_MS } from '@rrs/proto';
import { DEVELOPMENT_PERSON_HASH_KEY } from './personHash';

export const DEFAULT_MINUTE_MS = 60_000;

export interface SchedulerConfig {
  databaseUrl: string;
  natsUrl: string;
  busPrefix: string;
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
  /** Flow minutes a dispatched step waits for its sender's result before the watchdog acts. */
  stepResultTimeoutMinutes: number;
  /** Dispatches of a step without a result before it fails `no_result`. */
  stepResultMaxAttempts: number;
  /** How long a low rating's alert waits for the private feedback (ms). */
  alertHoldMs: number;
  /** The key of the keyed hashes the opt-out ledger keeps of erased addresses (personHash.ts). */
  personHashKey: string;
  /** Production without PERSON_HASH_KEY: warned about at start (personHashKey below). */
  personHashKeyMissing: boolean;
  /** Wait between retention rounds that found nothing more (ms). */
  retentionIntervalMs: number;
  /** Rows per retention transaction. */
  retentionBatchSize: number;
}

/**
 * A sender retries a step for at most SENDER_MAX_DELIVER (10) deliveries, backing off 1 s doubling to
 * 60 s (243 s of waits) with up to SENDER_ACK_WAIT_MS (30 s) per delivery: about 9 minutes. Twice
 * that and more covers a provider's Retry-After and a short backlog, so the watchdog acts only on
 * results that are really lost.
 */
export const DEFAULT_STEP_RESULT_TIMEOUT_MINUTES = 30;
export const DEFAULT_STEP_RESULT_MAX_ATTEMPTS = 3;

export function buildConfig(env: Env): SchedulerConfig {
  const vars = readEnv(
    {
      DATABASE_URL: envField.url(['postgres', 'postgresql']),
      NATS_URL: envField.url(['nats', 'tls']).default('nats://127.0.0.1:4222'),
      BUS_PREFIX: envField.busPrefix(),
      GRPC_HOST: envField.host(),
      GRPC_PORT: envField.port(50052),
      OPS_PORT: envField.port(9465),
      LOG_LEVEL: envField.logLevel(),
      NODE_ENV: envField.nodeEnv(),
      CONTACTS_ADDR: z.string().regex(/^[^:\s]+:\d{1,5}$/, 'must be host:port').default('127.0.0.1:50051'),
      PUBLIC_BASE_URL: envField.url(['http', 'https']).default('http://localhost:8080'),
      DELAY_MINUTE_MS: z.coerce.number().int().min(1).max(DEFAULT_MINUTE_MS).optional(),
      FEEDBACK_WINDOW_MINUTES: envField.int(30, 0),
      DISPATCH_BATCH_SIZE: envField.int(500, 1),
      STEP_RESULT_TIMEOUT_MINUTES: envField.int(DEFAULT_STEP_RESULT_TIMEOUT_MINUTES, 1),
      STEP_RESULT_MAX_ATTEMPTS: envField.int(DEFAULT_STEP_RESULT_MAX_ATTEMPTS, 1),
      ALERT_HOLD_MS: envField.int(DEFAULT_ALERT_HOLD_MS, 0),
      PERSON_HASH_KEY: z.string().min(16, 'must be at least 16 characters').optional(),
      RETENTION_INTERVAL_MS: envField.int(3_600_000, 1_000),
      RETENTION_BATCH_SIZE: envField.int(500, 1),
    },
    env,
  );
  return {
    databaseUrl: vars.DATABASE_URL,
    natsUrl: vars.NATS_URL,
    busPrefix: vars.BUS_PREFIX,
    grpcHost: vars.GRPC_HOST,
    grpcPort: vars.GRPC_PORT,
    opsPort: vars.OPS_PORT,
    logLevel: vars.LOG_LEVEL,
    contactsAddress: vars.CONTACTS_ADDR,
    publicBaseUrl: vars.PUBLIC_BASE_URL.replace(/\/+$/, ''),
    minuteMs: fastClock(vars.DELAY_MINUTE_MS, vars.NODE_ENV),
    feedbackWindowMinutes: vars.FEEDBACK_WINDOW_MINUTES,
    dispatchBatchSize: vars.DISPATCH_BATCH_SIZE,
    stepResultTimeoutMinutes: vars.STEP_RESULT_TIMEOUT_MINUTES,
    stepResultMaxAttempts: vars.STEP_RESULT_MAX_ATTEMPTS,
    alertHoldMs: vars.ALERT_HOLD_MS,
    personHashKey: personHashKey(vars.PERSON_HASH_KEY),
    personHashKeyMissing: vars.NODE_ENV === 'production' && vars.PERSON_HASH_KEY === undefined,
    retentionIntervalMs: vars.RETENTION_INTERVAL_MS,
    retentionBatchSize: vars.RETENTION_BATCH_SIZE,
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
