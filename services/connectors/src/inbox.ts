import { counter, DomainError, inTransaction, SecretBoxError, startDueWorkLoop, type DueWorkLoop, type Logger, type Notifier, type Pool } from '@rrs/runtime';
import type { ConnectorPolicy } from './config';
import { INBOX_CHANNEL, type Connectors } from './connectors';
import { CrmError } from './crm/types';
import { stopCascadesOfLostDeal } from './lostDeals';
import { startCascadeForDeal, type DealOutcome, type StageHint, type WonDealDeps } from './wonDeals';

/*
 * The inbox: CRM events (and deals the reconciliation found missing) stored as they arrive, processed
 * here. A round claims due events (SKIP LOCKED, so replicas share them) by moving their next attempt a
 * lease ahead: a worker that dies mid-way leaves them due again after the lease. The events of one deal
 * are handled once per round, and their outcome is written to every pending event of that deal received
 * up to then, so three copies of a webhook cost one CRM lookup.
 */

export interface QueuedEvent {
  dealId: string;
  event: string;
  payload: Record<string, unknown>;
}

const processed = counter({ name: 'connector_deal_events_total', help: 'Inbox events processed, by outcome.', labelNames: ['outcome'] });

/** Stores events in the inbox and wakes the inbox workers of every replica (NOTIFY on commit). */
export async function queueEvents(pool: Pool, connectorId: string, source: 'webhook' | 'reconcile', events: QueuedEvent[], options: { touchLastEvent?: boolean } = {}): Promise<void> {
  if (events.length === 0) return;
  await inTransaction(pool, async (client) => {
    await client.query(
      `INSERT INTO crm_events (connector_id, source, event, deal_id, payload)
       SELECT $1, $2, e.event, e.deal_id, e.payload FROM jsonb_to_recordset($3::jsonb) AS e(event text, deal_id text, payload jsonb)`,
      [connectorId, source, JSON.stringify(events.map((e) => ({ event: e.event, deal_id: e.dealId, payload: e.payload })))],
    );
    if (options.touchLastEvent) await client.query('UPDATE connectors SET last_event_at = now() WHERE id = $1', [connectorId]);
    await client.query(`SELECT pg_notify('${INBOX_CHANNEL}', '')`);
  });
}

interface ClaimedEvent {
  id: number;
  connector_id: string;
  deal_id: string;
  source: string;
  payload: { lead?: { statusId?: string; pipelineId?: string }; stage?: StageHint };
  attempts: number;
}

/** Retry delay after the n-th failed attempt (n ≥ 1), never shorter than what the CRM asked for. */
export function backoffMs(policy: ConnectorPolicy, attempts: number, retryAfterMs = 0): number {
  return Math.max(retryAfterMs, Math.min(policy.retryMaxMs, policy.retryBaseMs * 2 ** Math.max(0, attempts - 1)));
}

/** How a failure is handled: retried later (with its code for the status), or final. */
export function judgeFailure(err: unknown): { retry: boolean; code: string; message: string; retryAfterMs?: number; keep?: boolean } {
  if (err instanceof CrmError) {
    // A refused token is retried too: an admin may fix the credentials within the retry window.
    return { retry: err.kind !== 'rejected', code: err.code, message: err.message, retryAfterMs: err.retryAfterMs };
  }
  if (err instanceof SecretBoxError) return { retry: false, code: 'credentials_unreadable', message: `the stored credentials do not open (${err.code}); is the key that sealed them in CONNECTOR_SECRET_KEYS?` };
  if (err instanceof DomainError && err.code === 'recipient_quota_exceeded') {
    // The organization's recipient budget is spent for now: the won deal waits for the window the
    // scheduler names and is never given up (docs/connectors.md), however many times it has waited.
    const seconds = Number(err.details?.retryAfterSeconds ?? 60);
    return { retry: true, keep: true, code: err.code, message: err.message, retryAfterMs: seconds * 1000 };
  }
  if (err instanceof DomainError) {
    const transient = err.kind === 'unavailable' || err.kind === 'internal' || err.kind === 'rate_limited' || err.code === 'idempotency_key_in_use';
    return { retry: transient, code: transient ? 'directory_unavailable' : err.code, message: err.message };
  }
  return { retry: true, code: 'internal', message: (err as Error)?.message ?? String(err) };
}

export interface InboxWorkerOptions extends WonDealDeps {
  connectors: Connectors;
  policy: ConnectorPolicy;
  logger: Logger;
  notifier?: Notifier;
}

