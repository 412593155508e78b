import { readEnv, envField, type Env } from '@rrs/runtime';

export interface WebhooksConfig {
  databaseUrl: string;
  natsUrl: string;
  busPrefix: string;
  opsHost: string;
  opsPort: number;
  logLevel: string;
}

export function buildConfig(env: Env): WebhooksConfig {
  const e = readEnv(
    {
      DATABASE_URL: envField.url(['postgres', 'postgresql']),
      NATS_URL: envField.url(['nats', 'tls']).default('nats://127.0.0.1:4222'),
      BUS_PREFIX: envField.busPrefix(),
      OPS_HOST: envField.host(),
      OPS_PORT: envField.port(9469),
      LOG_LEVEL: envField.logLevel(),
    },
    env,
  );
  return { databaseUrl: e.DATABASE_URL, natsUrl: e.NATS_URL, busPrefix: e.BUS_PREFIX, opsHost: e.OPS_HOST, opsPort: e.OPS_PORT, logLevel: e.LOG_LEVEL };
}
