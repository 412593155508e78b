import { z } from 'zod';
import { envField } from '@rrs/runtime';

/** Env variables every sender reads; a sender's own config adds its provider's. */
export const senderEnvShape = {
  NATS_URL: envField.url(['nats', 'tls']).default('nats://127.0.0.1:4222'),
  BUS_PREFIX: envField.busPrefix(),
  OPS_HOST: envField.host(),
  OPS_PORT: envField.port(9466),
  LOG_LEVEL: envField.logLevel(),
  SENDER_CONCURRENCY: envField.int(16, 1),
};

export type SenderEnv = z.infer<z.ZodObject<typeof senderEnvShape>>;

export interface SenderBaseConfig {
  natsUrl: string;
  busPrefix: string;
  opsHost: string;
  opsPort: number;
  logLevel: string;
  concurrency: number;
}

export function senderBaseConfig(e: SenderEnv): SenderBaseConfig {
  return { natsUrl: e.NATS_URL, busPrefix: e.BUS_PREFIX, opsHost: e.OPS_HOST, opsPort: e.OPS_PORT, logLevel: e.LOG_LEVEL, concurrency: e.SENDER_CONCURRENCY };
}
