import { eventSubject, EVENT_TYPES } from '@rrs/proto';
import { execute, queryEach, sqlArray, type PoolClient, type QueryResult, type Statement } from '@rrs/runtime';
import type { RecipientFields, StepState } from './engine';
import type { LoadedRecipient, RecipientMeta } from './loadedRecipient';
import { finishEventOf } from './finishEvent';
import { refreshFinishEvent, writeOutbox, type OutboxEvent } from './outbox';
import { markStaleStatement } from './overviewRollup';
import { rememberLoaded, timestampColumn, updateChanged, type ChangeColumn } from './sql/updateChanged';

/**
 * The recipient store: loading, locking and saving recipients with their steps. The recipient row
 * lock is the one mutex of a recipient's state: every transaction that changes a recipient or its
 * steps locks the recipient row first (several at once in id order), so steps need no locks of their
 * own. The dispatcher takes its locks with SKIP LOCKED and never waits; cascade rows are locked last,
 * in id order.
 */

/** Notified (with the earliest new due time, epoch ms) when steps are scheduled; dispatchers listen. */
export const DUE_CHANNEL = 'rrs_scheduler_due';

/** Notified (with the window's close time, epoch ms) when a recipient starts waiting for a rating; the window closer listens. */
export const WINDOW_CHANNEL = 'rrs_scheduler_window';

export type { LoadedRecipient, RecipientMeta } from './loadedRecipient';

/** The database clock: the one clock every replica reads. */
export async function dbNow(client: PoolClient): Promise<Date> {
  const { rows } = await client.query<{ now: Date }>('SELECT clock_timestamp() AS now');
  return rows[0].now;
}

const RECIPIENT_COLUMNS = `r.id, r.cascade_id, r.organization_id, r.name, r.email, r.phone, r.status, r.finish_reason,
  r.rating, r.rated_at, r.feedback, r.finished_at, r.window_closes_at, r.contact_external_id, r.review_request_id`;
const WITH_TOKEN = { columns: `${RECIPIENT_COLUMNS}, rr.token`, from: 'recipients r JOIN review_requests rr ON rr.id = r.review_request_id' };
const WITHOUT_TOKEN = { columns: RECIPIENT_COLUMNS, from: 'recipients r' };

interface RecipientRow {
  id: string;
  cascade_id: string;
  organization_id: string;
  name: string;
  email: string;
  phone: string;
  status: 'running' | 'finished';
  finish_reason: RecipientFields['finishReason'];
  rating: number | null;
  rated_at: Date | null;
  feedback: string | null;
  finished_at: Date | null;
  window_closes_at: Date | null;
  contact_external_id: string;
  review_request_id: string;
  token?: string;
}

/** What recipients of one cascade share: read once per cascade per batch, not once per recipient. */
type CascadeMeta = Pick<RecipientMeta, 'cascadeExternalId' | 'locationId' | 'locale' | 'templates' | 'location' | 'traceContext'> & { responseWindowMinutes: number };

interface CascadeRow {
  id: string;
  external_id: string | null;
  location_id: string;
  locale: string;
  templates: RecipientMeta['templates'];
  trace_context: Record<string, string>;
  response_window_minutes: number;
  location_name: string;
  location_address: string;
  location_city: string;
}

function toState(row: RecipientRow, cascade: CascadeMeta): LoadedRecipient {
  const recipient: RecipientFields = rememberLoaded(
    {
      id: row.id,
      cascadeId: row.cascade_id,
      organizationId: row.organization_id,
      name: row.name,
      email: row.email,
      phone: row.phone,
      status: row.status,
      finishReason: row.finish_reason,
      rating: row.rating,
      ratedAt: row.rated_at,
      feedback: row.feedback,
      finishedAt: row.finished_at,
      windowClosesAt: row.window_closes_at,
    },
    row as unknown as Record<string, unknown>,
  );
  // Fields written out, not spread: a batch builds a thousand of these per round.
  const meta: RecipientMeta = {
    cascadeExternalId: cascade.cascadeExternalId,
    locationId: cascade.locationId,
    locale: cascade.locale,
    templates: cascade.templates,
    location: cascade.location,
    traceContext: cascade.traceContext,
    contactExternalId: row.contact_external_id,
    reviewRequestId: row.review_request_id,
    token: row.token,
  };
  return { recipient, steps: [], meta, responseWindowMinutes: cascade.responseWindowMinutes };
}

