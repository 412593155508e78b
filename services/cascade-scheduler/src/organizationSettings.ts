import { MAX_RECIPIENTS_PER_REQUEST, type schedulerV1 } from '@rrs/proto';
import { InvalidError, type FieldProblem, type Pool } from '@rrs/runtime';

/** Ratings at or below this ask for private feedback, unless the organization set its own. */
export const DEFAULT_LOW_RATING_THRESHOLD = 3;

/** Recipients per StartCascade request for this organization: its own limit, or the API's ceiling. */
export async function recipientLimit(pool: Pool, organizationId: string): Promise<number> {
  const { rows } = await pool.query<{ max_recipients: number }>('SELECT max_recipients FROM organization_settings WHERE organization_id = $1', [organizationId]);
  return rows[0]?.max_recipients ?? MAX_RECIPIENTS_PER_REQUEST;
}

export async function getOrganizationSettings(pool: Pool, organizationId: string): Promise<schedulerV1.OrganizationSettings> {
  const { rows } = await pool.query<{ low_rating_threshold: number; max_recipients: number }>(
    'SELECT low_rating_threshold, max_recipients FROM organization_settings WHERE organization_id = $1',
    [organizationId],
  );
  return {
    organizationId,
    lowRatingThreshold: rows[0]?.low_rating_threshold ?? DEFAULT_LOW_RATING_THRESHOLD,
    maxRecipientsPerRequest: rows[0]?.max_recipients ?? MAX_RECIPIENTS_PER_REQUEST,
  };
}

/** `maxRecipientsPerRequest` 0 restores the default (the API's ceiling, 500). */
export async function setOrganizationSettings(pool: Pool, organizationId: string, lowRatingThreshold: number, maxRecipientsPerRequest = 0): Promise<schedulerV1.OrganizationSettings> {
  const problems: FieldProblem[] = [];
  if (!Number.isInteger(lowRatingThreshold) || lowRatingThreshold < 0 || lowRatingThreshold > 5) {
    problems.push({ pointer: '/lowRatingThreshold', detail: 'an integer from 0 (never ask for feedback) to 5' });
  }
  if (!Number.isInteger(maxRecipientsPerRequest) || maxRecipientsPerRequest < 0 || maxRecipientsPerRequest > MAX_RECIPIENTS_PER_REQUEST) {
    problems.push({ pointer: '/maxRecipientsPerRequest', detail: `an integer from 1 to ${MAX_RECIPIENTS_PER_REQUEST} (0 = ${MAX_RECIPIENTS_PER_REQUEST})` });
  }
  if (problems.length) throw new InvalidError(problems);
  const max = maxRecipientsPerRequest || MAX_RECIPIENTS_PER_REQUEST;
  await pool.query(
    `INSERT INTO organization_settings (organization_id, low_rating_threshold, max_recipients) VALUES ($1, $2, $3)
     ON CONFLICT (organization_id) DO UPDATE SET low_rating_threshold = excluded.low_rating_threshold, max_recipients = excluded.max_recipients, updated_at = now()`,
    [organizationId, lowRatingThreshold, max],
  );
  return { organizationId, lowRatingThreshold, maxRecipientsPerRequest: max };
}
