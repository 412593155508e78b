import { EVENT_TYPES, eventsV1, SUBSCRIBABLE_EVENT_TYPES as SUBSCRIBABLE, webhookFanOut } from '@rrs/proto';
import { ConflictError, DomainError, injectTraceContext, InvalidError, inTransaction, uuidv7, type Pool, type PoolClient, type SecretBox } from '@rrs/runtime';
import { runIdempotent, type Codec, type IdempotencyRequest } from '@rrs/idempotency';
import { announceDue, createDeliveries, disableEndpoint, storeEvent, type DeliveryPolicy, type DisabledReason } from './deliveries';
import { eventData, renderBody } from './payload';
import { generateSecret } from './signing';
import { insertSecret, readSecret } from './secrets';
import { WebhookUrlNotAllowed, type UrlGuard } from './urlGuard';

/** Event types an endpoint may subscribe to (the test event is sent on request, to one endpoint). */
export const SUBSCRIBABLE_EVENT_TYPES: readonly string[] = SUBSCRIBABLE;
const MAX_DESCRIPTION = 500;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export interface Endpoint {
  id: string;
  organizationId: string;
  url: string;
  events: string[];
  description: string;
  disabled: boolean;
  disabledReason: DisabledReason | null;
  disabledAt: Date | null;
  failingSince: Date | null;
  createdAt: Date;
  updatedAt: Date;
  previousSecretExpiresAt: Date | null;
}

export interface Attempt {
  number: number;
  startedAt: Date;
  durationMs: number;
  statusCode: number | null;
  responseBody: string;
  error: string;
  outcome: 'delivered' | 'retry' | 'failed';
}

export interface Delivery {
  id: string;
  endpointId: string;
  eventId: string;
  eventType: string;
  status: 'pending' | 'delivered' | 'failed';
  attemptCount: number;
  nextAttemptAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
  attempts: Attempt[];
}

export interface CreatedEndpoint {
  endpoint: Endpoint;
  secret: string;
}

const ENDPOINT_COLUMNS = `e.id, e.organization_id, e.url, e.events, e.description, e.disabled_at, e.disabled_reason, e.failing_since, e.created_at, e.updated_at,
  (SELECT max(s.expires_at) FROM endpoint_secrets s WHERE s.endpoint_id = e.id AND s.expires_at > now()) AS previous_secret_expires_at`;

type Row = Record<string, unknown>;

function toEndpoint(row: Row): Endpoint {
  return {
    id: row.id as string,
    organizationId: row.organization_id as string,
    url: row.url as string,
    events: row.events as string[],
    description: row.description as string,
    disabled: row.disabled_at !== null,
    disabledReason: (row.disabled_reason as DisabledReason | null) ?? null,
    disabledAt: (row.disabled_at as Date | null) ?? null,
    failingSince: (row.failing_since as Date | null) ?? null,
    createdAt: row.created_at as Date,
    updatedAt: row.updated_at as Date,
    previousSecretExpiresAt: (row.previous_secret_expires_at as Date | null) ?? null,
  };
}

function toAttempt(row: Row): Attempt {
  return {
    number: row.number as number,
    startedAt: row.started_at as Date,
    durationMs: row.duration_ms as number,
    statusCode: row.status_code as number | null,
    responseBody: row.response_body as string,
    error: row.error as string,
    outcome: row.outcome as Attempt['outcome'],
  };
}

const invalid = InvalidError.field;

/** Another organization's endpoint or delivery is not found either. */
function notFound(what: 'endpoint' | 'delivery'): DomainError {
  return new DomainError('not_found', 'not_found', what === 'endpoint' ? 'no such webhook endpoint' : 'no such delivery for this webhook endpoint');
}

function checkEvents(events: readonly string[]): string[] {
  if (events.length === 0) throw invalid('/events', 'subscribe to at least one event type');
  events.forEach((type, index) => {
    if (!SUBSCRIBABLE_EVENT_TYPES.includes(type)) throw invalid(`/events/${index}`, `unknown event type "${type}"; known: ${SUBSCRIBABLE_EVENT_TYPES.join(', ')}`);
  });
  return [...new Set(events)];
}

function checkDescription(description: string): string {
  if (description.length > MAX_DESCRIPTION) throw invalid('/description', `at most ${MAX_DESCRIPTION} characters`);
  return description;
}

