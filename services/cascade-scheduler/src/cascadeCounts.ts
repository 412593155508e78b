import { CASCADE_COUNT_KEYS, type CascadeCountKey, type schedulerV1 } from '@rrs/proto';
import type { Pool, PoolClient } from '@rrs/runtime';

export type CascadeCounts = Record<CascadeCountKey, number>;

/**
 * The `counts` of cascades (docs/cascades.md, "counts keys"), each written once, as the condition a
 * recipient or a step meets to be counted: what GET /cascades/{id} shows (readCascade.ts, in its one
 * statement) and what each item of the cascade list carries (countCascades) are counted by these same
 * conditions, so the two can never disagree. `recipients`, `queued` and `skipped` come from the cascade row.
 */
type CountedKey = Exclude<CascadeCountKey, 'recipients' | 'queued' | 'skipped'>;

/**
 * Recipients by status and finish reason, those who opened their link or left feedback: conditions on
 * `r`, a recipient row with `opened_at` of its review request beside it.
 */
const RECIPIENT_COUNTS = {
  running: `r.status = 'running'`,
  waiting: `r.status = 'waiting'`,
  finished: `r.status = 'finished'`,
  rated: `r.finish_reason = 'rated'`,
  exhausted: `r.finish_reason = 'exhausted'`,
  unreachable: `r.finish_reason = 'unreachable'`,
  unsubscribed: `r.finish_reason = 'unsubscribed'`,
  canceled: `r.finish_reason = 'canceled'`,
  cooldown: `r.finish_reason = 'cooldown'`,
  noConsent: `r.finish_reason = 'no_consent'`,
  opened: `r.opened_at IS NOT NULL`,
  feedback: `coalesce(r.feedback, '') <> ''`,
} as const satisfies Partial<Record<CountedKey, string>>;

/**
 * Steps by status (pending = pending, scheduled or dispatched; a canceled step counts nowhere), with a
 * delivery receipt, or with a negative one (`undelivered: <reason>` on a sent step): conditions on `s`, a
 * recipient_steps row.
 */
const STEP_COUNTS = {
  stepsSent: `s.status = 'sent'`,
  stepsFailed: `s.status = 'failed'`,
  stepsSkipped: `s.status = 'skipped'`,
  stepsPending: `s.status IN ('pending', 'scheduled', 'dispatched')`,
  stepsDelivered: `s.delivered_at IS NOT NULL`,
  stepsUndelivered: `s.delivered_at IS NULL AND s.status = 'sent' AND s.reason LIKE 'undelivered%'`,
} as const satisfies Record<Exclude<CountedKey, keyof typeof RECIPIENT_COUNTS>, string>;

const countColumns = (conditions: Readonly<Record<string, string>>) =>
  Object.entries(conditions).map(([key, condition]) => `count(*) FILTER (WHERE ${condition})::int AS "${key}"`).join(',\n           ');

/** The recipient counts, one column named by its key, over recipients `r` (an aggregate's select list). */
export const RECIPIENT_COUNT_COLUMNS = countColumns(RECIPIENT_COUNTS);
/** The step counts, one column named by its key, over steps `s` (an aggregate's select list). */
export const STEP_COUNT_COLUMNS = countColumns(STEP_COUNTS);
/** The step counts, over rows of `relation` that each carry STEP_COUNT_COLUMNS of some of the steps: their sums. */
export const stepCountSums = (relation: string) => Object.keys(STEP_COUNTS).map((key) => `coalesce(sum(${relation}."${key}"), 0)::int AS "${key}"`).join(',\n           ');

/**
 * The counts of the cascades `$1`, in one statement. Steps are reached through their recipients
 * (`recipients_cascade`, then the steps' `(recipient_id, step_order)` key).
 */
const COUNTS_SQL = `
  WITH r AS (
    SELECT r.id, r.cascade_id, r.status, r.finish_reason, r.feedback, rr.opened_at
      FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id
     WHERE r.cascade_id = ANY($1::uuid[])),
  by_recipient AS (
    SELECT r.cascade_id,
           ${RECIPIENT_COUNT_COLUMNS}
      FROM r GROUP BY r.cascade_id),
  by_step AS (
    SELECT r.cascade_id,
           ${STEP_COUNT_COLUMNS}
      FROM r JOIN recipient_steps s ON s.recipient_id = r.id GROUP BY r.cascade_id)
  SELECT c.id, c.recipients_total, c.skipped, br.*, bs.*
    FROM cascades c LEFT JOIN by_recipient br ON br.cascade_id = c.id LEFT JOIN by_step bs ON bs.cascade_id = c.id
   WHERE c.id = ANY($1::uuid[])`;

/**
 * The counts of a row with the cascade's `recipients_total` and `skipped` and a column per counted key
 * (RECIPIENT_COUNT_COLUMNS, STEP_COUNT_COLUMNS or stepCountSums); a key without a value (a cascade
 * without recipients or steps) is 0.
 */
export function countsOfRow(row: Readonly<Record<string, unknown>>): CascadeCounts {
  const total = Number(row.recipients_total);
  const skipped = Number(row.skipped);
  const counts = { recipients: total, queued: total - skipped, skipped } as CascadeCounts;
  for (const key of [...Object.keys(RECIPIENT_COUNTS), ...Object.keys(STEP_COUNTS)] as CountedKey[]) counts[key] = Number(row[key] ?? 0);
  return counts;
}

/** Counts of each cascade by id (every key present); ids that are no cascade are left out. */
export async function countCascades(db: Pool | PoolClient, ids: string[]): Promise<Map<string, CascadeCounts>> {
  const out = new Map<string, CascadeCounts>();
  if (ids.length === 0) return out;
  const { rows } = await db.query<Record<string, unknown>>(COUNTS_SQL, [ids]);
  for (const row of rows) out.set(String(row.id), countsOfRow(row));
  return out;
}

/** Counts as the gRPC messages carry them: every key, in CASCADE_COUNT_KEYS order. */
export function countList(counts: CascadeCounts): schedulerV1.CascadeCount[] {
  return CASCADE_COUNT_KEYS.map((key) => ({ key, value: counts[key] }));
}
