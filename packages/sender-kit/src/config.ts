import { z } from 'zod';
import { envField } from '@rrs/runtime';
import { parseProviderRates } from './providerRate';
import { DEFAULT_CHANNEL_TTL_MS } from './registry';

/**
 * Steps in flight per sender replica. Each in-flight step waits on round trips (the send log, the
 * provider, the result batch), and the send log and the results are written in batches of what is in
 * flight, so a deeper pipeline costs little CPU and sets the throughput: on 2 cores the all-in-one
 * sent ~1 400/s with 16 and ~3 500/s with 64; with 128 the distributed shapes went from ~1 600–2 000
 * to ~2 200–2 600 emails or SMS/s (SMSC's 14 connections stay the cap on calls out), with channel-sms
 * at ~190 MB of its 384 MB (docs/operations.md, Send path).
 */
export const DEFAULT_SENDER_CONCURRENCY = 128;

/** Env variables every sender reads; a sender's own config adds its provider's. */
export const senderEnvShape = {
  NATS_URL: envField.url(['nats', 'tls']).default('nats://127.0.0.1:4222'),
  BUS_PREFIX: envField.busPrefix(),
  /** The sender's send log lives in its own schema of this database. */
  DATABASE_URL: envField.url(['postgres', 'postgresql']),
  OPS_HOST: envField.host(),
  OPS_PORT: envField.port(9466),
  LOG_LEVEL: envField.logLevel(),
  SENDER_CONCURRENCY: envField.int(DEFAULT_SENDER_CONCURRENCY, 1),
  /** Deliveries of a step before it is dead-lettered. */
  SENDER_MAX_DELIVER: envField.int(10, 1),
  /** Ack deadline of a step message, and the lease of a send in progress. */
  SENDER_ACK_WAIT_MS: envField.int(30_000, 1_000),
  /** TTL of the `channels` KV bucket; entries are refreshed every third of it. */
  CHANNEL_TTL_MS: envField.int(DEFAULT_CHANNEL_TTL_MS, 1_000),
  /** Provider faults in a row that open a provider's circuit (ProviderChain). */
  PROVIDER_CIRCUIT_FAILURES: envField.int(5, 1),
  /** How long an open circuit skips its provider before one trial call. */
  PROVIDER_CIRCUIT_OPEN_MS: envField.int(30_000, 100),
  /** Provider accounts' send rates, `name=perSecond` pairs (`smtp=500,smsc=30`); none by default. */
  PROVIDER_RATE_LIMITS: z.string().regex(/^[a-z0-9_-]+=[1-9]\d*(,[a-z0-9_-]+=[1-9]\d*)*$/, 'must be name=perSecond pairs, e.g. smtp=500,smsc=30').optional(),
  /** Where provider rates are shared by the sender's replicas (without it, each replica keeps its own). */
  REDIS_URL: envField.url(['redis', 'rediss']).optional(),
};

export type SenderEnv = z.infer<z.ZodObject<typeof senderEnvShape>>;

export interface SenderBaseConfig {
  natsUrl: string;
  busPrefix: string;
  databaseUrl: string;
  opsHost: string;
  opsPort: number;
  logLevel: string;
  concurrency: number;
  maxDeliver: number;
  ackWaitMs: number;
  channelTtlMs: number;
  /** Circuit breaker of every provider of the sender's channels. */
  circuit: { failureThreshold: number; openMs: number };
  /** Send rates per provider name (calls a second), shared through Redis when `redisUrl` is set. */
  providerRates: Record<string, number>;
  redisUrl?: string;
}

export function senderBaseConfig(vars: SenderEnv): SenderBaseConfig {
  return {
    natsUrl: vars.NATS_URL,
    busPrefix: vars.BUS_PREFIX,
    databaseUrl: vars.DATABASE_URL,
    opsHost: vars.OPS_HOST,
    opsPort: vars.OPS_PORT,
    logLevel: vars.LOG_LEVEL,
    concurrency: vars.SENDER_CONCURRENCY,
    maxDeliver: vars.SENDER_MAX_DELIVER,
    ackWaitMs: vars.SENDER_ACK_WAIT_MS,
    channelTtlMs: vars.CHANNEL_TTL_MS,
    circuit: { failureThreshold: vars.PROVIDER_CIRCUIT_FAILURES, openMs: vars.PROVIDER_CIRCUIT_OPEN_MS },
    providerRates: parseProviderRates(vars.PROVIDER_RATE_LIMITS),
    redisUrl: vars.REDIS_URL,
  };
}
