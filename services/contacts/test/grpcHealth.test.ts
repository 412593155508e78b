import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { protoPath } from 'grpc-health-check';
import { createTestDatabase, testContext, type TestDatabase } from '@rrs/testkit';
import { startContacts } from '../src';

describe('contacts answers the standard gRPC health check', () => {
  let db: TestDatabase;
  const ctx = testContext('contacts-health');
  let client: grpc.Client & { check: Function };

  beforeAll(async () => {
    db = await createTestDatabase();
    const { grpcPort } = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    const definitions = grpc.loadPackageDefinition(protoLoader.loadSync(protoPath, { enums: String })) as unknown as { grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } } };
    client = new definitions.grpc.health.v1.Health(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure()) as never;
  });
  afterAll(async () => {
    client.close();
    await ctx.stop();
    await db.drop();
  });

  const check = (service: string) =>
    new Promise<string>((resolve, reject) => client.check({ service }, (err: Error | null, res: { status: string }) => (err ? reject(err) : resolve(res.status))));

  it('is NOT_SERVING until the process is ready, then SERVING, for the server and the named service', async () => {
    expect(await check('')).toBe('NOT_SERVING');
    ctx.health.setReady(true);
    expect(await check('')).toBe('SERVING');
    expect(await check('rrs.contacts.v1.ContactsService')).toBe('SERVING');
  });

  it('goes NOT_SERVING when shutdown begins', async () => {
    ctx.health.setReady(false);
    expect(await check('rrs.contacts.v1.ContactsService')).toBe('NOT_SERVING');
  });
});
