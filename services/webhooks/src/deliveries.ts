import { inTransaction, uuidv7, type Pool, type PoolClient } from '@rrs/runtime';
import { nextAttemptDelay, parseRetryAfter } from './schedule';
import type { SendResult } from './sender';

/** How deliveries are retried and when an endpoint gives up; production values in config.ts. */
export interface DeliveryPolicy {
  /** Delay before each attempt (see schedule.ts); its length is the number of attempts. */
  retryScheduleMs: readonly number[];
  /** Bound on one attempt, connect to last byte read. */
  timeoutMs: number;
  /** An endpoint whose attempts have all failed for this long is disabled (`failing`). */
  disableAfterMs: number;
  /** How long a rotated-out secret keeps signing. */
  secretGraceMs: number;
  /** How long settled deliveries (and their events) stay in the log. */
  logRetentionMs: number;
  /**
   * A claim holds a delivery for this long, and the worker renews it every third of it while the attempt
   * runs (an attempt may take the whole timeoutMs). Only a worker that died mid-attempt (or lost the
   * database for longer than this) lets it run out; the delivery is then attempted again by any replica,
   * so a dead replica's deliveries move on within this time.
   */
  claimLeaseMs: number;
}

export interface StoredEvent {
  id: string;
  type: string;
  organizationId: string;
  occurredAt: Date;
  /** The payload as JSON (kept for inspection). */
  payload: unknown;
  /** The exact body every attempt sends. */
  body: string;
}

/** Whether any enabled endpoint of the event's organization subscribes to its type. */
export async function hasSubscribers(client: PoolClient | Pool, event: { type: string; organizationId: string }): Promise<boolean> {
  const { rows } = await client.query(`SELECT 1 FROM endpoints WHERE organization_id = $1 AND disabled_at IS NULL AND $2 = ANY (events) LIMIT 1`, [event.organizationId, event.type]);
  return rows.length > 0;
}

/**
 * `hasSubscribers` for many events with one statement: the `organization id|event type` pairs that some
 * enabled endpoint subscribes to.
 */
export async function subscribedPairs(client: PoolClient | Pool, events: ReadonlyArray<{ type: string; organizationId: string }>): Promise<Set<string>> {
  const { rows } = await client.query<{ pair: string }>(
    // Ids are compared as text first: an event whose organization id is not a UUID has no endpoint,
    // and must not fail the statement for the other events.
    `SELECT DISTINCT e.organization_id || '|' || e.type AS pair
     FROM unnest($1::text[], $2::text[]) AS e(organization_id, type)
     WHERE EXISTS (
       SELECT 1 FROM endpoints
       WHERE organization_id = CASE WHEN e.organization_id ~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN e.organization_id::uuid END
         AND disabled_at IS NULL AND e.type = ANY (events))`,
    [events.map((event) => event.organizationId), events.map((event) => event.type)],
  );
  return new Set(rows.map((row) => row.pair));
}

