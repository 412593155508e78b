export { buildConfig, type WebhooksConfig } from './config';
export { startWebhooks, SCHEMA, MIGRATIONS_DIR } from './service';
