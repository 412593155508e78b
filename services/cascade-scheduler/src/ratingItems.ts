import { uuidv7, type PoolClient } from '@rrs/runtime';
import { THRESHOLD_OF_LOCATION_SQL } from './alertSettings';

/*
 * A rating becomes an item of the inbox's workflow, and gets its alert, in the transaction that records
 * it: a rating at or under the location's threshold, or any private feedback. The alert loop
 * (ratingAlerts.ts) sends what comes due.
 */

/** LISTEN channel: a new alert is due (payload: the epoch ms it is due). */
export const ALERT_CHANNEL = 'rrs_scheduler_alert';

interface RatedLink {
  id: string;
  organization_id: string;
  location_id: string;
}

/**
 * A rating was recorded: a low one is an item from now, and its alert waits `holdMs` for the private
 * feedback that usually follows, so that one alert carries both.
 */
export async function ratingRecorded(client: PoolClient, link: RatedLink, rating: number, now: Date, holdMs: number): Promise<void> {
  const { rows } = await client.query<{ threshold: number }>(`SELECT ${THRESHOLD_OF_LOCATION_SQL} AS threshold`, [link.organization_id, link.location_id]);
  if (rating > rows[0].threshold) return;
  await client.query('UPDATE ratings SET actionable_at = $2 WHERE review_request_id = $1', [link.id, now]);
  await addAlert(client, link, 'rating', new Date(now.getTime() + holdMs));
}

/**
 * Private feedback was recorded: the rating is an item (if it was not already), the feedback is in its
 * history, and an alert goes now: the rating's own, released early if it is still waiting; or one for
 * the feedback, when the rating's alert already went or there was none (a high rating).
 */
export async function feedbackRecorded(client: PoolClient, link: RatedLink, text: string, now: Date): Promise<void> {
  await client.query('UPDATE ratings SET actionable_at = coalesce(actionable_at, $2) WHERE review_request_id = $1', [link.id, now]);
  await client.query(`INSERT INTO rating_history (review_request_id, organization_id, at, kind, text) VALUES ($1, $2, $3, 'feedback', $4)`, [link.id, link.organization_id, now, text]);
  const { rows } = await client.query<{ sent: boolean }>(`SELECT sent_at IS NOT NULL AS sent FROM rating_alerts WHERE review_request_id = $1 AND kind = 'rating'`, [link.id]);
  if (rows.length === 0) return addAlert(client, link, 'rating', now);
  if (rows[0].sent) return addAlert(client, link, 'feedback', now);
  await client.query(`UPDATE rating_alerts SET due_at = least(due_at, $2) WHERE review_request_id = $1 AND kind = 'rating' AND sent_at IS NULL`, [link.id, now]);
  await client.query('SELECT pg_notify($1, $2)', [ALERT_CHANNEL, String(now.getTime())]);
}

async function addAlert(client: PoolClient, link: RatedLink, kind: 'rating' | 'feedback', dueAt: Date): Promise<void> {
  await client.query(
    `INSERT INTO rating_alerts (id, review_request_id, organization_id, kind, due_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (review_request_id, kind) DO NOTHING`,
    [uuidv7(), link.id, link.organization_id, kind, dueAt],
  );
  await client.query('SELECT pg_notify($1, $2)', [ALERT_CHANNEL, String(dueAt.getTime())]);
}
