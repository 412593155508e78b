import { join } from 'node:path';
import { callServicesInProcess, collectProcessMetrics, connectJetStreamBus, createMemoryBus, type Bus, type ServiceContext } from '@rrs/runtime';
import { startContacts } from '@rrs/contacts';
import { startScheduler } from '@rrs/cascade-scheduler';
import { startEmailSender } from '@rrs/channel-email';
import { startSmsSender } from '@rrs/channel-sms';
import { MESSENGER_SENDER_CONCURRENCY, startMessengerSender } from '@rrs/channel-messenger';
import { DEFAULT_DELIVERY_POLICY, startWebhooks } from '@rrs/webhooks';
import { DEFAULT_CONNECTOR_POLICY, startConnectors } from '@rrs/connectors';
import { startChannelCatalog, startGateway } from '@rrs/gateway';
import { DEFAULT_SENDER_CONCURRENCY, devInboxRouter, SinkOutbox } from '@rrs/sender-kit';
import type { AllInOneConfig } from './config';
import { connectorSecretKeys, personHashKey, webhookSecretKeys } from './connectorKeys';
import { crmHooksRouter } from './crmHooks';
import { devBots, devBotsRouter } from './devBots';
import { startEmbeddedPostgres } from './embeddedPostgres';
import { seedDemo, type DemoState } from './seed';

export interface RunningAllInOne {
  url: string;
  /**
   * The demo organization, its key and its console person: seeded outside production only. In
   * production nothing is seeded and no secret is printed; organizations come from the admin API.
   */
  demo?: DemoState;
  outbox: SinkOutbox;
  bus: Bus;
  /** Whether /dev/* is served (never in production). */
  devInbox: boolean;
}

/**
 * Every service in one process, wired as in the distributed mode (the same gRPC clients and servers, the
 * same bus interface), with embedded defaults for whatever server is not configured. The gRPC calls
 * between them stay in the process (`callServicesInProcess`): same encoding, metadata, deadlines and
 * errors, without HTTP/2 over loopback, which cost the one process ~9 % of its CPU per message.
 */
/** The all-in-one outside production, which always has its demo organization. */
export type DevelopmentAllInOne = RunningAllInOne & { demo: DemoState };