function toCascadeMeta(cascade: CascadeRow): CascadeMeta {
  return {
    cascadeExternalId: cascade.external_id,
    locationId: cascade.location_id,
    locale: cascade.locale,
    templates: cascade.templates,
    location: { id: cascade.location_id, name: cascade.location_name, address: cascade.location_address, city: cascade.location_city },
    traceContext: cascade.trace_context,
    responseWindowMinutes: cascade.response_window_minutes,
  };
}

const STEP_SELECT = `id, recipient_id, step_order, channel, delay_minutes, status, sent_channel, attempt, due_at, dispatched_at,
            sent_at, skipped_at, delivered_at, reason, reroutes, provider`;

/** A step from a row of STEP_SELECT (array mode); the row stays with it as loaded. */
function toStep(row: unknown[]): StepState {
  const step: StepState = {
    id: row[0] as string,
    order: row[2] as number,
    channel: row[3] as string,
    delayMinutes: row[4] as number,
    status: row[5] as StepState['status'],
    sentChannel: row[6] as string,
    attempt: row[7] as number,
    dueAt: row[8] as Date | null,
    dispatchedAt: row[9] as Date | null,
    sentAt: row[10] as Date | null,
    skippedAt: row[11] as Date | null,
    deliveredAt: row[12] as Date | null,
    reason: row[13] as string | null,
    reroutes: row[14] as StepState['reroutes'],
    provider: row[15] as string | null,
  };
  return rememberLoaded(step, row);
}

/** Which recipients to read: these ids, or the recipients owning these steps. */
export type RecipientsWanted = { ids: string[] } | { ofSteps: string[] };

export interface ReadStatesOptions {
  /** `wait`: lock the recipients, waiting for other holders, in id order; `skip`: lock those no one holds (SKIP LOCKED); `none`: this transaction holds them already. */
  lock: 'wait' | 'skip' | 'none';
  /** Loads the review link's token too (dispatching: the message carries the link). */
  token?: boolean;
  /** Statements to run first in the same request (their results are returned as `before`). */
  before?: Statement[];
}

export interface StatesRead {
  states: Map<string, LoadedRecipient>;
  /** The database clock, read after the recipients were locked. */
  now: Date;
  before: QueryResult[];
}

/** Columns of a recipient as `readStates` returns them, in order (`token` last, when loaded). */
const RECIPIENT_FIELDS = ['id', 'cascade_id', 'organization_id', 'name', 'email', 'phone', 'status', 'finish_reason', 'rating', 'rated_at', 'feedback', 'finished_at', 'window_closes_at', 'contact_external_id', 'review_request_id'] as const;
const CASCADE_SELECT = `c.id, c.external_id, c.location_id, c.locale, c.templates, c.trace_context, c.response_window_minutes,
            coalesce(ls.name, '') AS location_name, coalesce(ls.address, '') AS location_address, coalesce(ls.city, '') AS location_city`;
/** Types of the columns of CASCADE_SELECT and STEP_SELECT, in order. */
const CASCADE_TYPES = ['uuid', 'text', 'text', 'text', 'jsonb', 'jsonb', 'int', 'text', 'text', 'text'];
const STEP_TYPES = ['uuid', 'uuid', 'int', 'text', 'int', 'text', 'text', 'int', 'timestamptz', 'timestamptz', 'timestamptz', 'timestamptz', 'timestamptz', 'text', 'jsonb', 'text'];

/**
 * Reads recipients with their steps and their cascades' shared data, and then the database clock: one
 * statement and the clock in one request (after `before`, in a coalesced transaction). The statement
 * locks the recipients as asked in a materialized CTE (in id order when it waits; SKIP LOCKED passes
 * over those another transaction holds) and returns, as rows of one shape told apart by their first
 * column, those recipients (0), their cascades (1) and their steps (2), each looked up once.
 */
