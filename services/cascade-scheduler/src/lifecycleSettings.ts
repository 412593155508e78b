import type { schedulerV1 } from '@rrs/proto';
import { InvalidError, NotFoundError, type Pool } from '@rrs/runtime';
import { isUuid } from './ids';
import { DEFAULT_RETENTION_DAYS, MAX_RETENTION_DAYS, MIN_RETENTION_DAYS } from './retention';

/** How long the organization keeps the personal data of finished recipients (retention.ts). */
export async function getDataRetention(pool: Pool, organizationId: string): Promise<schedulerV1.DataRetention> {
  const { rows } = isUuid(organizationId)
    ? await pool.query<{ days: number }>('SELECT personal_data_retention_days AS days FROM organization_settings WHERE organization_id = $1', [organizationId])
    : { rows: [] };
  return { organizationId, personalDataRetentionDays: rows[0]?.days ?? DEFAULT_RETENTION_DAYS };
}

/** Sets it (`invalid_request` outside 30..3650, and nothing changes); the next retention round applies it. */
export async function setDataRetention(pool: Pool, request: schedulerV1.SetDataRetentionRequest): Promise<schedulerV1.DataRetention> {
  const days = request.personalDataRetentionDays;
  if (!Number.isInteger(days) || days < MIN_RETENTION_DAYS || days > MAX_RETENTION_DAYS) {
    throw InvalidError.field('/personalDataRetentionDays', `an integer from ${MIN_RETENTION_DAYS} to ${MAX_RETENTION_DAYS} (days)`);
  }
  if (!isUuid(request.organizationId)) throw new NotFoundError('organization');
  await pool.query(
    `INSERT INTO organization_settings (organization_id, personal_data_retention_days) VALUES ($1, $2)
     ON CONFLICT (organization_id) DO UPDATE SET personal_data_retention_days = excluded.personal_data_retention_days, updated_at = now()`,
    [request.organizationId, days],
  );
  return { organizationId: request.organizationId, personalDataRetentionDays: days };
}

const MAX_PAGE = 500;

/** The evidence of erasures and retention rounds (lifecycle_actions), oldest first, by pages. */
export async function listLifecycleActions(pool: Pool, request: schedulerV1.ListLifecycleActionsRequest): Promise<schedulerV1.ListLifecycleActionsResponse> {
  const limit = request.limit || 100;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new InvalidError([{ parameter: 'limit', detail: `an integer from 1 to ${MAX_PAGE}` }]);
  if (!isUuid(request.organizationId)) return { actions: [], nextAfter: 0 };
  const { rows } = await pool.query<{ id: number; kind: string; request_id: string; subject_hashes: string[]; actor: string; counts: Record<string, number>; at: Date }>(
    `SELECT id, kind, request_id, subject_hashes, actor, counts, at FROM lifecycle_actions WHERE organization_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
    [request.organizationId, request.after || 0, limit + 1],
  );
  const page = rows.slice(0, limit);
  return {
    actions: page.map((row) => ({ id: row.id, kind: row.kind, requestId: row.request_id, subjectHashes: row.subject_hashes, actor: row.actor, counts: row.counts, at: row.at })),
    nextAfter: rows.length > limit ? page[page.length - 1].id : 0,
  };
}
