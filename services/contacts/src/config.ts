import { envField, grpcServiceConfig, grpcServiceEnvShape, readEnv, type Env, type GrpcServiceConfig } from '@rrs/runtime';
import { DEFAULT_IDEMPOTENCY_TTL_MS } from '@rrs/idempotency';
import { z } from 'zod';

export interface ContactsConfig extends GrpcServiceConfig {
  /** How long a saved Idempotency-Key response of POST /contacts is kept. */
  idempotencyTtlMs: number;
}

const HOUR_MS = 3_600_000;

export function buildConfig(env: Env): ContactsConfig {
  const vars = readEnv(
    {
      ...grpcServiceEnvShape,
      GRPC_PORT: envField.port(50051),
      OPS_PORT: envField.port(9464),
      IDEMPOTENCY_TTL_HOURS: z.coerce.number().positive('must be a positive number of hours').max(24 * 30, 'must be at most 720 hours').default(DEFAULT_IDEMPOTENCY_TTL_MS / HOUR_MS),
    },
    env,
  );
  return { ...grpcServiceConfig(vars), idempotencyTtlMs: Math.round(vars.IDEMPOTENCY_TTL_HOURS * HOUR_MS) };
}