function hintOf(e: ClaimedEvent): StageHint | null {
  if (e.payload.stage) return e.payload.stage;
  const lead = e.payload.lead;
  return lead?.statusId && lead.pipelineId ? { pipelineId: lead.pipelineId, stageId: lead.statusId } : null;
}

export function startInboxWorker(o: InboxWorkerOptions): DueWorkLoop {
  const { pool, policy } = o;

  async function finish(group: ClaimedEvent[], result: DealOutcome, lastError: string | null): Promise<void> {
    const maxId = Math.max(...group.map((e) => e.id));
    await pool.query(
      `UPDATE crm_events SET status = $4, outcome = $5, cascade_id = $6, last_error = $7, processed_at = now()
       WHERE connector_id = $1 AND deal_id = $2 AND status = 'pending' AND id <= $3`,
      [group[0].connector_id, group[0].deal_id, maxId, result.status, result.outcome, result.cascadeId ?? null, lastError],
    );
    processed.inc({ outcome: result.outcome }, group.length);
  }

  async function processDeal(group: ClaimedEvent[]): Promise<void> {
    const connector = await o.connectors.load(group[0].connector_id);
    if (!connector) return; // deleted: its events went with it
    if (!connector.enabled) return finish(group, { status: 'ignored', outcome: 'connector_disabled' }, null);
    const newest = group.reduce((a, b) => (b.id > a.id ? b : a));
    try {
      // A deal whose cascade may still run is first checked for having left won (lostDeals.ts); any other goes the start path.
      const hint = hintOf(newest);
      const result = (await stopCascadesOfLostDeal(o, connector, group[0].deal_id, hint)) ?? (await startCascadeForDeal(o, connector, group[0].deal_id, hint));
      // The status first: once the inbox shows the deal processed, its status says how (no window between).
      if (result.problem) await o.connectors.recordError(connector.id, result.problem.code, result.problem.message);
      else await o.connectors.recordSuccess(connector.id);
      await finish(group, result, result.problem?.message ?? null);
    } catch (err) {
      const failure = judgeFailure(err);
      const attempts = Math.max(...group.map((e) => e.attempts));
      await o.connectors.recordError(connector.id, failure.code, failure.message);
      if (!failure.retry || (attempts >= policy.maxAttempts && !failure.keep)) {
        o.logger.warn({ err, connectorId: connector.id, dealId: group[0].deal_id, attempts }, 'deal event given up');
        await finish(group, { status: 'failed', outcome: failure.retry ? 'gave_up' : `refused:${failure.code}` }, `${failure.code}: ${failure.message}`);
        return;
      }
      const delay = failure.keep ? failure.retryAfterMs! : backoffMs(policy, attempts, failure.retryAfterMs);
      o.logger.info({ connectorId: connector.id, dealId: group[0].deal_id, code: failure.code, retryInMs: delay }, 'deal event will be retried');
      await pool.query(`UPDATE crm_events SET next_attempt_at = now() + make_interval(secs => $2 / 1000.0), last_error = $3 WHERE id = ANY($1::bigint[]) AND status = 'pending'`, [
        group.map((e) => e.id),
        delay,
        `${failure.code}: ${failure.message}`.slice(0, 1000),
      ]);
    }
  }

  return startDueWorkLoop({
    name: 'connector inbox',
    logger: o.logger,
    notifier: o.notifier,
    channels: [INBOX_CHANNEL],
    async round() {
      const batch = policy.concurrency;
      const { rows } = await pool.query<ClaimedEvent>(
        `UPDATE crm_events SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2 / 1000.0)
         WHERE id IN (SELECT id FROM crm_events WHERE status = 'pending' AND next_attempt_at <= now() ORDER BY next_attempt_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING id, connector_id, deal_id, source, payload, attempts`,
        [batch, policy.leaseMs],
      );
      const groups = new Map<string, ClaimedEvent[]>();
      for (const event of rows) {
        const dealKey = `${event.connector_id}\u0000${event.deal_id}`;
        groups.set(dealKey, [...(groups.get(dealKey) ?? []), event]);
      }
      await Promise.all([...groups.values()].map((g) => processDeal(g)));
      return rows.length === batch;
    },
    async nextDueInMs() {
      const { rows } = await pool.query<{ ms: number | null }>(`SELECT (EXTRACT(EPOCH FROM min(next_attempt_at) - now()) * 1000)::float8 AS ms FROM crm_events WHERE status = 'pending'`);
      return rows[0].ms;
    },
  });
}
