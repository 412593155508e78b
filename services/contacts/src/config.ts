import { readEnv, envField, type Env } from '@rrs/runtime';

export interface ContactsConfig {
  databaseUrl: string;
  grpcHost: string;
  grpcPort: number;
  opsPort: number;
  logLevel: string;
}

export function buildConfig(env: Env): ContactsConfig {
  const e = readEnv(
    {
      DATABASE_URL: envField.url(['postgres', 'postgresql']),
      GRPC_HOST: envField.host(),
      GRPC_PORT: envField.port(50051),
      OPS_PORT: envField.port(9464),
      LOG_LEVEL: envField.logLevel(),
    },
    env,
  );
  return { databaseUrl: e.DATABASE_URL, grpcHost: e.GRPC_HOST, grpcPort: e.GRPC_PORT, opsPort: e.OPS_PORT, logLevel: e.LOG_LEVEL };
}
