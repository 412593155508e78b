import type http from 'node:http';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { consumePersonErasures, contactsV1, schedulerV1 } from '@rrs/proto';
import { IDEMPOTENCY_MIGRATIONS, startIdempotencyPurge } from '@rrs/idempotency';
import { createGrpcClient, electHousekeepingLeader, Notifier, openBus, openServiceDatabase, reachAtStart, SecretBox, serveGrpc, type Bus, type BusConfig, type ServiceContext } from '@rrs/runtime';
import type { ConnectorsConfig } from './config';
import { Connectors } from './connectors';
import { createRequestPacer, crmClients } from './crm';
import { grpcReviewServices, type ReviewServices } from './reviewServices';
import { hooksRequestListener, startHooksServer } from './inbound';
import { purgeProcessed, startInboxWorker } from './inbox';
import { eraseConnectorRows } from './personErasure';
import { startReconciler } from './reconcile';
import { connectorsGrpcService } from './grpcApi';
import { consumeOutcomeEvents, startWriteBackWorker } from './writeBack';

export const SCHEMA = 'connectors';
export const MIGRATIONS_DIR = join(__dirname, '..', 'migrations');

/** The bus settings are needed only when no bus is handed in (`deps.bus`, as the all-in-one does). */
export type StartConnectorsConfig = Pick<
  ConnectorsConfig,
  'databaseUrl' | 'grpcHost' | 'grpcPort' | 'hooksHost' | 'hooksPort' | 'contactsAddress' | 'schedulerAddress' | 'publicBaseUrl' | 'secretKeys' | 'allowHttpCrm' | 'policy'
> &
  Partial<BusConfig> &
  Partial<Pick<ConnectorsConfig, 'redisUrl' | 'amoCrmOAuth'>>;

export interface ConnectorsDeps {
  bus?: Bus;
  /** The directory and scheduler, when not reached over gRPC at the configured addresses. */
  reviewServices?: ReviewServices;
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
  const housekeeping = electHousekeepingLeader(ctx, config.databaseUrl, 'connectors');
  startIdempotencyPurge(pool, ctx, undefined, housekeeping);
  const retention = setInterval(
    () => void housekeeping.ifLeader(() => purgeProcessed(pool, policy.eventRetentionMs)).catch((err) => ctx.logger.warn({ err }, 'inbox purge failed')),
    3_600_000,
  );
  retention.unref();
  ctx.lifecycle.onStop('inbox purge', () => clearInterval(retention));

  let reviewServices = deps.reviewServices;
  if (!reviewServices) {
    const contacts = createGrpcClient(contactsV1.ContactsServiceClient, config.contactsAddress);
    const scheduler = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, config.schedulerAddress);
    ctx.lifecycle.onStop('directory and scheduler clients', () => {
      contacts.close();
      scheduler.close();
    });
    reviewServices = grpcReviewServices(contacts.client, scheduler.client);
  }

  let redis: Redis | undefined;
  if (config.redisUrl) {
    // No offline queue: while Redis is away, taking a turn fails at once and the work is retried later.
    redis = new Redis(config.redisUrl, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1, connectionName: 'rrs-connectors' });
    redis.on('error', (err) => ctx.logger.warn({ err }, 'redis connection error'));
    const client = redis;
    ctx.lifecycle.onStop('connectors redis', async () => void (await client.quit().catch(() => client.disconnect())));
    await reachAtStart({ variable: 'REDIS_URL', url: config.redisUrl, what: 'Redis' }, () => client.connect());
    // Without Redis the CRM hooks are still taken into the inbox; CRM calls wait for their turn: degraded.
    ctx.health.addCheck(
      'connectors-redis',
      async () => {
        await client.ping();
      },
      { required: false },
    );
  }

  const box = new SecretBox(config.secretKeys);
  const connectors = new Connectors(pool, box, reviewServices, { publicBaseUrl: config.publicBaseUrl, allowHttpCrm: config.allowHttpCrm }, ctx.logger);
  await connectors.reencryptCredentials();
  const pacer = createRequestPacer({ redis, keyPrefix: `rrs:connectors:${config.busPrefix ?? ''}` });
  const crm = crmClients(connectors, pacer, policy);

  const notifier = new Notifier(config.databaseUrl, 'connectors', ctx.logger);
  const inbox = startInboxWorker({ pool, connectors, crm, reviewServices, policy, logger: ctx.logger, notifier });
  const reconciler = startReconciler({ pool, connectors, crm, reviewServices, policy, logger: ctx.logger, notifier, onQueued: () => inbox.wake() });
  const writeBack = startWriteBackWorker({ pool, connectors, crm, reviewServices, policy, logger: ctx.logger, notifier });
  await notifier.start();
  ctx.lifecycle.onStop('connector workers', async () => {
    await Promise.all([inbox.stop(), reconciler.stop(), writeBack.stop()]);
    await notifier.stop();
  });

  // Without NATS, hooks and the inbox go on; outcome events wait in the stream: degraded, not unready.
  const bus = await openBus(config, ctx, 'connectors', deps.bus, { required: false });
  const sub = await consumeOutcomeEvents(bus, { pool, logger: ctx.logger }, () => writeBack.wake());
  ctx.lifecycle.onStop('outcome events consumer', () => sub.drain());
  const erasures = await consumePersonErasures(bus, { service: 'connectors', logger: ctx.logger }, async (erased) => {
    ctx.logger.info({ erasureId: erased.erasureId, organizationId: erased.organizationId, ...(await eraseConnectorRows(pool, erased)) }, 'person erased from the CRM inbox and write-backs');
  });
  ctx.lifecycle.onStop('erasures consumer', () => erasures.drain());

  const hookDeps = { connectors, logger: ctx.logger, onQueued: () => inbox.wake() };
  const hooks = await startHooksServer({ ...hookDeps, host: config.hooksHost, port: config.hooksPort });
  ctx.lifecycle.onStop('CRM hooks server', () => hooks.close());
  ctx.logger.info({ port: hooks.port }, 'CRM hooks listening (/hooks/crm)');

  // amoCRM's OAuth consent (console): the code exchange keeps the account's pace like every amoCRM call.
  const oauth = {
    pool, connectors, app: config.amoCrmOAuth, allowHttpCrm: config.allowHttpCrm,
    http: { pacer, perSecond: policy.amocrmPerSecond, timeoutMs: policy.httpTimeoutMs, maxRateWaitMs: policy.maxRateWaitMs },
  };
  const grpcPort = await serveGrpc(ctx, { name: 'connectors', host: config.grpcHost, port: config.grpcPort, services: [connectorsGrpcService(connectors, oauth, ctx.logger)] });
  return { grpcPort, hooksPort: hooks.port, hooksListener: hooksRequestListener(hookDeps), connectors };
}
