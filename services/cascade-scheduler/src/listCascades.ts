import { CASCADE_STATUSES, DEFAULT_CASCADE_PAGE, MAX_CASCADE_PAGE, type schedulerV1 } from '@rrs/proto';
import { InvalidError, type Pool } from '@rrs/runtime';
import { countCascades, countList } from './cascadeCounts';
import { dayRangeSql, optionalDayRangeProblems } from './dayRange';
import { isUuid } from './ids';

export { DEFAULT_CASCADE_PAGE, MAX_CASCADE_PAGE };

export interface ListCascadesInput {
  organizationId: string;
  /** Exact match; '' = any. */
  externalId: string;
  /** A CascadeStatus; '' = any. */
  status: string;
  /** 1..MAX_CASCADE_PAGE; 0 = DEFAULT_CASCADE_PAGE. */
  limit: number;
  /** The last id of the previous page; ids are UUIDv7, so id order is creation order. */
  after: string;
  /** Exact; '' = any. */
  locationId?: string;
  /** Created from the start of `fromDay` to the end of `toDay` (YYYY-MM-DD in `timeZone`); '' = unbounded. */
  fromDay?: string;
  toDay?: string;
  timeZone?: string;
  /** Created at or after `createdFrom`, and before `createdTo`; unset = unbounded. */
  createdFrom?: Date;
  createdTo?: Date;
  /** Fill each cascade's `counts`. */
  withCounts?: boolean;
}

/**
 * An organization's cascades, newest first, one page at a time (the account console's list and GET
 * /cascades). Pages follow the id (UUIDv7: creation order), so a page after `after` holds the same
 * cascades whatever was created meanwhile: new cascades come before the first page, never inside a later one.
 */
export async function listCascades(pool: Pool, input: ListCascadesInput): Promise<schedulerV1.ListCascadesResponse> {
  const limit = input.limit || DEFAULT_CASCADE_PAGE;
  const problems = [];
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_CASCADE_PAGE) problems.push({ parameter: 'limit', detail: `must be an integer from 1 to ${MAX_CASCADE_PAGE}` });
  if (input.status && !(CASCADE_STATUSES as readonly string[]).includes(input.status)) problems.push({ parameter: 'status', detail: `must be one of ${CASCADE_STATUSES.join(', ')}` });
  if (input.after && !isUuid(input.after)) problems.push({ parameter: 'after', detail: 'must be a cascade id' });
  problems.push(...optionalDayRangeProblems(input.fromDay ?? '', input.toDay ?? ''));
  if (input.createdFrom && input.createdTo && input.createdFrom > input.createdTo) problems.push({ parameter: 'createdTo', detail: 'must not be before createdFrom' });
  if (problems.length > 0) throw new InvalidError(problems, { message: problems.map((p) => `${p.parameter} ${p.detail}`).join('; ') });
  if (!isUuid(input.organizationId)) return { cascades: [], nextAfter: '' };
  const { rows } = await pool.query(
    `SELECT id, status, external_id, name, location_id, flow_id, channel, recipients_total, skipped, created_at, finished_at
       FROM cascades
      WHERE organization_id = $1 AND ($2 = '' OR external_id = $2) AND ($3 = '' OR status = $3) AND ($4::uuid IS NULL OR id < $4::uuid)
        AND ($6 = '' OR location_id = $6) AND ${dayRangeSql('created_at', 7, 8, 9)}
        AND ($10::timestamptz IS NULL OR created_at >= $10) AND ($11::timestamptz IS NULL OR created_at < $11)
      ORDER BY id DESC LIMIT $5`,
    [
      input.organizationId, input.externalId, input.status, input.after || null, limit + 1, input.locationId ?? '', input.fromDay ?? '', input.toDay ?? '', input.timeZone || 'UTC',
      input.createdFrom ?? null, input.createdTo ?? null,
    ],
  );
  const page = rows.slice(0, limit);
  const counts = input.withCounts ? await countCascades(pool, page.map((c) => c.id)) : new Map();
  return {
    cascades: page.map((c) => ({
      id: c.id, status: c.status, externalId: c.external_id ?? '', hasExternalId: c.external_id !== null, name: c.name, locationId: c.location_id, flowId: c.flow_id ?? '', channel: c.channel ?? '',
      recipients: c.recipients_total, skipped: c.skipped, createdAt: c.created_at, finishedAt: c.finished_at ?? undefined,
      counts: counts.has(c.id) ? countList(counts.get(c.id)) : [],
    })),
    nextAfter: rows.length > limit ? page[page.length - 1].id : '',
  };
}
