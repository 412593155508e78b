export { buildConfig, DEFAULT_DELIVERY_POLICY, type WebhooksConfig } from './config';
export { startWebhooks, SCHEMA, MIGRATIONS_DIR, type RunningWebhooks, type StartWebhooksConfig, type WebhooksDeps } from './service';
export { PRODUCTION_RETRY_SCHEDULE_MS } from './schedule';
export type { Resolver } from './urlGuard';
