import { sqlArray, type Pool, type PoolClient } from '@rrs/runtime';
import { msUntilEarliest } from './msUntilEarliest';

export interface ClaimedStep {
  stepId: string;
  recipientId: string;
}

/**
 * Claims up to `limit` steps due at `now`, in due order straight off the due index, locking each as it
 * is read (SKIP LOCKED: a second claimer reads past them, so replicas share the work and none
 * dispatches a step twice). Never waits for a lock.
 */
export async function claimDueSteps(client: PoolClient, now: Date, limit: number): Promise<ClaimedStep[]> {
  const { rows } = await client.query<ClaimedStep>(
    `SELECT id AS "stepId", recipient_id AS "recipientId" FROM recipient_steps
      WHERE status = 'scheduled' AND due_at <= $1
      ORDER BY due_at LIMIT $2
      FOR UPDATE SKIP LOCKED`,
    [now, limit],
  );
  return rows;
}

/** Until the nearest scheduled step is due (one `min()` over the due index). */
export function msUntilNextDueStep(pool: Pool): Promise<number | null> {
  return msUntilEarliest(pool, 'due_at', 'recipient_steps', `status = 'scheduled'`);
}

/**
 * Claims up to `limit` steps dispatched at or before `before` that still have no result, with their
 * recipients (SKIP LOCKED like the dispatcher, so replicas never act twice), counting one more result
 * timeout on each.
 */
/** The channels of steps dispatched before `before` that still have no result. */
export async function channelsWithTimedOutSteps(db: Pool | PoolClient, before: Date): Promise<string[]> {
  const { rows } = await db.query<{ sent_channel: string }>(
    `SELECT DISTINCT sent_channel FROM recipient_steps WHERE status = 'dispatched' AND dispatched_at <= $1`,
    [before],
  );
  return rows.map((row) => row.sent_channel);
}

export async function claimTimedOutSteps(client: PoolClient, before: Date, limit: number, channels: string[]): Promise<Array<ClaimedStep & { timeouts: number }>> {
  const { rows: due } = await client.query<ClaimedStep>(
    `SELECT s.id AS "stepId", s.recipient_id AS "recipientId"
       FROM recipient_steps s JOIN recipients r ON r.id = s.recipient_id
      WHERE s.status = 'dispatched' AND s.dispatched_at <= $1 AND s.sent_channel = ANY($3::text[])
      ORDER BY s.dispatched_at LIMIT $2
      FOR UPDATE OF s, r SKIP LOCKED`,
    [before, limit, sqlArray(channels)],
  );
  if (due.length === 0) return [];
  const { rows: counted } = await client.query<{ id: string; result_timeouts: number }>(
    'UPDATE recipient_steps SET result_timeouts = result_timeouts + 1 WHERE id = ANY($1::uuid[]) RETURNING id, result_timeouts',
    [due.map((step) => step.stepId)],
  );
  const timeouts = new Map(counted.map((row) => [row.id, row.result_timeouts]));
  return due.map((step) => ({ ...step, timeouts: timeouts.get(step.stepId) ?? 0 }));
}