export async function readStates(client: PoolClient, wanted: RecipientsWanted, options: ReadStatesOptions): Promise<StatesRead> {
  const before = options.before ?? [];
  const direct = 'ids' in wanted;
  const ids = [...new Set(direct ? wanted.ids : wanted.ofSteps)];
  const clock: Statement = { text: 'SELECT clock_timestamp() AS now' };
  if (ids.length === 0) {
    const results = await queryEach(client, [...before, clock]);
    return { states: new Map(), now: results[results.length - 1].rows[0].now as Date, before: results.slice(0, before.length) };
  }
  const source = options.token ? WITH_TOKEN : WITHOUT_TOKEN;
  const recipientWidth = RECIPIENT_FIELDS.length + (options.token ? 1 : 0);
  const filter = direct ? 'r.id = ANY($1::uuid[])' : 'r.id IN (SELECT recipient_id FROM recipient_steps WHERE id = ANY($1::uuid[]))';
  const locking = options.lock === 'wait' ? ' ORDER BY r.id FOR UPDATE OF r' : options.lock === 'skip' ? ' FOR UPDATE OF r SKIP LOCKED' : '';
  const cascadeAt = 1 + recipientWidth;
  const stepAt = cascadeAt + CASCADE_TYPES.length;
  const nulls = (n: number): string => Array.from({ length: n }, () => 'NULL').join(', ');
  // The first branch types every column (NULL casts for the cascade's and the step's); the others'
  // NULLs take those types (untyped NULLs alone would be resolved as text).
  const read: Statement = {
    text: `WITH wanted AS MATERIALIZED (SELECT ${source.columns} FROM ${source.from} WHERE ${filter}${locking})
     SELECT 0, wanted.*, ${[...CASCADE_TYPES, ...STEP_TYPES].map((type) => `NULL::${type}`).join(', ')} FROM wanted
     UNION ALL
     SELECT 1, ${nulls(recipientWidth)}, ${CASCADE_SELECT}, ${nulls(STEP_TYPES.length)}
       FROM cascades c LEFT JOIN location_snapshots ls ON ls.organization_id = c.organization_id AND ls.location_id = c.location_id
      WHERE c.id = ANY (ARRAY(SELECT DISTINCT cascade_id FROM wanted))
     UNION ALL
     SELECT 2, ${nulls(recipientWidth + CASCADE_TYPES.length)}, ${STEP_SELECT} FROM recipient_steps WHERE recipient_id = ANY (ARRAY(SELECT id FROM wanted))`,
    values: [sqlArray(ids, { bare: true })],
    // Rows as arrays: a thousand recipients' steps are parsed per batch, and keyed row objects cost more.
    rowMode: 'array',
    // One of a few texts (by the options): for one recipient, planning it cost three times running it.
    prepared: true,
  };
  const results = await queryEach(client, [...before, read, clock]);
  // Rows come in any order (no ORDER BY: sorting a thousand wide rows cost the server more than the
  // three statements this one replaced); steps are put in order per recipient below.
  const recipientRows: RecipientRow[] = [];
  const cascades = new Map<string, CascadeMeta>();
  const stepRows: unknown[][] = [];
  for (const row of results[before.length].rows as unknown as unknown[][]) {
    const part = row[0] as number;
    if (part === 0) {
      const recipient: Record<string, unknown> = {};
      for (let k = 0; k < RECIPIENT_FIELDS.length; k++) recipient[RECIPIENT_FIELDS[k]] = row[1 + k];
      if (options.token) recipient.token = row[1 + RECIPIENT_FIELDS.length];
      recipientRows.push(recipient as unknown as RecipientRow);
    } else if (part === 1) {
      const c = row.slice(cascadeAt, stepAt);
      cascades.set(c[0] as string, toCascadeMeta({
        id: c[0] as string, external_id: c[1] as string | null, location_id: c[2] as string, locale: c[3] as string, templates: c[4] as CascadeRow['templates'],
        trace_context: c[5] as Record<string, string>, response_window_minutes: c[6] as number, location_name: c[7] as string, location_address: c[8] as string, location_city: c[9] as string,
      }));
    } else stepRows.push(row.slice(stepAt));
  }
  const states = new Map<string, LoadedRecipient>();
  for (const row of recipientRows) {
    const cascade = cascades.get(row.cascade_id);
    // Recipients are never created without their cascade, nor outlive it.
    if (!cascade) throw new Error(`cascade ${row.cascade_id} of recipient ${row.id} not found`);
    states.set(row.id, toState(row, cascade));
  }
  // Steps of recipients the lock passed over (SKIP LOCKED) have no state: left out.
  for (const row of stepRows) states.get(row[1] as string)?.steps.push(toStep(row));
  for (const state of states.values()) if (state.steps.length > 1) state.steps.sort((a, b) => a.order - b.order);
  return { states, now: results[before.length + 1].rows[0].now as Date, before: results.slice(0, before.length) };
}