/** A refused URL names the field, like any other invalid input. */
async function checkUrl(guard: UrlGuard, url: string): Promise<string> {
  try {
    return (await guard.check(url)).url.toString();
  } catch (err) {
    if (err instanceof WebhookUrlNotAllowed) {
      throw new InvalidError([{ pointer: '/url', detail: err.message }], { code: err.code, message: err.message, details: err.details, cause: err });
    }
    throw err;
  }
}

/** The saved response of an idempotent test or replay: the delivery id (its state is read fresh). */
const idCodec: Codec<string> = { encode: (v) => Buffer.from(v), decode: (b) => Buffer.from(b).toString('utf8') };

function endpointDisabled(): ConflictError {
  return new ConflictError('webhook_endpoint_disabled', 'the endpoint is disabled; enable it first (PATCH with disabled: false)');
}

/** What an idempotent create or rotation returns inside its transaction: the secret and the id of its row. */
interface IssuedSecret {
  endpoint: Endpoint;
  secretId: string;
  /** Absent in a saved response: see createdCodec. */
  secret?: string;
}

/**
 * The saved response of an idempotent create or rotation: the endpoint and the id of the secret's row,
 * never the secret. A replay reads that row's secret again (sealed like every stored secret), so it
 * answers what the first call answered while the idempotency table holds nothing that signs.
 */
const createdCodec: Codec<IssuedSecret> = {
  encode: (issued) => Buffer.from(JSON.stringify({ endpoint: issued.endpoint, secretId: issued.secretId })),
  decode: (bytes) => {
    const saved = JSON.parse(Buffer.from(bytes).toString('utf8')) as IssuedSecret;
    const fields = saved.endpoint as unknown as Record<string, string | null>;
    const date = (field: string) => (fields[field] === null ? null : new Date(fields[field] as string));
    return {
      secretId: saved.secretId,
      endpoint: {
        ...saved.endpoint,
        disabledAt: date('disabledAt'),
        failingSince: date('failingSince'),
        createdAt: date('createdAt') as Date,
        updatedAt: date('updatedAt') as Date,
        previousSecretExpiresAt: date('previousSecretExpiresAt'),
      },
    };
  },
};

/** Endpoint management and the delivery log, scoped to one organization per call. */
export class WebhookEndpoints {
  constructor(
    private readonly pool: Pool,
    private readonly guard: UrlGuard,
    private readonly policy: Pick<DeliveryPolicy, 'secretGraceMs'>,
    /** Seals the signing secrets at rest (WEBHOOK_SECRET_KEYS). */
    private readonly box: SecretBox,
    /** Called after deliveries were queued, so the worker sends them at once. */
    private readonly onQueued: () => void,
  ) {}

