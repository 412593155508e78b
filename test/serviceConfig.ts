/**
 * What a service makes of an environment: its own `buildConfig(env)` (services/<name>/src/config.ts)
 * run on it, with every variable it looks at recorded. The chart tests give it the environment the
 * rendered Deployment gives the container, so a variable the chart sets and the service does not read,
 * a required one the chart leaves out, or a value the service refuses fails the tests — without a list
 * of variables kept anywhere by hand.
 */
import { join } from 'node:path';
import { readMigrateEnv, readProvisionEnv, type Env } from '@rrs/runtime';
import { ROOT } from './repo';

export interface ConfigRun {
  /** Every variable the config looked at, set or not. */
  reads: Set<string>;
  config?: unknown;
  error?: Error;
}

type ConfigBuilder = (env: Env) => unknown;

/** Runs `build` on `env`, recording the variables it reads. */
export function runConfig(build: ConfigBuilder, env: Record<string, string>): ConfigRun {
  const reads = new Set<string>();
  const recorded = new Proxy(env, {
    get(target, key) {
      if (typeof key === 'string') reads.add(key);
      return typeof key === 'string' ? target[key] : undefined;
    },
  });
  try {
    return { reads, config: build(recorded) };
  } catch (error) {
    return { reads, error: error as Error };
  }
}

export function serviceConfig(service: string): ConfigBuilder {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const mod = require(join(ROOT, 'services', service, 'src', 'config.ts')) as { buildConfig?: ConfigBuilder };
  if (typeof mod.buildConfig !== 'function') throw new Error(`services/${service}/src/config.ts exports no buildConfig(env)`);
  return mod.buildConfig;
}

/** The hook Jobs' scripts (packages/runtime/src/bin): their env readers, plus LOG_LEVEL they read directly. */
export const JOB_CONFIG: Record<'migrate' | 'provision-bus', ConfigBuilder> = {
  migrate: (env) => ({ ...readMigrateEnv(env), logLevel: env.LOG_LEVEL }),
  'provision-bus': (env) => ({ ...readProvisionEnv(env), logLevel: env.LOG_LEVEL }),
};
