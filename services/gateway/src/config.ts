import { readEnv, envField, type Env } from '@rrs/runtime';
import { z } from 'zod';

export interface GatewayConfig {
  host: string;
  port: number;
  contactsAddress: string;
  schedulerAddress: string;
  /** Absolute base of public links (`/r/<token>`), e.g. `https://reviews.example.com`. */
  publicBaseUrl: string;
  /** Bearer token of the account admin API; unset = admin API disabled. */
  adminToken?: string;
  /** Unset = in-memory rate limits and auth cache (single replica only). */
  redisUrl?: string;
  logLevel: string;
}

const address = () => z.string().regex(/^[^:\s]+:\d{1,5}$/, 'must be host:port');

export function buildConfig(env: Env): GatewayConfig {
  const e = readEnv(
    {
      HOST: envField.host(),
      PORT: envField.port(8080),
      CONTACTS_ADDR: address().default('127.0.0.1:50051'),
      SCHEDULER_ADDR: address().default('127.0.0.1:50052'),
      PUBLIC_BASE_URL: envField.url(['http', 'https']).optional(),
      ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
      REDIS_URL: envField.url(['redis', 'rediss']).optional(),
      LOG_LEVEL: envField.logLevel(),
    },
    env,
  );
  return {
    host: e.HOST,
    port: e.PORT,
    contactsAddress: e.CONTACTS_ADDR,
    schedulerAddress: e.SCHEDULER_ADDR,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/$/, ''),
    adminToken: e.ADMIN_TOKEN,
    redisUrl: e.REDIS_URL,
    logLevel: e.LOG_LEVEL,
  };
}