/** Stores the event once (a repeat of the same id is a no-op). */
export async function storeEvent(client: PoolClient | Pool, event: StoredEvent): Promise<void> {
  await client.query(
    `INSERT INTO events (id, type, organization_id, occurred_at, payload, body) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
    [event.id, event.type, event.organizationId, event.occurredAt, JSON.stringify(event.payload), event.body],
  );
}

/**
 * W3C trace context (`traceparent`, `tracestate`) as headers, from `injectTraceContext`: the context each
 * attempt of a delivery is traced in. Kept for the span only; receivers never get it.
 */
export type TraceCarrier = Record<string, string>;

/**
 * Creates the deliveries of an event: one per enabled endpoint of its organization subscribed to its
 * type (or to the one endpoint given). Keyed by (event, endpoint), so running it again adds nothing.
 * `traceContext` is the context of the work queuing them (see TraceCarrier). Returns the ids of the
 * new deliveries.
 */
export async function createDeliveries(
  client: PoolClient | Pool,
  event: { id: string; type: string; organizationId: string },
  options: { onlyEndpointId?: string; traceContext?: TraceCarrier } = {},
): Promise<string[]> {
  const { onlyEndpointId } = options;
  const { rows: endpoints } = await client.query<{ id: string }>(
    onlyEndpointId
      ? `SELECT id FROM endpoints WHERE organization_id = $1 AND disabled_at IS NULL AND id = $2`
      : `SELECT id FROM endpoints WHERE organization_id = $1 AND disabled_at IS NULL AND $2 = ANY (events)`,
    [event.organizationId, onlyEndpointId ?? event.type],
  );
  if (endpoints.length === 0) return [];
  const ids = endpoints.map(() => uuidv7());
  const { rows } = await client.query<{ id: string }>(
    `INSERT INTO deliveries (id, event_id, endpoint_id, organization_id, status, next_attempt_at, trace_context)
     SELECT d.id, $1, d.endpoint_id, $2, 'pending', now(), $5 FROM unnest($3::uuid[], $4::uuid[]) AS d (id, endpoint_id)
     ON CONFLICT (event_id, endpoint_id) DO NOTHING RETURNING id`,
    [event.id, event.organizationId, ids, endpoints.map((e) => e.id), JSON.stringify(options.traceContext ?? {})],
  );
  if (rows.length > 0) await announceDue(client);
  return rows.map((r) => r.id);
}

/** Postgres channel on which every replica's worker hears that deliveries became due. */
export const DUE_CHANNEL = 'webhook_deliveries_due';

/** Wakes the workers of every replica; inside a transaction the notice goes out at commit. */
export async function announceDue(client: PoolClient | Pool): Promise<void> {
  await client.query(`SELECT pg_notify('${DUE_CHANNEL}', '')`);
}

/** A delivery a worker holds until it records the outcome (or its lease runs out). */
export interface ClaimedDelivery {
  id: string;
  eventId: string;
  eventType: string;
  body: string;
  endpointId: string;
  url: string;
  /** Live secrets as stored (sealed, see secrets.ts), the current one first. */
  secrets: Array<{ id: string; secret: string }>;
  /** Number of this attempt over the delivery's life (numbering of the attempt log). */
  attemptNumber: number;
  /** Attempts already made in the current schedule run. */
  retryIndex: number;
  claimToken: string;
  /** The context the delivery was queued in: the parent of the attempt's span. */
  traceContext: TraceCarrier;
}

/**
 * Claims up to `limit` due deliveries of enabled endpoints. FOR UPDATE SKIP LOCKED lets any number of
 * workers claim at once without taking the same row; the claim moves next_attempt_at `leaseMs` ahead,
 * so the HTTP call happens outside any transaction and a worker that dies leaves the delivery due again.
 */
export async function claimDue(pool: Pool, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
  const { rows } = await pool.query(
    `WITH due AS (
       SELECT d.id FROM deliveries d
       WHERE d.status = 'pending' AND d.next_attempt_at <= now()
       ORDER BY d.next_attempt_at
       LIMIT $1
       FOR UPDATE SKIP LOCKED
     ), claimed AS (
       UPDATE deliveries d
       SET next_attempt_at = now() + make_interval(secs => $2 / 1000.0), attempt_count = d.attempt_count + 1,
           claim_token = gen_random_uuid(), updated_at = now()
       FROM due WHERE d.id = due.id
       RETURNING d.id, d.event_id, d.endpoint_id, d.attempt_count, d.retry_index, d.claim_token, d.trace_context
     )
     SELECT c.id, c.event_id, c.endpoint_id, c.attempt_count, c.retry_index, c.claim_token, c.trace_context, e.type, e.body, ep.url,
            ARRAY(SELECT json_build_object('id', s.id, 'secret', s.secret) FROM endpoint_secrets s WHERE s.endpoint_id = c.endpoint_id AND (s.expires_at IS NULL OR s.expires_at > now())
                  ORDER BY s.expires_at IS NULL DESC, s.created_at DESC) AS secrets
     FROM claimed c JOIN events e ON e.id = c.event_id JOIN endpoints ep ON ep.id = c.endpoint_id`,
    [limit, leaseMs],
  );
  return rows.map((row) => ({
    id: row.id,
    eventId: row.event_id,
    eventType: row.type,
    body: row.body,
    endpointId: row.endpoint_id,
    url: row.url,
    secrets: row.secrets,
    attemptNumber: row.attempt_count,
    retryIndex: row.retry_index,
    claimToken: row.claim_token,
    traceContext: row.trace_context ?? {},
  }));
}

/**
 * Moves the lease of claims still held (same claim token, still pending) `leaseMs` ahead; one statement
 * for all of a worker's attempts in flight. A claim another worker took over after it lapsed is left alone.
 */
export async function renewClaims(pool: Pool, claims: Array<Pick<ClaimedDelivery, 'id' | 'claimToken'>>, leaseMs: number): Promise<number> {
  if (claims.length === 0) return 0;
  const { rowCount } = await pool.query(
    `UPDATE deliveries d SET next_attempt_at = now() + make_interval(secs => $3 / 1000.0)
     FROM unnest($1::uuid[], $2::uuid[]) AS held(id, claim_token)
     WHERE d.id = held.id AND d.claim_token = held.claim_token AND d.status = 'pending'`,
    [claims.map((c) => c.id), claims.map((c) => c.claimToken), leaseMs],
  );
  return rowCount ?? 0;
}

/**
 * Milliseconds until the earliest pending delivery is due, by the database clock (the one
 * next_attempt_at was set by): ≤ 0 when one is due now, null when none is pending.
 */
export async function msUntilNextDue(pool: Pool): Promise<number | null> {
  const { rows } = await pool.query<{ ms: number | null }>(
    `SELECT (EXTRACT(EPOCH FROM min(next_attempt_at) - now()) * 1000)::float8 AS ms FROM deliveries WHERE status = 'pending'`,
  );
  return rows[0].ms === null ? null : Math.ceil(rows[0].ms);
}

/** Pending deliveries by state; see countBacklog. */
export interface DeliveryBacklog {
  /** Due now and not held by a worker: waiting for a free worker slot. */
  due: number;
  /** Held by a worker (attempt in flight, within its claim lease). */
  inFlight: number;
  /** Waiting for their next attempt on the retry schedule (or a receiver's Retry-After). */
  retryScheduled: number;
  /** How long the longest-waiting due delivery has been due, in seconds (0 when none is due). */
  oldestDueSeconds: number;
}

/**
 * Counts the pending deliveries. It reads only pending rows, through the partial index deliveries_due
 * (`WHERE status = 'pending'`), so its cost follows the backlog, not the size of the delivery log. A claim
 * whose lease ran out (its worker died) counts as due again, as it is.
 */
export async function countBacklog(client: PoolClient | Pool): Promise<DeliveryBacklog> {
  const { rows } = await client.query<{ due: string; in_flight: string; retry_scheduled: string; oldest_due_seconds: number }>(
    `SELECT count(*) FILTER (WHERE next_attempt_at <= now()) AS due,
            count(*) FILTER (WHERE next_attempt_at > now() AND claim_token IS NOT NULL) AS in_flight,
            count(*) FILTER (WHERE next_attempt_at > now() AND claim_token IS NULL) AS retry_scheduled,
            COALESCE(GREATEST(0, EXTRACT(EPOCH FROM now() - min(next_attempt_at))), 0)::float8 AS oldest_due_seconds
     FROM deliveries WHERE status = 'pending'`,
  );
  const counts = rows[0];
  return { due: Number(counts.due), inFlight: Number(counts.in_flight), retryScheduled: Number(counts.retry_scheduled), oldestDueSeconds: counts.oldest_due_seconds };
}

export type AttemptOutcome = 'delivered' | 'retry' | 'failed';

export interface AttemptVerdict {
  outcome: AttemptOutcome;
  /** ms from now until the next attempt (retry only). */
  retryInMs?: number;
  /** The endpoint answered 410 Gone: disable it. */
  gone: boolean;
}

/**
 * What one attempt's result means: 2xx delivered; 410 failed and the endpoint disabled; anything else
 * (3xx — redirects are not followed —, 4xx, 5xx, timeout, connection error, refused address) failed and
 * retried on the schedule, 429 and 5xx no sooner than their Retry-After.
 */
export function judgeAttempt(result: SendResult, policy: Pick<DeliveryPolicy, 'retryScheduleMs'>, attemptsMade: number, random: () => number = Math.random): AttemptVerdict {
  if (result.kind === 'response' && result.status >= 200 && result.status < 300) return { outcome: 'delivered', gone: false };
  if (result.kind === 'response' && result.status === 410) return { outcome: 'failed', gone: true };
  const honoursRetryAfter = result.kind === 'response' && (result.status === 429 || result.status >= 500);
  const retryAfter = honoursRetryAfter ? parseRetryAfter(result.retryAfter) : null;
  const delay = nextAttemptDelay(policy.retryScheduleMs, attemptsMade, retryAfter, random);
  return delay === null ? { outcome: 'failed', gone: false } : { outcome: 'retry', retryInMs: delay, gone: false };
}

/** Failure reasons an endpoint is disabled for; `manual` is set through the API. */
export type DisabledReason = 'manual' | 'gone' | 'failing';

/** Disables an endpoint and fails its pending deliveries, which a replay can revive. */
export async function disableEndpoint(client: PoolClient, endpointId: string, reason: DisabledReason): Promise<void> {
  await client.query(`UPDATE endpoints SET disabled_at = now(), disabled_reason = $2, updated_at = now() WHERE id = $1 AND disabled_at IS NULL`, [endpointId, reason]);
  await client.query(`UPDATE deliveries SET status = 'failed', next_attempt_at = NULL, claim_token = NULL, updated_at = now() WHERE endpoint_id = $1 AND status = 'pending'`, [endpointId]);
}

/**
 * Records an attempt and applies its verdict, in one transaction. The attempt is always logged; the
 * delivery and endpoint change only if this claim still holds the delivery (a worker whose lease ran
 * out and was overtaken must not overwrite the newer claim's state). Returns whether the claim held.
 */
export async function recordAttempt(
  pool: Pool,
  claim: ClaimedDelivery,
  started: Date,
  result: SendResult,
  verdict: AttemptVerdict,
  policy: Pick<DeliveryPolicy, 'disableAfterMs'>,
): Promise<{ held: boolean; endpointDisabled: DisabledReason | null }> {
  return inTransaction(pool, async (client) => {
    // Lock order endpoint → delivery, as DELETE (which cascades into the deliveries) and PATCH disabled
    // take them: locking the delivery first and the endpoint after deadlocked against a concurrent DELETE,
    // and against another attempt of the same endpoint disabling it. NO KEY UPDATE serializes the outcomes
    // of one endpoint's attempts (short transactions) and waits for a DELETE in progress.
    const { rowCount: endpointExists } = await client.query(`SELECT 1 FROM endpoints WHERE id = $1 FOR NO KEY UPDATE`, [claim.endpointId]);
    // The endpoint (and with it this delivery) was deleted while the attempt was in flight.
    if (endpointExists !== 1) return { held: false, endpointDisabled: null };
    await client.query(
      `INSERT INTO attempts (delivery_id, number, started_at, duration_ms, status_code, response_body, error, outcome)
       SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE EXISTS (SELECT 1 FROM deliveries WHERE id = $1)
       ON CONFLICT (delivery_id, number) DO NOTHING`,
      [
        claim.id,
        claim.attemptNumber,
        started,
        result.durationMs,
        result.kind === 'response' ? result.status : null,
        result.kind === 'response' ? result.body.replace(/\0/g, '') : '',
        result.kind === 'error' ? result.error : '',
        verdict.outcome,
      ],
    );
    const { rowCount } = await client.query(
      `UPDATE deliveries SET status = $3, retry_index = retry_index + 1, claim_token = NULL, updated_at = now(),
         next_attempt_at = CASE WHEN $3 = 'pending' THEN now() + make_interval(secs => $4 / 1000.0) END
       WHERE id = $1 AND claim_token = $2`,
      [claim.id, claim.claimToken, verdict.outcome === 'retry' ? 'pending' : verdict.outcome, verdict.retryInMs ?? 0],
    );
    const held = rowCount === 1;
    let endpointDisabled: DisabledReason | null = null;
    if (held && verdict.outcome === 'delivered') {
      await client.query(`UPDATE endpoints SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL`, [claim.endpointId]);
    } else if (held) {
      const { rows } = await client.query<{ failing_too_long: boolean; disabled: boolean }>(
        `UPDATE endpoints SET failing_since = COALESCE(failing_since, $2) WHERE id = $1
         RETURNING failing_since <= now() - make_interval(secs => $3 / 1000.0) AS failing_too_long, disabled_at IS NOT NULL AS disabled`,
        [claim.endpointId, started, policy.disableAfterMs],
      );
      const endpoint = rows[0];
      if (endpoint && !endpoint.disabled) {
        endpointDisabled = verdict.gone ? 'gone' : endpoint.failing_too_long ? 'failing' : null;
        if (endpointDisabled) await disableEndpoint(client, claim.endpointId, endpointDisabled);
      }
      // An endpoint disabled while this attempt was in flight gets no further attempt.
      if (endpoint?.disabled && verdict.outcome === 'retry') {
        await client.query(`UPDATE deliveries SET status = 'failed', next_attempt_at = NULL WHERE id = $1`, [claim.id]);
      }
    }
    return { held, endpointDisabled };
  });
}