export async function startAllInOne(config: AllInOneConfig & { production: false }, ctx: ServiceContext): Promise<DevelopmentAllInOne>;
export async function startAllInOne(config: AllInOneConfig, ctx: ServiceContext): Promise<RunningAllInOne>;
export async function startAllInOne(config: AllInOneConfig, ctx: ServiceContext): Promise<RunningAllInOne> {
  callServicesInProcess();
  collectProcessMetrics();
  const contextOf = (service: string): ServiceContext => ({ ...ctx, logger: ctx.logger.child({ service }) });
  const loopback = (port: number) => `127.0.0.1:${port}`;

  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    const embedded = await startEmbeddedPostgres({ dir: join(config.dataDir, 'postgres'), port: config.embeddedPostgresPort, logger: ctx.logger });
    ctx.lifecycle.onStop('embedded postgres', () => embedded.stop());
    databaseUrl = embedded.url;
  }

  let bus: Bus;
  if (config.natsUrl) {
    bus = await connectJetStreamBus({ url: config.natsUrl, name: 'all-in-one' });
    await bus.ensureStreams();
  } else {
    bus = createMemoryBus();
  }
  ctx.lifecycle.onStop('bus', () => bus.close());

  const outbox = new SinkOutbox();
  const grpc = { grpcHost: '127.0.0.1', grpcPort: 0 };

  const contacts = await startContacts({ databaseUrl, ...grpc }, contextOf('contacts'));
  const contactsAddress = loopback(contacts.grpcPort);
  const scheduler = await startScheduler(
    { databaseUrl, ...grpc, contactsAddress, publicBaseUrl: config.publicBaseUrl, minuteMs: config.minuteMs, recipientQuotas: config.recipientQuotas,
      dispatchInFlightPerChannel: config.dispatchInFlightPerChannel, dispatchInFlightTargetMs: config.dispatchInFlightTargetMs,
      personHashKey: personHashKey({ given: config.personHashKey, dataDir: config.dataDir, logger: ctx.logger }) },
    contextOf('cascade-scheduler'),
    { bus },
  );
  // Senders keep their send logs in this database and announce themselves in the channel catalog. With
  // REDIS_URL their provider rates (PROVIDER_RATE_LIMITS) and the messengers' send rates are counted there,
  // shared with any other process on the same accounts; without it this process keeps its own windows.
  const senderConfig = { databaseUrl, concurrency: DEFAULT_SENDER_CONCURRENCY, redisUrl: config.redisUrl };
  // Their providers are the senders' own variables (senders.ts); none outside production = the sinks.
  const senders = config.senders;
  await startEmailSender({ ...senderConfig, ...senders?.email }, contextOf('channel-email'), { bus, outbox });
  await startSmsSender({ ...senderConfig, ...senders?.sms, contactsAddress }, contextOf('channel-sms'), { bus, outbox });
  // Official bots configured (MAX_BOT_*, TELEGRAM_BOT_*), or a working account's receipts: on the senders'
  // webhook host and port. Otherwise, outside production, stand-ins for the official bots: the thank-you
  // page offers them, their deep links lead to /dev/bots/<channel>, and what they send shows in the dev
  // inbox (docs/channels.md "Official bots").
  const messengerSettings = senders?.messenger;
  const realBots = messengerSettings?.bots.max !== undefined || messengerSettings?.bots.telegram !== undefined;
  const receipts = messengerSettings?.max?.webhookToken !== undefined || messengerSettings?.telegram?.webhookToken !== undefined;
  const standIns = config.production || realBots ? undefined : devBots(config.publicBaseUrl, outbox);
  const webhook = (realBots || receipts) && messengerSettings ? { webhookHost: messengerSettings.bots.webhookHost, webhookPort: messengerSettings.bots.webhookPort } : { webhookHost: '127.0.0.1', webhookPort: 0 };
  const messenger = await startMessengerSender(
    {
      ...senderConfig,
      concurrency: MESSENGER_SENDER_CONCURRENCY,
      max: messengerSettings?.max,
      telegram: messengerSettings?.telegram,
      sink: messengerSettings?.sink,
      providerRates: messengerSettings?.providerRates,
      bots: { ...messengerSettings?.bots, ...webhook, schedulerAddress: loopback(scheduler.grpcPort) },
    },
    contextOf('channel-messenger'),
    { bus, outbox, bots: standIns?.bots },
  );
  const channelCatalog = await startChannelCatalog({ bus, logger: ctx.logger.child({ service: 'gateway' }) });
  ctx.lifecycle.onStop('channel catalog', () => channelCatalog.stop());
  // Loopback http receivers are a development setting: in production they would reach this process's own ports.
  const webhooks = await startWebhooks(
    { databaseUrl, ...grpc, allowLoopbackHttp: !config.production, concurrency: 16, policy: DEFAULT_DELIVERY_POLICY, secretKeys: webhookSecretKeys({ given: config.webhookSecretKeys, dataDir: config.dataDir, logger: ctx.logger }) },
    contextOf('webhooks'),
    { bus },
  );
  // The CRMs' webhooks are served on the main port (below); the connectors' own hooks listener stays on a loopback port nobody is told of.
  const connectors = await startConnectors(
    {
      databaseUrl,
      ...grpc,
      hooksHost: '127.0.0.1',
      hooksPort: 0,
      contactsAddress,
      schedulerAddress: loopback(scheduler.grpcPort),
      publicBaseUrl: config.publicBaseUrl,
      secretKeys: connectorSecretKeys({ given: config.connectorSecretKeys, dataDir: config.dataDir, logger: ctx.logger }),
      allowHttpCrm: config.allowHttpCrm,
      amoCrmOAuth: config.amoCrmOAuth,
      policy: DEFAULT_CONNECTOR_POLICY,
    },
    contextOf('connectors'),
    { bus },
  );

  // Production seeds nothing: a demo organization with an owner and a full-scope key, its secrets
  // printed in the log, would be a way in nobody asked for.
  const demo = config.production ? undefined : await seedDemo({
    stateFile: join(config.dataDir, 'demo.json'),
    directory: contacts.directory,
    templates: contacts.templates,
    channels: contacts.channels,
    flows: scheduler.flows,
    demoApiKey: config.demoApiKey,
    generateAdminToken: config.adminTokens === 'generate',
    members: contacts.members,
    demoEmail: config.demoEmail,
    demoPassword: config.demoPassword,
    logger: ctx.logger,
  });

  const gateway = await startGateway(
    {
      host: config.host,
      port: config.port,
      contactsAddress,
      schedulerAddress: loopback(scheduler.grpcPort),
      webhooksAddress: loopback(webhooks.grpcPort),
      connectorsAddress: loopback(connectors.grpcPort),
      adminTokens: config.adminTokens === 'generate' ? [demo!.adminToken!] : config.adminTokens,
      publicBaseUrl: config.publicBaseUrl,
      trustProxy: config.trustProxy,
      dnsServers: config.dnsServers,
      // With REDIS_URL its rate limits, recipient budgets, address limits and auth cache are counted there
      // (shared with any other gateway on the same Redis), under the gateway's default key prefix.
      redisUrl: config.redisUrl,
    },
    contextOf('gateway'),
    // The dev inbox (/dev/messages, /dev/inbox) lists what the sink providers "sent", for every
    // organization and without login: it does not exist in production. /hooks/crm/* are the CRMs' webhooks.
    {
      channelCatalog,
      bus,
      extraRouters: [
        ...(standIns ? [devInboxRouter(outbox), devBotsRouter({ bots: standIns.bots, webhookPort: () => messenger.botWebhookPort })] : []),
        crmHooksRouter(connectors.hooksListener),
      ],
    },
  );
  return { url: `http://localhost:${gateway.port}`, demo, outbox, bus, devInbox: !config.production };
}
