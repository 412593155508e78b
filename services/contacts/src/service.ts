import { join } from 'node:path';
import { electHousekeepingLeader, openServiceDatabase, serveGrpc, type ServiceContext } from '@rrs/runtime';
import { DEFAULT_IDEMPOTENCY_TTL_MS, IDEMPOTENCY_MIGRATIONS, startIdempotencyPurge } from '@rrs/idempotency';
import { Directory } from './directory';
import { ContactBook } from './contactBook';
import { Templates } from './templates';
import { ChannelSettings } from './channels';
import { SmsBalance } from './smsBalance';
import { Members } from './members';
import { SendingProfiles } from './sendingProfile';
import { schedulePurgeExpiredMemberTokens } from './memberTokenPurge';
import { contactsGrpcService, type ContactsParts } from './grpcApi';
import type { ContactsConfig } from './config';

export const SCHEMA = 'contacts';
export const MIGRATIONS_DIR = join(__dirname, '..', 'migrations');
const PURGE_EVERY_MS = 10 * 60_000;

export interface RunningContacts extends ContactsParts {
  grpcPort: number;
}

export type StartContactsConfig = Pick<ContactsConfig, 'databaseUrl' | 'grpcHost' | 'grpcPort'> & Partial<Pick<ContactsConfig, 'idempotencyTtlMs'>>;

/** The directory: its schema migrated, the idempotency purge running, and its gRPC API served. */
export async function startContacts(config: StartContactsConfig, ctx: ServiceContext): Promise<RunningContacts> {
  const pool = await openServiceDatabase(ctx, {
    url: config.databaseUrl,
    schema: SCHEMA,
    applicationName: 'contacts',
    migrations: [{ dir: MIGRATIONS_DIR }, IDEMPOTENCY_MIGRATIONS],
  });
  const housekeeping = electHousekeepingLeader(ctx, config.databaseUrl, 'contacts');
  startIdempotencyPurge(pool, ctx, PURGE_EVERY_MS, housekeeping);
  ctx.lifecycle.onStop('expired member token purge', schedulePurgeExpiredMemberTokens(pool, ctx.logger, housekeeping));

  const directory = new Directory(pool);
  const parts: ContactsParts = {
    directory,
    contacts: new ContactBook(pool, { idempotencyTtlMs: config.idempotencyTtlMs ?? DEFAULT_IDEMPOTENCY_TTL_MS }),
    templates: new Templates(pool),
    channels: new ChannelSettings(pool),
    smsBalance: new SmsBalance(pool),
    members: new Members(pool, directory),
    profiles: new SendingProfiles(pool),
  };
  const grpcPort = await serveGrpc(ctx, { name: 'contacts', host: config.grpcHost, port: config.grpcPort, services: [contactsGrpcService(parts, ctx.logger)] });
  return { grpcPort, ...parts };
}
