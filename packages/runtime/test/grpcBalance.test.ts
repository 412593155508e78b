import { webhooksV1 } from '@rrs/proto';
import { createGrpcClient, Health, startGrpcServer, unaryService, type RunningGrpcServer } from '@rrs/runtime';
import { testLogger } from '@rrs/testkit';

/**
 * A gRPC client spreads its calls over every replica its target resolves to (round robin), rather than
 * riding one HTTP/2 connection to one replica. Two real servers stand for two replicas; the target lists
 * both addresses as a headless Service's DNS name would resolve to them.
 */
describe('gRPC clients balance across replicas', () => {
  const servers: RunningGrpcServer[] = [];
  const calls: number[] = [0, 0];

  beforeAll(async () => {
    const logger = testLogger();
    for (const replica of [0, 1]) {
      const health = new Health();
      health.setReady(true);
      const impl = new Proxy(
        {},
        {
          get: () => async () => {
            calls[replica]++;
            return { endpoints: [] };
          },
        },
      );
      servers.push(
        await startGrpcServer({
          host: '127.0.0.1',
          port: 0,
          health,
          logger,
          services: [
            {
              name: 'rrs.webhooks.v1.WebhooksService',
              definition: webhooksV1.WebhooksServiceService,
              implementation: unaryService('rrs.webhooks.v1.WebhooksService', webhooksV1.WebhooksServiceService, impl as never, logger),
            },
          ],
        }),
      );
    }
  });
  afterAll(async () => {
    for (const server of servers) await server.stop(100);
  });

  it('both replicas get calls, about evenly', async () => {
    const handle = createGrpcClient(webhooksV1.WebhooksServiceClient, `ipv4:127.0.0.1:${servers[0].port},127.0.0.1:${servers[1].port}`);
    try {
      for (let i = 0; i < 40; i++) await handle.client.listEndpoints({ organizationId: 'o' });
    } finally {
      handle.close();
    }
    expect(calls[0] + calls[1]).toBe(40);
    expect(calls[0]).toBeGreaterThanOrEqual(15);
    expect(calls[1]).toBeGreaterThanOrEqual(15);
  });

  it('a dns:/// target resolves and is called', async () => {
    const before = calls[0];
    const handle = createGrpcClient(webhooksV1.WebhooksServiceClient, `dns:///localhost:${servers[0].port}`);
    try {
      await handle.client.listEndpoints({ organizationId: 'o' });
    } finally {
      handle.close();
    }
    expect(calls[0]).toBe(before + 1);
  });
});
