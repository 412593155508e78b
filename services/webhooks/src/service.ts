import { join } from 'node:path';
import { consumePersonErasures } from '@rrs/proto';
import { electHousekeepingLeader, Notifier, openBus, openServiceDatabase, SecretBox, serveGrpc, type Bus, type BusConfig, type ServiceContext } from '@rrs/runtime';
import { IDEMPOTENCY_MIGRATIONS, startIdempotencyPurge } from '@rrs/idempotency';
import { watchDeliveryBacklog } from './backlog';
import type { WebhooksConfig } from './config';
import { WebhookEndpoints } from './endpoints';
import { consumeEvents } from './intake';
import { eraseDeliveries } from './personErasure';
import { schedulePurgeDeliveryLog } from './retention';
import { sealStoredSecrets } from './secrets';
import { webhooksGrpcService } from './grpcApi';
import { UrlGuard, type Resolver } from './urlGuard';
import { startDeliveryWorker, type DeliveryWorker } from './worker';

export const SCHEMA = 'webhooks';
export const MIGRATIONS_DIR = join(__dirname, '..', 'migrations');

/** The bus settings are needed only when no bus is handed in (`deps.bus`, as the all-in-one does). */
export type StartWebhooksConfig = Pick<WebhooksConfig, 'databaseUrl' | 'grpcHost' | 'grpcPort' | 'allowLoopbackHttp' | 'concurrency' | 'policy' | 'secretKeys'> & Partial<BusConfig>;

export interface WebhooksDeps {
  bus?: Bus;
  /** DNS for the SSRF guard; tests inject answers that change between registration and send. */
  resolve?: Resolver;
  /** CA certificates trusted for https endpoints instead of Node's bundle (tests with a local TLS receiver). */
  trustedCa?: string[];
}

export interface RunningWebhooks {
  grpcPort: number;
  endpoints: WebhookEndpoints;
  worker: DeliveryWorker;
}

export async function startWebhooks(config: StartWebhooksConfig, ctx: ServiceContext, deps: WebhooksDeps = {}): Promise<RunningWebhooks> {
  const pool = await openServiceDatabase(ctx, {
    url: config.databaseUrl,
    schema: SCHEMA,
    applicationName: 'webhooks',
    max: Math.max(10, Math.ceil(config.concurrency / 2) + 4),
    migrations: [{ dir: MIGRATIONS_DIR }, IDEMPOTENCY_MIGRATIONS],
  });
  const box = new SecretBox(config.secretKeys);
  // Before any delivery is claimed: secrets still stored as they are get sealed, older keys' re-sealed.
  await sealStoredSecrets(pool, box, ctx.logger);
  ctx.lifecycle.onStop('delivery backlog metrics', watchDeliveryBacklog(pool));
  const housekeeping = electHousekeepingLeader(ctx, config.databaseUrl, 'webhooks');
  startIdempotencyPurge(pool, ctx, undefined, housekeeping);
  const stopLogPurge = schedulePurgeDeliveryLog(pool, config.policy.logRetentionMs, 3_600_000, (err) => ctx.logger.warn({ err }, 'delivery log purge failed'), housekeeping);
  ctx.lifecycle.onStop('delivery log purge', stopLogPurge);

  const guard = new UrlGuard({ allowLoopbackHttp: config.allowLoopbackHttp, resolve: deps.resolve });
  // Every replica's worker hears deliveries queued anywhere (DUE_CHANNEL) on this process's LISTEN connection.
  const notifier = new Notifier(config.databaseUrl, SCHEMA, ctx.logger);
  const worker = startDeliveryWorker({ pool, guard, policy: config.policy, logger: ctx.logger, box, concurrency: config.concurrency, trustedCa: deps.trustedCa, notifier });
  ctx.lifecycle.onStop('webhook delivery worker', () => worker.stop());
  await notifier.start();
  ctx.lifecycle.onStop('LISTEN connection', () => notifier.stop());
  // A delivery queued by another replica before LISTEN was in place is claimed now.
  worker.wake();

  const endpoints = new WebhookEndpoints(pool, guard, config.policy, box, () => worker.wake());
  // Without NATS the deliveries already queued in PostgreSQL go on and new events wait in the stream: degraded.
  const bus = await openBus(config, ctx, 'webhooks', deps.bus, { required: false });
  const events = await consumeEvents(bus, pool, ctx.logger, () => worker.wake());
  ctx.lifecycle.onStop('events consumer', () => events.drain());
  const erasures = await consumePersonErasures(bus, { service: 'webhooks', logger: ctx.logger }, async (erased) => {
    ctx.logger.info({ erasureId: erased.erasureId, organizationId: erased.organizationId, ...(await eraseDeliveries(pool, erased)) }, 'person erased from the delivery log');
  });
  ctx.lifecycle.onStop('erasures consumer', () => erasures.drain());

  const grpcPort = await serveGrpc(ctx, { name: 'webhooks', host: config.grpcHost, port: config.grpcPort, services: [webhooksGrpcService(endpoints, ctx.logger)] });
  return { grpcPort, endpoints, worker };
}
