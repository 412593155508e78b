/**
 * Helpers for tests against real servers. Each test file gets its own database, bus prefix and Redis
 * key prefix, so files run in parallel and never depend on what an earlier run left behind.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import pg from 'pg';
import { connect } from 'nats';
import { createLogger, Health, Lifecycle, type Logger, type Bus, type ServiceContext, connectJetStreamBus, createMemoryBus } from '@rrs/runtime';

export const TEST_PG_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const TEST_NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
export const TEST_REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export function uniqueName(label = 't'): string {
  return `${label}${Date.now().toString(36)}${randomBytes(4).toString('hex')}`.toLowerCase();
}

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** A new, empty database on the test PostgreSQL server. */
export async function createTestDatabase(label = 'rrs_test_'): Promise<TestDatabase> {
  const name = uniqueName(label).replace(/[^a-z0-9_]/g, '_');
  const admin = new pg.Client({ connectionString: TEST_PG_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(TEST_PG_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const c = new pg.Client({ connectionString: TEST_PG_URL });
      await c.connect();
      try {
        // pg's `pool.end()` resolves before its connections have closed: give them a moment, for FORCE
        // would terminate them, and a pool without an error listener then throws in whatever test runs next.
        const deadline = Date.now() + 2_000;
        while (Date.now() < deadline && (await c.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name])).rows[0].n > 0) {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

export interface TestBus {
  bus: Bus;
  prefix: string;
  /** Closes the bus and, for JetStream, deletes the streams and buckets made under its prefix. */
  cleanup(): Promise<void>;
}

export async function createTestBus(kind: 'memory' | 'jetstream'): Promise<TestBus> {
  const prefix = uniqueName('t');
  if (kind === 'memory') {
    const bus = createMemoryBus({ prefix });
    return { bus, prefix, cleanup: () => bus.close() };
  }
  const bus = await connectJetStreamBus({ url: TEST_NATS_URL, prefix, name: `test-${prefix}` });
  return {
    bus,
    prefix,
    async cleanup() {
      await bus.close();
      await deleteJetStreamPrefix(prefix);
    },
  };
}

export async function deleteJetStreamPrefix(prefix: string): Promise<void> {
  const nc = await connect({ servers: TEST_NATS_URL });
  try {
    const jsm = await nc.jetstreamManager();
    const upper = prefix.toUpperCase();
    for await (const s of jsm.streams.list()) {
      const name = s.config.name;
      if (name.startsWith(`${upper}_`) || name.startsWith(`KV_${prefix}_`)) await jsm.streams.delete(name);
    }
  } finally {
    await nc.close();
  }
}

/** Polls `probe` until it returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(probe: () => Promise<T | undefined | false> | T | undefined | false, options: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== false) return v as T;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${options.what ?? 'condition'}${last ? `: ${(last as Error).message}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 25));
  }
}

/** A logger whose lines are kept in memory (for asserting what was logged) instead of printed. */
export function testLogger(service = 'test'): Logger & { lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  const logger = createLogger({ service, level: process.env.TEST_LOG_LEVEL ?? 'info', destination });
  return Object.assign(logger, { lines });
}

/** A service context for starting services inside a test; `stop()` runs the shutdown sequence. */
export function testContext(service = 'test'): ServiceContext & { logger: Logger & { lines: string[] }; stop(): Promise<void> } {
  const logger = testLogger(service);
  const lifecycle = new Lifecycle(logger, 10_000);
  const health = new Health();
  return { logger, lifecycle, health, stop: () => lifecycle.shutdown('test done') };
}
export * from './openapi';
export * from './browser';
export * from './fakes/amocrm';
export * from './fakes/bitrix24';
export * from './fakes/smtp';
export * from './fakes/smsc';
export * from './fakes/smsru';
export * from './fakes/postmark';
export * from './fakes/greenapi';
export * from './fakes/telegramBot';
export * from './fakes/maxBot';
export * from './servers';
export * from './serviceProcess';
export * from './allInOne';
export * from './fakes/dnsServer';
export * from './natsCluster';
export * from './historyPlans';
