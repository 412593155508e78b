import type { Logger } from 'pino';
import { connectJetStreamBus } from './bus';
import { envField, readEnv, type Env } from './config';
import { createPool, migrate } from './db';
import { ConfigError } from './errors';

/*
 * What the Helm chart's hook Jobs run inside the service images (`dist/bin/migrate.js`,
 * `dist/bin/provision-bus.js`), so a release migrates and provisions before its pods roll, and a
 * failure stops the upgrade while the old pods keep serving.
 */

/** One `migrate()` call: the schema's tables of one component, from one folder of NNNN_name.sql files. */
export interface MigrationStep {
  component: string;
  dir: string;
}

export interface MigrationPlan {
  schema: string;
  steps: MigrationStep[];
}

/**
 * `--schema contacts service=migrations idempotency=node_modules/@rrs/idempotency/migrations`: the same
 * (schema, component, folder) triples the service applies at start, in the same order. `service` is the
 * service's own component name (the default of `migrate()`).
 */
export function parseMigrationPlan(args: readonly string[]): MigrationPlan {
  let schema: string | undefined;
  const steps: MigrationStep[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === '--schema') {
      schema = args[++i];
      continue;
    }
    const m = /^([a-z][a-z0-9_-]*)=(.+)$/.exec(arg);
    if (!m) throw new ConfigError('arguments', `expected --schema <name> and component=dir pairs, got ${JSON.stringify(arg)}`);
    if (steps.some((s) => s.component === m[1])) throw new ConfigError('arguments', `component ${m[1]} is listed twice`);
    steps.push({ component: m[1], dir: m[2] });
  }
  if (!schema || !/^[a-z_][a-z0-9_]*$/.test(schema)) throw new ConfigError('arguments', '--schema must name the service schema (lower-case letters, digits, _)');
  if (steps.length === 0) throw new ConfigError('arguments', 'no component=dir pair given');
  return { schema, steps };
}

/** Applies the plan; returns the versions applied per component. */
export async function runMigrationPlan(databaseUrl: string, plan: MigrationPlan, logger?: Logger): Promise<Record<string, number[]>> {
  const pool = createPool({ url: databaseUrl, schema: plan.schema, max: 1, applicationName: `migrate-${plan.schema}` });
  try {
    const applied: Record<string, number[]> = {};
    for (const step of plan.steps) {
      applied[step.component] = await migrate(pool, { schema: plan.schema, dir: step.dir, component: step.component, logger });
    }
    return applied;
  } finally {
    await pool.end();
  }
}

export function readMigrateEnv(env: Env): { databaseUrl: string } {
  const e = readEnv({ DATABASE_URL: envField.url(['postgres', 'postgresql']) }, env);
  return { databaseUrl: e.DATABASE_URL };
}

export interface ProvisionBusConfig {
  natsUrl: string;
  busPrefix: string;
  /** Replicas of the streams and bucket it creates; existing ones are never changed (a drift is logged). */
  streamReplicas: number;
  /** TTL of the `channels` KV bucket: the senders' and the gateway's CHANNEL_TTL_MS. */
  channelTtlMs: number;
}

export function readProvisionEnv(env: Env): ProvisionBusConfig {
  const e = readEnv(
    {
      NATS_URL: envField.natsUrls(),
      BUS_PREFIX: envField.busPrefix(),
      BUS_STREAM_REPLICAS: envField.streamReplicas(),
      CHANNEL_TTL_MS: envField.int(30_000, 1_000),
    },
    env,
  );
  return { natsUrl: e.NATS_URL, busPrefix: e.BUS_PREFIX, streamReplicas: e.BUS_STREAM_REPLICAS, channelTtlMs: e.CHANNEL_TTL_MS };
}

/**
 * Creates the `STEPS`, `EVENTS` and `RATINGS` streams and the `channels` KV bucket when missing. Idempotent; an
 * existing bucket keeps the TTL it was created with (changing it means deleting the bucket).
 */
export async function provisionBus(config: ProvisionBusConfig): Promise<void> {
  const bus = await connectJetStreamBus({
    url: config.natsUrl,
    prefix: config.busPrefix,
    name: 'rrs-provision-bus',
    streamReplicas: config.streamReplicas,
    onStreamDrift: (d) => console.warn(`stream ${d.stream} has ${d.setting} ${d.existing}, configured ${d.configured}; left as it is`),
  });
  try {
    await bus.ensureStreams();
    await bus.kv('channels', { ttlMs: config.channelTtlMs });
  } finally {
    await bus.close();
  }
}
