/**
 * The bus provisioning hook Job: creates the JetStream streams and the `channels` KV bucket. Reads
 * NATS_URL, BUS_PREFIX and CHANNEL_TTL_MS. Exit 0 when they exist, 78 on bad configuration, 1 otherwise.
 */
import { ConfigError } from '../errors';
import { createLogger } from '../logger';
import { provisionBus, readProvisionEnv } from '../deployJobs';

async function main(): Promise<void> {
  const logger = createLogger({ service: 'provision-bus', level: process.env.LOG_LEVEL ?? 'info' });
  let config;
  try {
    config = readProvisionEnv(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`provision-bus: ${err.message}\n`);
      process.exit(78);
    }
    throw err;
  }
  try {
    await provisionBus(config);
    logger.info({ prefix: config.busPrefix, channelTtlMs: config.channelTtlMs }, 'streams STEPS, EVENTS, RATINGS and bucket channels are in place');
  } catch (err) {
    logger.fatal({ err }, 'provisioning the bus failed');
    process.exit(1);
  }
}

void main();
