import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createGrpcClient, type ServiceContext } from '@rrs/runtime';
import { contactsV1, schedulerV1 } from '@rrs/proto';
import { createApp } from './app';
import type { Authenticator } from './auth';
import type { GatewayConfig } from './config';

export interface RunningGateway {
  port: number;
  url: string;
}

export async function startGateway(config: Pick<GatewayConfig, 'host' | 'port' | 'contactsAddress' | 'schedulerAddress' | 'adminToken' | 'redisUrl' | 'publicBaseUrl'>, ctx: ServiceContext): Promise<RunningGateway> {
  const contacts = createGrpcClient(contactsV1.ContactsServiceClient, config.contactsAddress);
  ctx.lifecycle.onStop('contacts client', () => contacts.close());
  const scheduler = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, config.schedulerAddress);
  ctx.lifecycle.onStop('scheduler client', () => scheduler.close());

  const authenticate: Authenticator = async (apiKey) => {
    const r = await contacts.client.authenticate({ apiKey });
    if (!r.organization) throw new Error('contacts answered Authenticate without an organization');
    return { organization: r.organization, keyId: r.keyId, scopes: r.scopes };
  };

  const app = createApp({ authenticate, clients: { contacts: contacts.client, scheduler: scheduler.client }, adminToken: config.adminToken, health: ctx.health, logger: ctx.logger });
  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  ctx.lifecycle.onStop('gateway HTTP server', () => new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  }));
  const port = (server.address() as AddressInfo).port;
  ctx.logger.info({ port }, 'gateway listening');
  return { port, url: `http://127.0.0.1:${port}` };
}
