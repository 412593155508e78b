import { sqlArray, type Pool, type PoolClient } from '@rrs/runtime';
import { msUntilEarliest } from './msUntilEarliest';

export interface ClaimedStep {
  stepId: string;
  recipientId: string;
}

/**
 * Reads the database clock and claims up to `limit` steps due at that time, in due order straight off
 * the due index, locking each as it is read (SKIP LOCKED: a second claimer reads past them, so
 * replicas share the work and none dispatches a step twice), in one statement. Never waits for a lock.
 */
export async function claimDueSteps(client: PoolClient, limit: number): Promise<{ now: Date; claimed: ClaimedStep[] }> {
  const { rows } = await client.query<{ now: Date; stepId: string | null; recipientId: string | null }>(
    `WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS now)
     SELECT clock.now, s.id AS "stepId", s.recipient_id AS "recipientId"
       FROM clock LEFT JOIN LATERAL (
         SELECT id, recipient_id FROM recipient_steps
          WHERE status = 'scheduled' AND due_at <= clock.now
          ORDER BY due_at LIMIT $1
          FOR UPDATE SKIP LOCKED) s ON true`,
    [limit],
  );
  const claimed: ClaimedStep[] = [];
  for (const row of rows) if (row.stepId !== null && row.recipientId !== null) claimed.push({ stepId: row.stepId, recipientId: row.recipientId });
  return { now: rows[0].now, claimed };
}

/** Until the nearest scheduled step is due (one `min()` over the due index). */
export function msUntilNextDueStep(pool: Pool): Promise<number | null> {
  return msUntilEarliest(pool, 'due_at', 'recipient_steps', `status = 'scheduled'`);
}

/** The channels of steps dispatched before `before` that still have no result. */
export async function channelsWithTimedOutSteps(db: Pool | PoolClient, before: Date): Promise<string[]> {
  const { rows } = await db.query<{ sent_channel: string }>(
    `SELECT DISTINCT sent_channel FROM recipient_steps WHERE status = 'dispatched' AND dispatched_at <= $1`,
    [before],
  );
  return rows.map((row) => row.sent_channel);
}

/**
 * Claims up to `limit` steps dispatched at or before `before` that still have no result (`except` those
 * whose result is on its way), with their recipients (SKIP LOCKED like the dispatcher, so replicas never
 * act twice), counting one more result timeout on each.
 */
export async function claimTimedOutSteps(client: PoolClient, before: Date, limit: number, channels: string[], except: string[] = []): Promise<Array<ClaimedStep & { timeouts: number }>> {
  const { rows: due } = await client.query<ClaimedStep>(
    `SELECT s.id AS "stepId", s.recipient_id AS "recipientId"
       FROM recipient_steps s JOIN recipients r ON r.id = s.recipient_id
      WHERE s.status = 'dispatched' AND s.dispatched_at <= $1 AND s.sent_channel = ANY($3::text[]) AND NOT s.id = ANY($4::uuid[])
      ORDER BY s.dispatched_at LIMIT $2
      FOR UPDATE OF s, r SKIP LOCKED`,
    [before, limit, sqlArray(channels), sqlArray(except, { bare: true })],
  );
  if (due.length === 0) return [];
  const { rows: counted } = await client.query<{ id: string; result_timeouts: number }>(
    'UPDATE recipient_steps SET result_timeouts = result_timeouts + 1 WHERE id = ANY($1::uuid[]) RETURNING id, result_timeouts',
    [due.map((step) => step.stepId)],
  );
  const timeouts = new Map(counted.map((row) => [row.id, row.result_timeouts]));
  return due.map((step) => ({ ...step, timeouts: timeouts.get(step.stepId) ?? 0 }));
}
