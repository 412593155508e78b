import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { Logger } from 'pino';

export type { Pool, PoolClient, QueryResult } from 'pg';

// int8 as JS number: counts and sequence ids here stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

export interface PoolOptions {
  url: string;
  /** The service's own schema; every connection's search_path is set to it. */
  schema: string;
  max?: number;
  applicationName?: string;
  /** Where lost connections are reported (warn); silent without one. */
  logger?: Logger;
  /** Session settings of every connection (`-c name=value` at connect), e.g. planner costs. */
  settings?: Record<string, string>;
}

function settingName(name: string): string {
  if (!/^[a-z_][a-z0-9_.]*$/.test(name)) throw new Error(`invalid PostgreSQL setting name: ${name}`);
  return name;
}

function settingValue(value: string): string {
  // The startup `options` string is split on spaces; a value needs none to stay one argument.
  if (!/^[\w.:-]+$/.test(value)) throw new Error(`unsupported PostgreSQL setting value: ${value}`);
  return value;
}

export function createPool(options: PoolOptions): pg.Pool {
  assertIdentifier(options.schema);
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.max ?? 10,
    application_name: options.applicationName ?? options.schema,
    options: [`-c search_path=${options.schema}`, ...Object.entries(options.settings ?? {}).map(([k, v]) => `-c ${settingName(k)}=${settingValue(v)}`)].join(' '),
    idleTimeoutMillis: 30_000,
  });
  // A client losing its connection (the server restarted, the backend was terminated) emits 'error'; with
  // no listener that would crash the process. An idle client is dropped by the pool; a checked-out one
  // fails its query in flight on its own and is discarded when released with that error.
  const lost = (err: Error): void => options.logger?.warn({ err, schema: options.schema }, 'database connection lost');
  pool.on('error', lost);
  pool.on('connect', (client) => {
    client.on('error', lost);
  });
  return pool;
}

function assertIdentifier(name: string): void {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`invalid schema name: ${name}`);
}

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** Reads `NNNN_name.sql` files from a folder, ordered by number. */
export function readMigrations(dir: string): Migration[] {
  const seen = new Set<number>();
  return readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .map((file) => {
      const m = /^(\d{4})_([a-z0-9_]+)\.sql$/.exec(file);
      if (!m) throw new Error(`migration file name must look like 0001_name.sql: ${file}`);
      const version = Number(m[1]);
      if (seen.has(version)) throw new Error(`two migrations numbered ${m[1]} in ${dir}`);
      seen.add(version);
      return { version, name: m[2], sql: readFileSync(join(dir, file), 'utf8') };
    })
    .sort((a, b) => a.version - b.version);
}

/**
 * Applies pending migrations to the service's schema. Replicas starting together serialize on an
 * advisory lock keyed by the schema, so each migration runs once; each runs in its own transaction.
 */