/**
 * Locks recipients (waiting for other holders, in id order), then loads them with their steps and reads
 * the clock. Two statements, so that what is read is what the last holder committed: a statement that
 * waited for a lock sees the rows it locked as they are now, but everything else it reads (the steps) as
 * they were when it began — a dispatcher that held the recipient meanwhile may have dispatched a step.
 * For the rare paths (a rating, a cancel, an unsubscribe); the results consumer reads in one statement.
 */
export async function lockAndReadStates(client: PoolClient, ids: string[]): Promise<{ states: Map<string, LoadedRecipient>; now: Date }> {
  if (ids.length === 0) return { states: new Map(), now: await dbNow(client) };
  await execute(client, { text: 'SELECT 1 FROM recipients WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE', values: [sqlArray(ids, { bare: true })] });
  const { states, now } = await readStates(client, { ids }, { lock: 'none' });
  return { states, now };
}

/** Locks recipients (waiting for other holders, in id order) and loads them with their steps (lockAndReadStates). */
export async function lockRecipients(client: PoolClient, ids: string[]): Promise<Map<string, LoadedRecipient>> {
  if (ids.length === 0) return new Map();
  return (await lockAndReadStates(client, ids)).states;
}

/** As lockRecipients, for the recipients owning these steps. */
export async function lockRecipientsOfSteps(client: PoolClient, stepIds: string[]): Promise<Map<string, LoadedRecipient>> {
  if (stepIds.length === 0) return new Map();
  return (await readStates(client, { ofSteps: stepIds }, { lock: 'wait' })).states;
}

/**
 * Loads recipients with their steps: ones this transaction already holds locked, or (`skipLocked`)
 * locking them now, passing over those another transaction holds; with their review link token for
 * dispatching (`token`).
 */
export async function loadRecipients(client: PoolClient, ids: string[], options: { skipLocked?: boolean; token?: boolean } = {}): Promise<Map<string, LoadedRecipient>> {
  if (ids.length === 0) return new Map();
  return (await readStates(client, { ids }, { lock: options.skipLocked ? 'skip' : 'none', token: options.token })).states;
}

const reroutesJson = (reroutes: StepState['reroutes']): string => (reroutes.length ? JSON.stringify(reroutes) : '[]');

/** What a transition may change on a step; `index` is the column's place in STEP_SELECT. */
const STEP_COLUMNS: ChangeColumn<StepState>[] = [
  { name: 'status', index: 5, type: 'text', get: (step) => step.status },
  { name: 'sent_channel', index: 6, type: 'text', get: (step) => step.sentChannel },
  { name: 'attempt', index: 7, type: 'int', get: (step) => step.attempt },
  timestampColumn('due_at', (step) => step.dueAt, 8),
  timestampColumn('dispatched_at', (step) => step.dispatchedAt, 9),
  timestampColumn('sent_at', (step) => step.sentAt, 10),
  timestampColumn('skipped_at', (step) => step.skippedAt, 11),
  timestampColumn('delivered_at', (step) => step.deliveredAt, 12),
  { name: 'reason', index: 13, type: 'text', get: (step) => step.reason },
  { name: 'reroutes', index: 14, type: 'jsonb', get: (step) => reroutesJson(step.reroutes), loaded: (value) => (typeof value === 'string' ? value : reroutesJson(value as StepState['reroutes'])) },
  { name: 'provider', index: 15, type: 'text', get: (step) => step.provider ?? null },
];

/** What a transition may change on a recipient. */
const RECIPIENT_COLUMNS_CHANGED: ChangeColumn<RecipientFields>[] = [
  { name: 'status', type: 'text', get: (recipient) => recipient.status },
  { name: 'finish_reason', type: 'text', get: (recipient) => recipient.finishReason },
  { name: 'rating', type: 'int', get: (recipient) => recipient.rating },
  timestampColumn('rated_at', (recipient) => recipient.ratedAt),
  { name: 'feedback', type: 'text', get: (recipient) => recipient.feedback },
  timestampColumn('finished_at', (recipient) => recipient.finishedAt),
  timestampColumn('window_closes_at', (recipient) => recipient.windowClosesAt),
];