  async create(input: { organizationId: string; plan?: string; url: string; events: readonly string[]; description: string }, idempotency?: IdempotencyRequest): Promise<CreatedEndpoint & { replayed: boolean }> {
    const events = checkEvents(input.events);
    const description = checkDescription(input.description);
    const url = await checkUrl(this.guard, input.url);
    const { result, replayed } = await runIdempotent(this.pool, idempotency, createdCodec, async (client) => {
      // Serializes creates of one organization so the endpoint limit holds.
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 1))', [`webhook-endpoints:${input.organizationId}`]);
      const { rows: count } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM endpoints WHERE organization_id = $1', [input.organizationId]);
      const limit = webhookFanOut(input.plan ?? '').endpoints;
      if (count[0].n >= limit) {
        throw new ConflictError('webhook_endpoint_limit', `an organization on this plan may have at most ${limit} webhook endpoints`, { details: { limit } });
      }
      const id = uuidv7();
      await client.query(`INSERT INTO endpoints (id, organization_id, url, events, description) VALUES ($1, $2, $3, $4, $5)`, [id, input.organizationId, url, events, description]);
      const secret = generateSecret();
      const secretId = await insertSecret(client, this.box, id, secret);
      return { endpoint: await this.load(client, input.organizationId, id), secretId, secret };
    });
    return this.issued(result, replayed);
  }

  /** The response of a create or rotation; a replay reads its secret again (gone with a deleted endpoint: not found). */
  private async issued(issued: IssuedSecret, replayed: boolean): Promise<CreatedEndpoint & { replayed: boolean }> {
    const secret = issued.secret ?? (await readSecret(this.pool, this.box, issued.endpoint.id, issued.secretId));
    if (secret === null) throw notFound('endpoint');
    return { endpoint: issued.endpoint, secret, replayed };
  }

  async list(organizationId: string): Promise<Endpoint[]> {
    const { rows } = await this.pool.query(`SELECT ${ENDPOINT_COLUMNS} FROM endpoints e WHERE e.organization_id = $1 ORDER BY e.created_at, e.id`, [organizationId]);
    return rows.map(toEndpoint);
  }

  async get(organizationId: string, id: string): Promise<Endpoint> {
    return this.load(this.pool, organizationId, id);
  }

  async update(organizationId: string, id: string, patch: { url?: string; events?: readonly string[]; description?: string; disabled?: boolean }): Promise<Endpoint> {
    const events = patch.events === undefined ? undefined : checkEvents(patch.events);
    const description = patch.description === undefined ? undefined : checkDescription(patch.description);
    const url = patch.url === undefined ? undefined : await checkUrl(this.guard, patch.url);
    return inTransaction(this.pool, async (client) => {
      const current = await this.load(client, organizationId, id, true);
      await client.query(
        `UPDATE endpoints SET url = COALESCE($2, url), events = COALESCE($3, events), description = COALESCE($4, description), updated_at = now() WHERE id = $1`,
        [id, url ?? null, events ?? null, description ?? null],
      );
      if (patch.disabled === true && !current.disabled) await disableEndpoint(client, id, 'manual');
      if (patch.disabled === false && current.disabled) {
        // A fresh start: the failure window counts again from the next failed attempt.
        await client.query(`UPDATE endpoints SET disabled_at = NULL, disabled_reason = NULL, failing_since = NULL WHERE id = $1`, [id]);
      }
      return this.load(client, organizationId, id);
    });
  }

  async delete(organizationId: string, id: string): Promise<void> {
    if (!UUID.test(id)) throw notFound('endpoint');
    const { rowCount } = await this.pool.query('DELETE FROM endpoints WHERE id = $1 AND organization_id = $2', [id, organizationId]);
    if (rowCount !== 1) throw notFound('endpoint');
  }

  /** A new current secret; the previous one signs too until the grace period ends (older ones stop now). */
  async rotateSecret(organizationId: string, id: string, idempotency?: IdempotencyRequest): Promise<CreatedEndpoint & { replayed: boolean }> {
    const { result, replayed } = await runIdempotent(this.pool, idempotency, createdCodec, async (client) => {
      await this.load(client, organizationId, id, true);
      await client.query(`UPDATE endpoint_secrets SET expires_at = now() WHERE endpoint_id = $1 AND expires_at > now()`, [id]);
      await client.query(`UPDATE endpoint_secrets SET expires_at = now() + make_interval(secs => $2 / 1000.0) WHERE endpoint_id = $1 AND expires_at IS NULL`, [id, this.policy.secretGraceMs]);
      const secret = generateSecret();
      const secretId = await insertSecret(client, this.box, id, secret);
      await client.query(`UPDATE endpoints SET updated_at = now() WHERE id = $1`, [id]);
      return { endpoint: await this.load(client, organizationId, id), secretId, secret };
    });
    return this.issued(result, replayed);
  }

  /** Queues a `webhook.test` event for this one endpoint. */
  async sendTestEvent(organizationId: string, id: string, idempotency?: IdempotencyRequest): Promise<{ delivery: Delivery; replayed: boolean }> {
    // The API call's context: the test delivery's attempts are traced as part of it.
    const traceContext = injectTraceContext({});
    const { result: deliveryId, replayed } = await runIdempotent(this.pool, idempotency, idCodec, async (client) => {
      const endpoint = await this.load(client, organizationId, id, true);
      if (endpoint.disabled) throw endpointDisabled();
      const event: eventsV1.Event = {
        id: uuidv7(),
        type: EVENT_TYPES.webhookTest,
        organizationId,
        occurredAt: new Date(),
        payload: { $case: 'webhookTest', webhookTest: { endpointId: id, message: 'A test event: this endpoint receives signed webhooks.' } },
      };
      await storeEvent(client, { id: event.id, type: event.type, organizationId, occurredAt: event.occurredAt as Date, payload: eventData(event), body: renderBody(event) });
      const [created] = await createDeliveries(client, event, { onlyEndpointId: id, traceContext });
      return created;
    });
    if (!replayed) this.onQueued();
    return { delivery: await this.delivery(organizationId, id, deliveryId), replayed };
  }

  async listDeliveries(organizationId: string, endpointId: string, page: { limit?: number; cursor?: string }): Promise<{ deliveries: Delivery[]; nextCursor: string | null }> {
    const limit = page.limit === undefined || page.limit === 0 ? 50 : page.limit;
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new InvalidError([{ parameter: 'limit', detail: 'from 1 to 100' }]);
    if (page.cursor && !UUID.test(page.cursor)) throw new InvalidError([{ parameter: 'cursor', detail: 'not a cursor from a previous page' }]);
    await this.load(this.pool, organizationId, endpointId);
    return this.deliveries(this.pool, organizationId, endpointId, { limit, before: page.cursor || undefined });
  }

  /** Sends a delivery again at once with a fresh retry schedule; the webhook-id stays the event id. */
  async replay(organizationId: string, endpointId: string, deliveryId: string, idempotency?: IdempotencyRequest): Promise<{ delivery: Delivery; replayed: boolean }> {
    // A replay's attempts are traced under the replay call (the event's own trace ended with its retries).
    const traceContext = injectTraceContext({});
    const { replayed } = await runIdempotent(this.pool, idempotency, idCodec, async (client) => {
      const endpoint = await this.load(client, organizationId, endpointId, true);
      if (!UUID.test(deliveryId)) throw notFound('delivery');
      if (endpoint.disabled) throw endpointDisabled();
      const { rowCount } = await client.query(
        `UPDATE deliveries SET status = 'pending', retry_index = 0, next_attempt_at = now(), claim_token = NULL, updated_at = now(), trace_context = $4
         WHERE id = $1 AND endpoint_id = $2 AND organization_id = $3`,
        [deliveryId, endpointId, organizationId, JSON.stringify(traceContext)],
      );
      if (rowCount !== 1) throw notFound('delivery');
      await announceDue(client);
      return deliveryId;
    });
    if (!replayed) this.onQueued();
    return { delivery: await this.delivery(organizationId, endpointId, deliveryId), replayed };
  }

  private async delivery(organizationId: string, endpointId: string, deliveryId: string): Promise<Delivery> {
    const [delivery] = (await this.deliveries(this.pool, organizationId, endpointId, { ids: [deliveryId], limit: 1 })).deliveries;
    if (!delivery) throw notFound('delivery');
    return delivery;
  }

  private async load(client: PoolClient | Pool, organizationId: string, id: string, forUpdate = false): Promise<Endpoint> {
    if (!UUID.test(id)) throw notFound('endpoint');
    const { rows } = await client.query(`SELECT ${ENDPOINT_COLUMNS} FROM endpoints e WHERE e.id = $1 AND e.organization_id = $2${forUpdate ? ' FOR UPDATE' : ''}`, [id, organizationId]);
    if (!rows[0]) throw notFound('endpoint');
    return toEndpoint(rows[0]);
  }

  private async deliveries(client: Pool, organizationId: string, endpointId: string, query: { limit: number; before?: string; ids?: string[] }): Promise<{ deliveries: Delivery[]; nextCursor: string | null }> {
    const { rows } = await client.query(
      `SELECT d.id, d.endpoint_id, d.event_id, e.type, d.status, d.attempt_count, d.next_attempt_at, d.created_at, d.updated_at
       FROM deliveries d JOIN events e ON e.id = d.event_id
       WHERE d.endpoint_id = $1 AND d.organization_id = $2 AND ($3::uuid IS NULL OR d.id < $3) AND ($4::uuid[] IS NULL OR d.id = ANY ($4))
       ORDER BY d.id DESC LIMIT $5`,
      [endpointId, organizationId, query.before ?? null, query.ids ?? null, query.limit + 1],
    );
    const page = rows.slice(0, query.limit);
    const { rows: attemptRows } = await client.query(
      `SELECT delivery_id, number, started_at, duration_ms, status_code, response_body, error, outcome FROM attempts WHERE delivery_id = ANY ($1) ORDER BY delivery_id, number`,
      [page.map((row) => row.id)],
    );
    const byDelivery = new Map<string, Attempt[]>();
    for (const attempt of attemptRows) {
      const list = byDelivery.get(attempt.delivery_id) ?? [];
      list.push(toAttempt(attempt));
      byDelivery.set(attempt.delivery_id, list);
    }
    return {
      deliveries: page.map((row) => ({
        id: row.id,
        endpointId: row.endpoint_id,
        eventId: row.event_id,
        eventType: row.type,
        status: row.status,
        attemptCount: row.attempt_count,
        // While an attempt is in flight next_attempt_at is its lease end, which is when a retry would come.
        nextAttemptAt: row.status === 'pending' ? row.next_attempt_at : null,
        createdAt: row.created_at,
        updatedAt: row.updated_at,
        attempts: byDelivery.get(row.id) ?? [],
      })),
      nextCursor: rows.length > query.limit ? page[page.length - 1].id : null,
    };
  }
}