export async function migrate(pool: pg.Pool, options: { schema: string; dir: string; logger?: Logger; component?: string }): Promise<number[]> {
  // A schema may hold tables of several components (the service's own, a shared library's); each
  // numbers its migrations independently.
  const component = options.component ?? 'service';
  assertIdentifier(options.schema);
  const migrations = readMigrations(options.dir);
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query('SELECT pg_advisory_lock(hashtext($1))', [`rrs-migrate:${options.schema}`]);
    try {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${options.schema}`);
      await client.query(`CREATE TABLE IF NOT EXISTS ${options.schema}.schema_migrations (
        component text NOT NULL, version integer NOT NULL, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (component, version))`);
      const { rows } = await client.query<{ version: number }>(`SELECT version FROM ${options.schema}.schema_migrations WHERE component = $1`, [component]);
      const done = new Set(rows.map((r) => r.version));
      for (const m of migrations) {
        if (done.has(m.version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(`SET LOCAL search_path TO ${options.schema}`);
          await client.query(m.sql);
          await client.query(`INSERT INTO ${options.schema}.schema_migrations (component, version, name) VALUES ($1, $2, $3)`, [component, m.version, m.name]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw new Error(`migration ${options.schema}/${component === 'service' ? '' : `${component}/`}${String(m.version).padStart(4, '0')}_${m.name} failed: ${(err as Error).message}`, { cause: err });
        }
        applied.push(m.version);
        options.logger?.info({ schema: options.schema, component, version: m.version, name: m.name }, 'migration applied');
      }
    } finally {
      await client.query('SELECT pg_advisory_unlock(hashtext($1))', [`rrs-migrate:${options.schema}`]);
    }
  } finally {
    client.release();
  }
  return applied;
}

/**
 * Runs `fn` in a transaction on one client: COMMIT when it returns, ROLLBACK when it throws. The one
 * policy for a broken connection: a client whose ROLLBACK failed (the connection died, the server
 * restarted) is destroyed, never handed back to the pool; one whose ROLLBACK worked is reused, whatever
 * `fn` threw. Every transaction of every service goes through here.
 */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    try {
      await client.query('ROLLBACK');
    } catch (rollbackFailed) {
      broken = rollbackFailed as Error;
    }
    throw err;
  } finally {
    client.release(broken);
  }
}

/**
 * Planner costs of the sessions of the services whose statements touch a few hundred rows of a large,
 * growing table by primary key (the scheduler, the senders' send logs). PostgreSQL's default
 * random_page_cost (4) models spinning disks; with it a batched UPDATE ... FROM unnest(ids) hashes the
 * whole table instead of probing its primary key (a send log of 7 500 rows: 3.8 ms for 128 completions,
 * seq scan), and claiming 1 000 due steps from a backlog of 40 000 sorts the backlog. 1.1 is the usual
 * value for SSDs and for a working set in memory.
 */
export const SSD_PLANNER_SETTINGS: Readonly<Record<string, string>> = Object.freeze({ random_page_cost: '1.1' });

/** Array elements that need no quoting in an array literal (and are not the word NULL). */
const BARE_ELEMENT = /^[\w.:+-]+$/;
/** Characters escaped inside a quoted array element. */
const ESCAPED_IN_ELEMENT = /[\\"]/;

/**
 * A PostgreSQL array literal (`{a,"b c",NULL}`) of the values, to pass as one text parameter and cast
 * (`$1::uuid[]`). node-pg serializes an array parameter element by element (a type dispatch, two
 * regex replaces and a quoted copy per element, and a hand-formatted string per Date); for the batch
 * statements of the scheduler that was a quarter of its CPU. Dates are written as epoch milliseconds:
 * cast with `$n::float8[]` and convert with `to_timestamp(x / 1000)`.
 */
export function sqlArray(
  values: ReadonlyArray<string | number | boolean | Date | null | undefined>,
  /** `bare`: the strings are known to need no quoting (ids this service generated or read back). */
  options: { bare?: boolean } = {},
): string {
  if (options.bare) return `{${values.join(',')}}`;
  // Elements go into an array joined once: one flat string of the final length, where `+=` built a rope
  // of two nodes per element and flattened it (the scheduler's largest allocation at intake).
  const elements = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || v === undefined) elements[i] = 'NULL';
    else if (typeof v === 'number') {
      if (!Number.isFinite(v)) throw new Error(`cannot write ${v} to an array literal`);
      elements[i] = String(v);
    } else if (typeof v === 'boolean') elements[i] = v ? 't' : 'f';
    else if (v instanceof Date) elements[i] = String(v.getTime());
    else if (v !== '' && BARE_ELEMENT.test(v) && !(v.length === 4 && v.toUpperCase() === 'NULL')) elements[i] = v;
    // A global replace costs ~200 ns even when nothing matches (names, emails): asked only when something does.
    else elements[i] = ESCAPED_IN_ELEMENT.test(v) ? `"${v.replace(/[\\"]/g, '\\$&')}"` : `"${v}"`;
  }
  return `{${elements.join(',')}}`;
}

/** Network errors of a connection that could not be made or was cut. */
const NETWORK_ERROR_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);
/** SQLSTATEs of a server that is going away, starting, or full (class 08 is checked by prefix). */
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);
const CONNECTION_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection is closed)/;

/**
 * Whether an error means "the database cannot be reached now" (server down, restarting, connection cut
 * or refused), as opposed to a statement that failed: the same operation may succeed once the server is
 * back. The gRPC boundary answers these `unavailable` (503), not `internal`.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let current: unknown = err, depth = 0; current && depth < 5; depth++) {
    const { code, message, errors } = current as { code?: unknown; message?: unknown; errors?: unknown };
    if (typeof code === 'string' && (NETWORK_ERROR_CODES.has(code) || UNAVAILABLE_SQLSTATES.has(code) || /^08[0-9A-Z]{3}$/.test(code))) return true;
    if (typeof message === 'string' && CONNECTION_MESSAGES.test(message)) return true;
    // Node reports a refused connection to a host with several addresses as an AggregateError.
    if (Array.isArray(errors) && errors.some((inner) => isDatabaseUnavailable(inner))) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
