import { readEnv, envField, type Env } from '@rrs/runtime';

export interface SchedulerConfig {
  databaseUrl: string;
  natsUrl: string;
  busPrefix: string;
  grpcHost: string;
  grpcPort: number;
  opsPort: number;
  logLevel: string;
}

export function buildConfig(env: Env): SchedulerConfig {
  const e = readEnv(
    {
      DATABASE_URL: envField.url(['postgres', 'postgresql']),
      NATS_URL: envField.url(['nats', 'tls']).default('nats://127.0.0.1:4222'),
      BUS_PREFIX: envField.busPrefix(),
      GRPC_HOST: envField.host(),
      GRPC_PORT: envField.port(50052),
      OPS_PORT: envField.port(9465),
      LOG_LEVEL: envField.logLevel(),
    },
    env,
  );
  return {
    databaseUrl: e.DATABASE_URL,
    natsUrl: e.NATS_URL,
    busPrefix: e.BUS_PREFIX,
    grpcHost: e.GRPC_HOST,
    grpcPort: e.GRPC_PORT,
    opsPort: e.OPS_PORT,
    logLevel: e.LOG_LEVEL,
  };
}
