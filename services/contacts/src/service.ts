import { join } from 'node:path';
import { openServiceDatabase, startGrpcServer, type ServiceContext } from '@rrs/runtime';
import { DEFAULT_IDEMPOTENCY_TTL_MS, IDEMPOTENCY_MIGRATIONS, startIdempotencyPurge } from '@rrs/idempotency';
import { Directory } from './directory';
import { ContactBook } from './contactBook';
import { Templates } from './templates';
import { ChannelSettings } from './channels';
import { SmsBalance } from './smsBalance';
import { contactsGrpcService } from './server';
import type { ContactsConfig } from './config';

export const SCHEMA = 'contacts';
export const MIGRATIONS_DIR = join(__dirname, '..', 'migrations');
const PURGE_EVERY_MS = 10 * 60_000;

export interface RunningContacts {
  grpcPort: number;
  directory: Directory;
  contacts: ContactBook;
  templates: Templates;
  channels: ChannelSettings;
  smsBalance: SmsBalance;
}

export async function startContacts(
  config: Pick<ContactsConfig, 'databaseUrl' | 'grpcHost' | 'grpcPort'> & Partial<Pick<ContactsConfig, 'idempotencyTtlMs'>>,
  ctx: ServiceContext,
): Promise<RunningContacts> {
  const pool = await openServiceDatabase(ctx, {
    url: config.databaseUrl,
    schema: SCHEMA,
    applicationName: 'contacts',
    migrations: [{ dir: MIGRATIONS_DIR }, IDEMPOTENCY_MIGRATIONS],
  });
  startIdempotencyPurge(pool, ctx, PURGE_EVERY_MS);

  const parts = {
    directory: new Directory(pool),
    contacts: new ContactBook(pool, { idempotencyTtlMs: config.idempotencyTtlMs ?? DEFAULT_IDEMPOTENCY_TTL_MS }),
    templates: new Templates(pool),
    channels: new ChannelSettings(pool),
    smsBalance: new SmsBalance(pool),
  };
  const server = await startGrpcServer({
    host: config.grpcHost,
    port: config.grpcPort,
    services: [contactsGrpcService(parts, ctx.logger)],
    health: ctx.health,
    logger: ctx.logger,
  });
  ctx.lifecycle.onStop('contacts gRPC server', () => server.stop());
  ctx.logger.info({ port: server.port }, 'contacts gRPC listening');
  return { grpcPort: server.port, ...parts };
}
