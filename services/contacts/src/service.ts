import { join } from 'node:path';
import { createPool, migrate, startGrpcServer, type ServiceContext } from '@rrs/runtime';
import { Directory } from './directory';
import { contactsGrpcService } from './server';
import type { ContactsConfig } from './config';

export const SCHEMA = 'contacts';
export const MIGRATIONS_DIR = join(__dirname, '..', 'migrations');

export interface RunningContacts {
  grpcPort: number;
  directory: Directory;
}

export async function startContacts(config: Pick<ContactsConfig, 'databaseUrl' | 'grpcHost' | 'grpcPort'>, ctx: ServiceContext): Promise<RunningContacts> {
  const pool = createPool({ url: config.databaseUrl, schema: SCHEMA, applicationName: 'contacts' });
  ctx.lifecycle.onStop('contacts pool', () => pool.end());
  await migrate(pool, { schema: SCHEMA, dir: MIGRATIONS_DIR, logger: ctx.logger });
  ctx.health.addCheck('contacts-postgres', async () => {
    await pool.query('SELECT 1');
  });
  const directory = new Directory(pool);
  const server = await startGrpcServer({
    host: config.grpcHost,
    port: config.grpcPort,
    services: [contactsGrpcService(directory, ctx.logger)],
    health: ctx.health,
    logger: ctx.logger,
  });
  ctx.lifecycle.onStop('contacts gRPC server', () => server.stop());
  ctx.logger.info({ port: server.port }, 'contacts gRPC listening');
  return { grpcPort: server.port, directory };
}
