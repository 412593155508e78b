import { startContacts, type RunningContacts } from '@rrs/contacts';
import { createTestDatabase, testContext, type TestDatabase } from '@rrs/testkit';
import { startGateway, type GatewayDeps, type GatewayStartConfig } from '../src';

export interface DirectoryStack {
  ctx: ReturnType<typeof testContext>;
  db: TestDatabase;
  contacts: RunningContacts;
  /** The gateway's base URL. */
  base: string;
  close(): Promise<void>;
}

/** A gateway in front of the real contacts service on a fresh database; nothing listens where the scheduler would. */
export async function startDirectoryStack(name: string, config: Partial<GatewayStartConfig> = {}, deps: GatewayDeps = {}): Promise<DirectoryStack> {
  const db = await createTestDatabase();
  const ctx = testContext(name);
  const contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
  const gateway = await startGateway(
    { host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: '127.0.0.1:1', publicBaseUrl: 'http://localhost', ...config },
    ctx,
    deps,
  );
  ctx.health.setReady(true);
  return {
    ctx,
    db,
    contacts,
    base: gateway.url,
    close: async () => {
      await ctx.stop();
      await db.drop();
    },
  };
}
