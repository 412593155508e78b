import { readEnv, envField, type Env } from '@rrs/runtime';
import { z } from 'zod';

export interface ContactsConfig {
  databaseUrl: string;
  grpcHost: string;
  grpcPort: number;
  opsPort: number;
  logLevel: string;
  /** How long a saved Idempotency-Key response of POST /contacts is kept. */
  idempotencyTtlMs: number;
}

export function buildConfig(env: Env): ContactsConfig {
  const e = readEnv(
    {
      DATABASE_URL: envField.url(['postgres', 'postgresql']),
      GRPC_HOST: envField.host(),
      GRPC_PORT: envField.port(50051),
      OPS_PORT: envField.port(9464),
      LOG_LEVEL: envField.logLevel(),
      IDEMPOTENCY_TTL_HOURS: z.coerce.number().positive('must be a positive number of hours').max(24 * 30, 'must be at most 720 hours').default(24),
    },
    env,
  );
  return {
    databaseUrl: e.DATABASE_URL,
    grpcHost: e.GRPC_HOST,
    grpcPort: e.GRPC_PORT,
    opsPort: e.OPS_PORT,
    logLevel: e.LOG_LEVEL,
    idempotencyTtlMs: Math.round(e.IDEMPOTENCY_TTL_HOURS * 3_600_000),
  };
}
