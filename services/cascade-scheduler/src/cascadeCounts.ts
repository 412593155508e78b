import { CASCADE_COUNT_KEYS, type CascadeCountKey, type schedulerV1 } from '@rrs/proto';
import type { Pool, PoolClient } from '@rrs/runtime';

export type CascadeCounts = Record<CascadeCountKey, number>;

/**
 * The `counts` of cascades (docs/cascades.md, "counts keys"), in one statement: what GET /cascades/{id}
 * shows and what each item of the cascade list carries, so the two can never disagree. Recipients by
 * status and finish reason, those who opened their link or left feedback; steps by status (pending =
 * pending, scheduled or dispatched; a canceled step counts nowhere), with a delivery receipt, or with a
 * negative one (`undelivered: <reason>` on a sent step). Steps are reached through their recipients
 * (`recipients_cascade`, then the steps' `(recipient_id, step_order)` key).
 */
const COUNTS_SQL = `
  WITH r AS (
    SELECT r.id, r.cascade_id, r.status, r.finish_reason, rr.opened_at IS NOT NULL AS opened, coalesce(r.feedback, '') <> '' AS feedback
      FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id
     WHERE r.cascade_id = ANY($1::uuid[])),
  by_recipient AS (
    SELECT cascade_id,
           count(*) FILTER (WHERE status = 'running')::int AS running,
           count(*) FILTER (WHERE status = 'waiting')::int AS waiting,
           count(*) FILTER (WHERE status = 'finished')::int AS finished,
           count(*) FILTER (WHERE finish_reason = 'rated')::int AS rated,
           count(*) FILTER (WHERE finish_reason = 'exhausted')::int AS exhausted,
           count(*) FILTER (WHERE finish_reason = 'unreachable')::int AS unreachable,
           count(*) FILTER (WHERE finish_reason = 'unsubscribed')::int AS unsubscribed,
           count(*) FILTER (WHERE finish_reason = 'canceled')::int AS canceled,
           count(*) FILTER (WHERE finish_reason = 'cooldown')::int AS cooldown,
           count(*) FILTER (WHERE finish_reason = 'no_consent')::int AS no_consent,
           count(*) FILTER (WHERE opened)::int AS opened,
           count(*) FILTER (WHERE feedback)::int AS feedback
      FROM r GROUP BY cascade_id),
  by_step AS (
    SELECT r.cascade_id,
           count(*) FILTER (WHERE s.status = 'sent')::int AS steps_sent,
           count(*) FILTER (WHERE s.status = 'failed')::int AS steps_failed,
           count(*) FILTER (WHERE s.status = 'skipped')::int AS steps_skipped,
           count(*) FILTER (WHERE s.status IN ('pending', 'scheduled', 'dispatched'))::int AS steps_pending,
           count(*) FILTER (WHERE s.delivered_at IS NOT NULL)::int AS steps_delivered,
           count(*) FILTER (WHERE s.delivered_at IS NULL AND s.status = 'sent' AND s.reason LIKE 'undelivered%')::int AS steps_undelivered
      FROM r JOIN recipient_steps s ON s.recipient_id = r.id GROUP BY r.cascade_id)
  SELECT c.id, c.recipients_total, c.skipped, br.*, bs.*
    FROM cascades c LEFT JOIN by_recipient br ON br.cascade_id = c.id LEFT JOIN by_step bs ON bs.cascade_id = c.id
   WHERE c.id = ANY($1::uuid[])`;

/** Column of COUNTS_SQL for each count key (recipients and queued come from the cascade row). */
const COLUMN_OF: Record<Exclude<CascadeCountKey, 'recipients' | 'queued' | 'skipped'>, string> = {
  running: 'running', waiting: 'waiting', finished: 'finished', rated: 'rated', exhausted: 'exhausted', unreachable: 'unreachable', unsubscribed: 'unsubscribed',
  canceled: 'canceled', cooldown: 'cooldown', noConsent: 'no_consent', opened: 'opened', feedback: 'feedback', stepsSent: 'steps_sent', stepsFailed: 'steps_failed',
  stepsSkipped: 'steps_skipped', stepsPending: 'steps_pending', stepsDelivered: 'steps_delivered', stepsUndelivered: 'steps_undelivered',
};

/** Counts of each cascade by id (every key present); ids that are no cascade are left out. */
export async function countCascades(db: Pool | PoolClient, ids: string[]): Promise<Map<string, CascadeCounts>> {
  const out = new Map<string, CascadeCounts>();
  if (ids.length === 0) return out;
  const { rows } = await db.query<Record<string, number | string | null>>(COUNTS_SQL, [ids]);
  for (const row of rows) {
    const counts = {} as CascadeCounts;
    const total = Number(row.recipients_total);
    const skipped = Number(row.skipped);
    counts.recipients = total;
    counts.queued = total - skipped;
    counts.skipped = skipped;
    for (const [key, column] of Object.entries(COLUMN_OF)) counts[key as CascadeCountKey] = Number(row[column] ?? 0);
    out.set(String(row.id), counts);
  }
  return out;
}

/** Counts as the gRPC messages carry them: every key, in CASCADE_COUNT_KEYS order. */
export function countList(counts: CascadeCounts): schedulerV1.CascadeCount[] {
  return CASCADE_COUNT_KEYS.map((key) => ({ key, value: counts[key] }));
}
