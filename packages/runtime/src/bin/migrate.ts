/**
 * The migrations hook Job: `node node_modules/@rrs/runtime/dist/bin/migrate.js --schema <schema>
 * service=migrations [component=dir …]`, with DATABASE_URL in the environment. Exit 0 when the schema is
 * up to date, 78 on bad arguments or configuration, 1 when a migration fails.
 */
import { ConfigError } from '../errors';
import { createLogger } from '../logger';
import { parseMigrationPlan, readMigrateEnv, runMigrationPlan } from '../deployJobs';

async function main(): Promise<void> {
  const logger = createLogger({ service: 'migrate', level: process.env.LOG_LEVEL ?? 'info' });
  let plan;
  let env;
  try {
    plan = parseMigrationPlan(process.argv.slice(2));
    env = readMigrateEnv(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`migrate: ${err.message}\n`);
      process.exit(78);
    }
    throw err;
  }
  try {
    const applied = await runMigrationPlan(env.databaseUrl, plan, logger);
    logger.info({ schema: plan.schema, applied }, 'schema up to date');
  } catch (err) {
    logger.fatal({ err, schema: plan.schema }, 'migration failed');
    process.exit(1);
  }
}

void main();