/** Counts recipients finished now off their cascades' running counts; a cascade reaching 0 finishes. */
async function finishOnCascades(client: PoolClient, finishedByCascade: Map<string, number>, now: Date): Promise<void> {
  const ids = [...finishedByCascade.keys()].sort();
  await execute(client, { text: 'SELECT 1 FROM cascades WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE', values: [ids] });
  await execute(client, {
    text: `UPDATE cascades c SET active_recipients = c.active_recipients - u.finished,
            status = CASE WHEN c.active_recipients - u.finished <= 0 AND c.status = 'running' THEN 'finished' ELSE c.status END,
            finished_at = CASE WHEN c.active_recipients - u.finished <= 0 AND c.finished_at IS NULL THEN $3::timestamptz ELSE c.finished_at END
       FROM unnest($1::uuid[], $2::int[]) AS u(id, finished) WHERE c.id = u.id`,
    values: [ids, ids.map((id) => finishedByCascade.get(id)), now],
  });
}

/**
 * Writes back what transitions marked dirty: steps, recipients, the cascades' running counts, and a
 * `cascade.recipient.finished` outbox row for each recipient finished now. Notifies the dispatcher of
 * the earliest new due time and the relay of new outbox rows; both notifications fire on commit.
 */
export async function saveStates(client: PoolClient, states: Iterable<LoadedRecipient>, now: Date): Promise<void> {
  const steps: StepState[] = [];
  const recipients: RecipientFields[] = [];
  const finishedByCascade = new Map<string, number>();
  const events: OutboxEvent[] = [];
  const staleEvents: LoadedRecipient[] = [];
  // Requests whose overview figures a step may have changed (sent, delivered, rerouted): overviewRollup.ts.
  const overviewChanged = new Set<string>();
  let earliestDue: number | null = null;
  let earliestWindow: number | null = null;
  for (const state of states) {
    if (state.finishEventStale) {
      state.finishEventStale = false;
      staleEvents.push(state);
    }
    for (const step of state.steps) {
      if (!step.dirty) continue;
      steps.push(step);
      step.dirty = false;
      if (step.sentAt) overviewChanged.add(state.meta.reviewRequestId);
      if (step.status === 'scheduled' && step.dueAt && (earliestDue === null || step.dueAt.getTime() < earliestDue)) earliestDue = step.dueAt.getTime();
    }
    if (state.dirty) {
      recipients.push(state.recipient);
      const closes = state.recipient.status === 'waiting' ? state.recipient.windowClosesAt?.getTime() : undefined;
      if (closes !== undefined && (earliestWindow === null || closes < earliestWindow)) earliestWindow = closes;
    }
    state.dirty = false;
    if (state.finishedNow) {
      state.finishedNow = false;
      const cascadeId = state.recipient.cascadeId;
      finishedByCascade.set(cascadeId, (finishedByCascade.get(cascadeId) ?? 0) + 1);
      events.push({ ...finishEventOf(state, now), recipientId: state.recipient.id, availableAt: state.eventNotBefore ?? now, headers: state.meta.traceContext });
    }
  }
  if (steps.length) await updateChanged(client, 'recipient_steps', STEP_COLUMNS, steps);
  if (overviewChanged.size) await execute(client, markStaleStatement([...overviewChanged]));
  if (recipients.length) await updateChanged(client, 'recipients', RECIPIENT_COLUMNS_CHANGED, recipients);
  if (finishedByCascade.size) await finishOnCascades(client, finishedByCascade, now);
  if (events.length) await writeOutbox(client, eventSubject(EVENT_TYPES.cascadeRecipientFinished), events);
  // Rare (a result after the rating): one statement per recipient, keeping the event's release time.
  for (const state of staleEvents) await refreshFinishEvent(client, state, now, { release: false });
  if (earliestDue !== null) await execute(client, { text: 'SELECT pg_notify($1, $2)', values: [DUE_CHANNEL, String(earliestDue)] });
  if (earliestWindow !== null) await execute(client, { text: 'SELECT pg_notify($1, $2)', values: [WINDOW_CHANNEL, String(earliestWindow)] });
}
