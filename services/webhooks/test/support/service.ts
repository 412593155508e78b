import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { generateSecretKey } from '@rrs/runtime';
import { DEFAULT_DELIVERY_POLICY, type StartWebhooksConfig } from '../../src';
import type { DeliveryPolicy } from '../../src/deliveries';

/** The key sealing signing secrets in tests (WEBHOOK_SECRET_KEYS). */
export const TEST_SECRET_KEY = Buffer.from(generateSecretKey(), 'base64');

/**
 * The webhooks service's config in tests: its own database and bus prefix, gRPC on a free port, loopback
 * receivers allowed, and the production policy with the changes a test makes (shorter schedules, timeouts).
 */
export function testWebhooksConfig(databaseUrl: string, busPrefix: string, options: { concurrency?: number; policy?: Partial<DeliveryPolicy>; secretKeys?: Buffer[] } = {}): StartWebhooksConfig {
  return {
    databaseUrl,
    busPrefix,
    grpcHost: '127.0.0.1',
    grpcPort: 0,
    allowLoopbackHttp: true,
    concurrency: options.concurrency ?? 4,
    policy: { ...DEFAULT_DELIVERY_POLICY, ...options.policy },
    secretKeys: options.secretKeys ?? [TEST_SECRET_KEY],
  };
}

/**
 * Queues a delivery of a new event straight in the database, with the NOTIFY every queuing transaction
 * sends, as another replica would; no service in this process is told. Returns the event id.
 */
export async function queueDeliveryElsewhere(sql: pg.Pool, target: { endpointId: string; organizationId: string }): Promise<string> {
  const eventId = randomUUID();
  await sql.query(`INSERT INTO events (id, type, organization_id, occurred_at, payload, body) VALUES ($1, 'cascade.recipient.finished', $2, now(), '{}', '{}')`, [eventId, target.organizationId]);
  await sql.query(
    `WITH d AS (INSERT INTO deliveries (id, event_id, endpoint_id, organization_id, status, next_attempt_at) VALUES ($1, $2, $3, $4, 'pending', now()) RETURNING id)
     SELECT pg_notify('webhook_deliveries_due', '') FROM d`,
    [randomUUID(), eventId, target.endpointId, target.organizationId],
  );
  return eventId;
}
