import type { schedulerV1 } from '@rrs/proto';
import { NotFoundError, type Pool, type PoolClient } from '@rrs/runtime';
import { countList, countsOfRow, RECIPIENT_COUNT_COLUMNS, STEP_COUNT_COLUMNS, stepCountSums } from './cascadeCounts';
import type { Reroute, StepStatus } from './engine';
import { isUuid } from './ids';

/** A time as READ_SQL writes it into JSON: epoch milliseconds, cut to the millisecond as node-postgres cuts a timestamp it reads (a Date holds no more), or null. */
const epochMs = (column: string) => `floor(extract(epoch FROM ${column}) * 1000)`;

/** A step as READ_SQL writes it: a JSON array, in this order. */
type StepJson = [
  order: number, channel: string, status: StepStatus, dueAt: number | null, sentAt: number | null, skippedAt: number | null, dispatchedAt: number | null,
  deliveredAt: number | null, reason: string | null, reroutes: Reroute[], sentChannel: string, provider: string | null,
];
const STEP_JSON = `json_build_array(s.step_order, s.channel, s.status, ${epochMs('s.due_at')}, ${epochMs('s.sent_at')}, ${epochMs('s.skipped_at')},
                   ${epochMs('s.dispatched_at')}, ${epochMs('s.delivered_at')}, s.reason, s.reroutes, s.sent_channel, s.provider)`;

/** A recipient as READ_SQL writes it: a JSON array, in this order, its steps last (null: none). */
type RecipientJson = [
  id: string, name: string, email: string, phone: string, contactExternalId: string, status: string, finishReason: string | null, rating: number | null,
  feedback: string | null, ratedAt: number | null, finishedAt: number | null, windowClosesAt: number | null, reviewRequestId: string, openedAt: number | null,
  steps: StepJson[] | null,
];
const RECIPIENT_JSON = `json_build_array(r.id, r.name, r.email, r.phone, r.contact_external_id, r.status, r.finish_reason, r.rating, r.feedback,
                   ${epochMs('r.rated_at')}, ${epochMs('r.finished_at')}, ${epochMs('r.window_closes_at')}, r.review_request_id, ${epochMs('r.opened_at')}, r.steps)`;

/**
 * The cascade, its recipients with their steps, and its counts, in one statement: one snapshot (a
 * change committed meanwhile — a recipient stopped and its steps canceled — is seen whole or not at
 * all), one request, each recipient and step read once. The steps through their recipients
 * (`recipients_cascade`, then recipient_steps' `(recipient_id, step_order)` key, one probe per
 * recipient): by `cascade_id`, which no index covers, they would be every step ever made, and an index on
 * it would cost every intake a third index entry per step (docs/operations.md, "Data lifecycle"). The
 * recipients and steps travel as one JSON array (the recipients in position order, each with its steps
 * in step order) rather than as ~2 000 rows a 500-recipient cascade: the driver's per-row and per-field
 * work was most of the read. The step counts are counted per recipient and summed.
 */
const READ_SQL = `
  SELECT c.id, c.organization_id, c.status, c.external_id, c.name, c.location_id, c.flow_id, c.channel, c.created_at, c.finished_at,
         c.recipients_total, c.skipped, contents.*
    FROM cascades c, LATERAL (
    SELECT coalesce(json_agg(${RECIPIENT_JSON} ORDER BY r.position), '[]') AS recipients,
           ${RECIPIENT_COUNT_COLUMNS},
           ${stepCountSums('r')}
      FROM (SELECT r.id, r.position, r.name, r.email, r.phone, r.contact_external_id, r.status, r.finish_reason, r.rating, r.feedback, r.rated_at,
                   r.finished_at, r.window_closes_at, r.review_request_id, rr.opened_at, st.*
              FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id
              LEFT JOIN LATERAL (
                SELECT json_agg(${STEP_JSON} ORDER BY s.step_order) AS steps,
                       ${STEP_COUNT_COLUMNS}
                  FROM recipient_steps s WHERE s.recipient_id = r.id) st ON true
             WHERE r.cascade_id = c.id) r) contents
   WHERE c.id = $1 AND c.organization_id = $2`;

/**
 * A cascade as GET /cascades/{id} shows it: its recipients with their steps, and the `counts` (every
 * key of CASCADE_COUNT_KEYS, 0 when none), as of one moment. `not_found` for an unknown id or another
 * organization's cascade.
 */
export async function readCascade(pool: Pool, organizationId: string, id: string): Promise<schedulerV1.Cascade> {
  return readCascadeIn(pool, organizationId, id);
}

/** As readCascade, or in the caller's transaction (which holds the cascade's recipients): what that transaction made of them. */
export async function readCascadeIn(db: Pool | PoolClient, organizationId: string, id: string): Promise<schedulerV1.Cascade> {
  if (!isUuid(id) || !isUuid(organizationId)) throw new NotFoundError('cascade');
  // Named, so each connection parses and plans it once (planning alone took ~0.45 ms of the backend's
  // 6–8 ms for 500 recipients).
  const { rows } = await db.query({ name: 'scheduler-read-cascade', text: READ_SQL, values: [id, organizationId] });
  if (!rows[0]) throw new NotFoundError('cascade');
  return toCascade(rows[0]);
}

const at = (ms: number | null) => (ms === null ? undefined : new Date(ms));

function toStep([order, channel, status, dueAt, sentAt, skippedAt, dispatchedAt, deliveredAt, reason, reroutes, sentChannel, provider]: StepJson): schedulerV1.RecipientStep {
  return {
    order, channel, status, dueAt: at(dueAt), sentAt: at(sentAt), skippedAt: at(skippedAt), dispatchedAt: at(dispatchedAt), deliveredAt: at(deliveredAt), reason: reason ?? '',
    reroutes: reroutes.map((hop) => ({ fromChannel: hop.from, toChannel: hop.to, reason: hop.reason })), sentChannel, provider: provider ?? '',
  };
}

function toRecipient([id, name, email, phone, contactExternalId, status, finishReason, rating, feedback, ratedAt, finishedAt, windowClosesAt, reviewRequestId, openedAt, steps]: RecipientJson): schedulerV1.CascadeRecipient {
  return {
    id, name, email, phone, contactExternalId, status, finishReason: finishReason ?? '', rating: rating ?? 0, feedback: feedback ?? '', ratedAt: at(ratedAt), finishedAt: at(finishedAt),
    windowClosesAt: at(windowClosesAt), steps: steps ? steps.map(toStep) : [], reviewRequestId, openedAt: at(openedAt),
  };
}

function toCascade(row: Record<string, unknown> & { recipients: RecipientJson[] }): schedulerV1.Cascade {
  const externalId = row.external_id as string | null;
  return {
    id: row.id as string,
    organizationId: row.organization_id as string,
    status: row.status as string,
    externalId: externalId ?? '',
    hasExternalId: externalId !== null,
    name: row.name as string,
    locationId: row.location_id as string,
    flowId: (row.flow_id as string | null) ?? '',
    channel: (row.channel as string | null) ?? '',
    counts: countList(countsOfRow(row)),
    recipients: row.recipients.map(toRecipient),
    createdAt: row.created_at as Date,
    finishedAt: (row.finished_at as Date | null) ?? undefined,
  };
}
