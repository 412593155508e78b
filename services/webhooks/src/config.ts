import { busConfig, busEnvShape, ConfigError, envField, grpcServiceConfig, grpcServiceEnvShape, parseSecretKeys, readEnv, type BusConfig, type Env, type GrpcServiceConfig } from '@rrs/runtime';
import { z } from 'zod';
import type { DeliveryPolicy } from './deliveries';
import { PRODUCTION_RETRY_SCHEDULE_MS } from './schedule';

export interface WebhooksConfig extends GrpcServiceConfig, BusConfig {
  /** Dev setting (all-in-one mode): endpoints may be plain http on loopback. Never in production. */
  allowLoopbackHttp: boolean;
  /** Attempts in flight at once per replica. */
  concurrency: number;
  policy: DeliveryPolicy;
  /** Keys sealing the signing secrets at rest (WEBHOOK_SECRET_KEYS), the first one sealing. */
  secretKeys: Buffer[];
}

const DAY_MS = 24 * 3_600_000;

/** The production delivery policy: the retry schedule as specified, 15 s per attempt, 5 days of failures, 1 day of secret overlap. */
export const DEFAULT_DELIVERY_POLICY: DeliveryPolicy = {
  retryScheduleMs: PRODUCTION_RETRY_SCHEDULE_MS,
  timeoutMs: 15_000,
  disableAfterMs: 5 * DAY_MS,
  secretGraceMs: DAY_MS,
  logRetentionMs: 30 * DAY_MS,
  claimLeaseMs: 4_000,
};

/** `0,5000,300000`: the delay before each attempt, in ms. */
const scheduleField = () =>
  z
    .string()
    .regex(/^\d+(,\d+)*$/, 'must be comma-separated delays in ms, e.g. 0,5000,300000')
    .transform((v) => v.split(',').map(Number))
    .optional();

export function buildConfig(env: Env): WebhooksConfig {
  const vars = readEnv(
    {
      ...grpcServiceEnvShape,
      GRPC_PORT: envField.port(50053),
      OPS_PORT: envField.port(9469),
      ...busEnvShape,
      NODE_ENV: envField.nodeEnv(),
      WEBHOOK_ALLOW_LOOPBACK_HTTP: envField.bool(false),
      WEBHOOK_CONCURRENCY: envField.int(16, 1),
      WEBHOOK_TIMEOUT_MS: envField.int(DEFAULT_DELIVERY_POLICY.timeoutMs, 100),
      WEBHOOK_RETRY_SCHEDULE_MS: scheduleField(),
      WEBHOOK_DISABLE_AFTER_MS: envField.int(DEFAULT_DELIVERY_POLICY.disableAfterMs, 1),
      WEBHOOK_SECRET_GRACE_MS: envField.int(DEFAULT_DELIVERY_POLICY.secretGraceMs, 0),
      WEBHOOK_LOG_RETENTION_DAYS: envField.int(30, 1),
      WEBHOOK_CLAIM_LEASE_MS: envField.int(DEFAULT_DELIVERY_POLICY.claimLeaseMs, 300),
      WEBHOOK_SECRET_KEYS: z.string().optional(),
    },
    env,
  );
  if (vars.NODE_ENV === 'production' && vars.WEBHOOK_ALLOW_LOOPBACK_HTTP) {
    throw new ConfigError('WEBHOOK_ALLOW_LOOPBACK_HTTP', 'loopback webhooks are a development setting and are refused when NODE_ENV=production');
  }
  return {
    ...grpcServiceConfig(vars),
    ...busConfig(vars),
    allowLoopbackHttp: vars.WEBHOOK_ALLOW_LOOPBACK_HTTP,
    concurrency: vars.WEBHOOK_CONCURRENCY,
    secretKeys: parseSecretKeys(vars.WEBHOOK_SECRET_KEYS, 'WEBHOOK_SECRET_KEYS'),
    policy: {
      retryScheduleMs: vars.WEBHOOK_RETRY_SCHEDULE_MS ?? PRODUCTION_RETRY_SCHEDULE_MS,
      timeoutMs: vars.WEBHOOK_TIMEOUT_MS,
      disableAfterMs: vars.WEBHOOK_DISABLE_AFTER_MS,
      secretGraceMs: vars.WEBHOOK_SECRET_GRACE_MS,
      logRetentionMs: vars.WEBHOOK_LOG_RETENTION_DAYS * DAY_MS,
      claimLeaseMs: vars.WEBHOOK_CLAIM_LEASE_MS,
    },
  };
}
