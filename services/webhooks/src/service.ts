import { join } from 'node:path';
import { createPool, migrate, openBus, type Bus, type ServiceContext } from '@rrs/runtime';
import type { WebhooksConfig } from './config';
import { consumeEvents } from './intake';

export const SCHEMA = 'webhooks';
export const MIGRATIONS_DIR = join(__dirname, '..', 'migrations');

export async function startWebhooks(config: Pick<WebhooksConfig, 'databaseUrl' | 'natsUrl' | 'busPrefix'>, ctx: ServiceContext, deps: { bus?: Bus } = {}) {
  const pool = createPool({ url: config.databaseUrl, schema: SCHEMA, applicationName: 'webhooks' });
  ctx.lifecycle.onStop('webhooks pool', () => pool.end());
  await migrate(pool, { schema: SCHEMA, dir: MIGRATIONS_DIR, logger: ctx.logger });
  ctx.health.addCheck('webhooks-postgres', async () => {
    await pool.query('SELECT 1');
  });
  const bus = await openBus(config, ctx, 'webhooks', deps.bus);
  const sub = await consumeEvents(bus, pool, ctx.logger);
  ctx.lifecycle.onStop('events consumer', () => sub.drain());
  return { pool };
}
