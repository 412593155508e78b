import { join } from 'node:path';
import { createPool, migrate, openBus, startGrpcServer, type Bus, type ServiceContext } from '@rrs/runtime';
import type { SchedulerConfig } from './config';
import { Flows } from './flows';
import { schedulerGrpcService } from './server';
import { consumeStepResults, type StepResultHandler } from './stepBus';

export const SCHEMA = 'scheduler';
export const MIGRATIONS_DIR = join(__dirname, '..', 'migrations');

export interface SchedulerDeps {
  /** The in-process bus in the all-in-one mode; otherwise the service connects to NATS itself. */
  bus?: Bus;
  onStepResult?: StepResultHandler;
}

export interface RunningScheduler {
  grpcPort: number;
  bus: Bus;
  flows: Flows;
}

export async function startScheduler(config: Pick<SchedulerConfig, 'databaseUrl' | 'natsUrl' | 'busPrefix' | 'grpcHost' | 'grpcPort'>, ctx: ServiceContext, deps: SchedulerDeps = {}): Promise<RunningScheduler> {
  const pool = createPool({ url: config.databaseUrl, schema: SCHEMA, applicationName: 'cascade-scheduler' });
  ctx.lifecycle.onStop('scheduler pool', () => pool.end());
  await migrate(pool, { schema: SCHEMA, dir: MIGRATIONS_DIR, logger: ctx.logger });
  ctx.health.addCheck('scheduler-postgres', async () => {
    await pool.query('SELECT 1');
  });
  const bus = await openBus(config, ctx, 'cascade-scheduler', deps.bus);
  const flows = new Flows(pool);

  const results = await consumeStepResults(bus, pool, ctx.logger, deps.onStepResult);
  ctx.lifecycle.onStop('step results consumer', () => results.drain());

  const server = await startGrpcServer({
    host: config.grpcHost,
    port: config.grpcPort,
    services: [schedulerGrpcService(flows, ctx.logger)],
    health: ctx.health,
    logger: ctx.logger,
  });
  ctx.lifecycle.onStop('scheduler gRPC server', () => server.stop());
  ctx.logger.info({ port: server.port }, 'cascade-scheduler gRPC listening');
  return { grpcPort: server.port, bus, flows };
}
