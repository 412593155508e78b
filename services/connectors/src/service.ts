import type http from 'node:http';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { contactsV1, schedulerV1 } from '@rrs/proto';
import { IDEMPOTENCY_MIGRATIONS, startIdempotencyPurge } from '@rrs/idempotency';
import { createGrpcClient, Notifier, openBus, openServiceDatabase, SecretBox, startGrpcServer, type Bus, type BusConfig, type ServiceContext } from '@rrs/runtime';
import type { ConnectorsConfig } from './config';
import { Connectors } from './connectors';
import { createRequestPacer, crmClients } from './crm';
import { grpcDirectory, type Directory } from './directory';
import { hooksRequestListener, startHooksServer } from './inbound';
import { purgeProcessed, startInboxWorker } from './inbox';
import { startReconciler } from './reconcile';
import { connectorsGrpcService } from './server';
import { consumeOutcomeEvents, startWriteBackWorker } from './writeBack';

export const SCHEMA = 'connectors';
export const MIGRATIONS_DIR = join(__dirname, '..', 'migrations');

/** The bus settings are needed only when no bus is handed in (`deps.bus`, as the all-in-one does). */
export type StartConnectorsConfig = Pick<
  ConnectorsConfig,
  'databaseUrl' | 'grpcHost' | 'grpcPort' | 'hooksHost' | 'hooksPort' | 'contactsAddress' | 'schedulerAddress' | 'publicBaseUrl' | 'secretKeys' | 'allowHttpCrm' | 'policy'
> &
  Partial<BusConfig> &
  Partial<Pick<ConnectorsConfig, 'redisUrl'>>;

export interface ConnectorsDeps {
  bus?: Bus;
  /** The directory and scheduler, when not reached over gRPC at the configured addresses. */
  directory?: Directory;
}

export interface RunningConnectors {
  grpcPort: number;
  hooksPort: number;
  /** The CRM webhook endpoint as a request listener, for a process that serves `/hooks/crm/` on its own port. */
  hooksListener: http.RequestListener;
  connectors: Connectors;
}

export async function startConnectors(config: StartConnectorsConfig, ctx: ServiceContext, deps: ConnectorsDeps = {}): Promise<RunningConnectors> {
  const { policy } = config;
  const pool = await openServiceDatabase(ctx, {
    url: config.databaseUrl,
    schema: SCHEMA,
    applicationName: 'connectors',
    max: Math.max(10, policy.concurrency * 2 + 4),
    migrations: [{ dir: MIGRATIONS_DIR }, IDEMPOTENCY_MIGRATIONS],
  });
  startIdempotencyPurge(pool, ctx);
  const retention = setInterval(() => void purgeProcessed(pool, policy.eventRetentionMs).catch((err) => ctx.logger.warn({ err }, 'inbox purge failed')), 3_600_000);
  retention.unref();
  ctx.lifecycle.onStop('inbox purge', () => clearInterval(retention));

  let directory = deps.directory;
  if (!directory) {
    const contacts = createGrpcClient(contactsV1.ContactsServiceClient, config.contactsAddress);
    const scheduler = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, config.schedulerAddress);
    ctx.lifecycle.onStop('directory clients', () => {
      contacts.close();
      scheduler.close();
    });
    directory = grpcDirectory(contacts.client, scheduler.client);
  }

  let redis: Redis | undefined;
  if (config.redisUrl) {
    // No offline queue: while Redis is away, taking a turn fails at once and the work is retried later.
    redis = new Redis(config.redisUrl, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, connectionName: 'rrs-connectors' });
    redis.on('error', (err) => ctx.logger.warn({ err }, 'redis connection error'));
    await redis.connect();
    const r = redis;
    ctx.lifecycle.onStop('connectors redis', async () => void (await r.quit().catch(() => r.disconnect())));
  }

  const box = new SecretBox(config.secretKeys);
  const connectors = new Connectors(pool, box, directory, { publicBaseUrl: config.publicBaseUrl, allowHttpCrm: config.allowHttpCrm }, ctx.logger);
  await connectors.reencryptCredentials();
  const crm = crmClients(connectors, createRequestPacer({ redis, keyPrefix: `rrs:connectors:${config.busPrefix ?? ''}` }), policy);

  const notifier = new Notifier(config.databaseUrl, 'connectors', ctx.logger);
  const inbox = startInboxWorker({ pool, connectors, crm, directory, policy, logger: ctx.logger, notifier });
  const reconciler = startReconciler({ pool, connectors, crm, policy, logger: ctx.logger, notifier, onQueued: () => inbox.wake() });
  const writeBack = startWriteBackWorker({ pool, connectors, crm, directory, policy, logger: ctx.logger, notifier });
  await notifier.start();
  ctx.lifecycle.onStop('connector workers', async () => {
    await Promise.all([inbox.stop(), reconciler.stop(), writeBack.stop()]);
    await notifier.stop();
  });

  const bus = await openBus(config, ctx, 'connectors', deps.bus);
  const sub = await consumeOutcomeEvents(bus, { pool, logger: ctx.logger }, () => writeBack.wake());
  ctx.lifecycle.onStop('outcome events consumer', () => sub.drain());

  const hookDeps = { connectors, logger: ctx.logger, onQueued: () => inbox.wake() };
  const hooks = await startHooksServer({ ...hookDeps, host: config.hooksHost, port: config.hooksPort });
  ctx.lifecycle.onStop('CRM hooks server', () => hooks.close());
  ctx.logger.info({ port: hooks.port }, 'CRM hooks listening (/hooks/crm)');

  const server = await startGrpcServer({ host: config.grpcHost, port: config.grpcPort, services: [connectorsGrpcService(connectors, ctx.logger)], health: ctx.health, logger: ctx.logger });
  ctx.lifecycle.onStop('connectors gRPC server', () => server.stop());
  ctx.logger.info({ port: server.port }, 'connectors gRPC listening');
  return { grpcPort: server.port, hooksPort: hooks.port, hooksListener: hooksRequestListener(hookDeps), connectors };
}
