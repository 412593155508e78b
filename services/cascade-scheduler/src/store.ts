import { eventsV1, eventSubject, EVENT_TYPES } from '@rrs/proto';
import { sqlArray, type PoolClient } from '@rrs/runtime';
import { finishEventFor } from './events';
import type { RecipientState, StepState } from './engine';

/**
 * Loading and saving recipients with their steps. The recipient row lock is the one mutex of a
 * recipient's state: every transaction that changes a recipient or its steps locks the recipient row
 * first (several at once in id order), so steps need no locks of their own. The dispatcher takes its
 * locks with SKIP LOCKED and never waits; cascade rows are locked last, in id order.
 */

export const DUE_CHANNEL = 'rrs_scheduler_due';
export const OUTBOX_CHANNEL = 'rrs_scheduler_outbox';

export interface RecipientMeta {
  cascadeExternalId: string | null;
  locationId: string;
  contactExternalId: string;
  reviewRequestId: string;
  locale: string;
  templates: Record<string, { subject: string; body: string }>;
  /** The personal link's token: loaded for dispatching (the message carries the link), not otherwise. */
  token?: string;
  location: { id: string; name: string; address: string; city: string };
  /** The trace context the cascade was started in (empty when untraced): headers of its messages. */
  traceContext: Record<string, string>;
}

export type LoadedRecipient = RecipientState & {
  meta: RecipientMeta;
  /** Holds the finish event back until then (the low-rating feedback window). */
  eventNotBefore?: Date;
};

const RECIPIENT_COLUMNS = `r.id, r.cascade_id, r.organization_id, r.name, r.email, r.phone, r.status, r.finish_reason,
  r.rating, r.rated_at, r.feedback, r.finished_at, r.contact_external_id, r.review_request_id`;
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
  finish_reason: RecipientState['recipient']['finishReason'];
  rating: number | null;
  rated_at: Date | null;
  feedback: string | null;
  finished_at: Date | null;
  contact_external_id: string;
  review_request_id: string;
  token?: string;
}

/** What recipients of one cascade share: read once per cascade per batch, not once per recipient. */
type CascadeMeta = Pick<RecipientMeta, 'cascadeExternalId' | 'locationId' | 'locale' | 'templates' | 'location' | 'traceContext'>;

interface CascadeRow {
  id: string;
  external_id: string | null;
  location_id: string;
  locale: string;
  templates: RecipientMeta['templates'];
  trace_context: Record<string, string>;
  location_name: string;
  location_address: string;
  location_city: string;
}

function toState(r: RecipientRow, c: CascadeMeta): LoadedRecipient {
  const recipient: RecipientState['recipient'] = {
    id: r.id,
    cascadeId: r.cascade_id,
    organizationId: r.organization_id,
    name: r.name,
    email: r.email,
    phone: r.phone,
    status: r.status,
    finishReason: r.finish_reason,
    rating: r.rating,
    ratedAt: r.rated_at,
    feedback: r.feedback,
    finishedAt: r.finished_at,
  };
  (recipient as Loaded)[LOADED] = r as unknown as Record<string, unknown>;
  return {
    recipient,
    steps: [],
    meta: {
      cascadeExternalId: c.cascadeExternalId,
      locationId: c.locationId,
      locale: c.locale,
      templates: c.templates,
      location: c.location,
      traceContext: c.traceContext,
      contactExternalId: r.contact_external_id,
      reviewRequestId: r.review_request_id,
      token: r.token,
    },
  };
}

/** Builds the states of loaded recipient rows: their cascades' shared data, then their steps. */
async function toStates(client: PoolClient, rows: RecipientRow[]): Promise<Map<string, LoadedRecipient>> {
  const states = new Map<string, LoadedRecipient>();
  if (rows.length === 0) return states;
  const cascades = new Map<string, CascadeMeta>();
  const { rows: found } = await client.query<CascadeRow>(
    `SELECT c.id, c.external_id, c.location_id, c.locale, c.templates, c.trace_context, coalesce(ls.name, '') AS location_name,
            coalesce(ls.address, '') AS location_address, coalesce(ls.city, '') AS location_city
       FROM cascades c LEFT JOIN location_snapshots ls ON ls.organization_id = c.organization_id AND ls.location_id = c.location_id
      WHERE c.id = ANY($1::uuid[])`,
    [sqlArray([...new Set(rows.map((r) => r.cascade_id))], { bare: true })],
  );
  for (const c of found) {
    cascades.set(c.id, {
      cascadeExternalId: c.external_id,
      locationId: c.location_id,
      locale: c.locale,
      templates: c.templates,
      location: { id: c.location_id, name: c.location_name, address: c.location_address, city: c.location_city },
      traceContext: c.trace_context,
    });
  }
  for (const row of rows) {
    const cascade = cascades.get(row.cascade_id);
    // Recipients are never created without their cascade, nor outlive it.
    if (!cascade) throw new Error(`cascade ${row.cascade_id} of recipient ${row.id} not found`);
    states.set(row.id, toState(row, cascade));
  }
  await attachSteps(client, states);
  return states;
}

/**
 * A step's columns as loaded, so that saving writes only the columns some transition changed: most
 * batches change three or four of them, and every array parameter is serialized, sent and parsed.
 */
const LOADED = Symbol('loaded');
type Loaded = { [LOADED]?: Record<string, unknown> | unknown[] };

/** A step from a row of STEP_SELECT (array mode); the row stays with it as loaded. */
function toStep(row: unknown[]): StepState {
  const step: StepState & Loaded = {
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
  };
  step[LOADED] = row;
  return step;
}

/** The database clock: the one clock every replica reads. */
export async function dbNow(client: PoolClient): Promise<Date> {
  const { rows } = await client.query<{ now: Date }>('SELECT clock_timestamp() AS now');
  return rows[0].now;
}

const STEP_SELECT = `id, recipient_id, step_order, channel, delay_minutes, status, sent_channel, attempt, due_at, dispatched_at,
            sent_at, skipped_at, delivered_at, reason, reroutes`;

async function attachSteps(client: PoolClient, states: Map<string, LoadedRecipient>): Promise<void> {
  if (states.size === 0) return;
  // Rows as arrays: a thousand recipients' steps are parsed per batch, and keyed row objects cost more.
  const { rows } = await client.query<unknown[]>({
    text: `SELECT ${STEP_SELECT} FROM recipient_steps WHERE recipient_id = ANY($1::uuid[]) ORDER BY recipient_id, step_order`,
    values: [sqlArray([...states.keys()], { bare: true })],
    rowMode: 'array',
  });
  let state: LoadedRecipient | undefined;
  for (const row of rows) {
    const recipientId = row[1] as string;
    if (state?.recipient.id !== recipientId) state = states.get(recipientId);
    state?.steps.push(toStep(row));
  }
}

/** Locks recipients (waiting for other holders, in id order) and loads them with their steps. */
export async function lockRecipients(client: PoolClient, ids: string[]): Promise<Map<string, LoadedRecipient>> {
  if (ids.length === 0) return new Map();
  return lockWhere(client, 'r.id = ANY($1::uuid[])', [...new Set(ids)]);
}

/** As lockRecipients, for the recipients owning these steps. */
export async function lockRecipientsOfSteps(client: PoolClient, stepIds: string[]): Promise<Map<string, LoadedRecipient>> {
  if (stepIds.length === 0) return new Map();
  return lockWhere(client, 'r.id IN (SELECT recipient_id FROM recipient_steps WHERE id = ANY($1::uuid[]))', stepIds);
}

async function lockWhere(client: PoolClient, where: string, ids: string[]): Promise<Map<string, LoadedRecipient>> {
  const { rows } = await client.query<RecipientRow>(`SELECT ${WITHOUT_TOKEN.columns} FROM ${WITHOUT_TOKEN.from} WHERE ${where} ORDER BY r.id FOR UPDATE OF r`, [sqlArray(ids, { bare: true })]);
  return toStates(client, rows);
}

/**
 * Claims up to `limit` due steps with their recipients, skipping rows another transaction holds, so
 * replicas share the work and none dispatches a step twice. Steps are taken in due order straight off
 * the due index (locking each as it is read, so a second claimer reads past them), then their
 * recipients are locked, skipping any held elsewhere (a result being applied, a rating): those steps
 * wait for the next round. Nothing here ever waits for a lock, so claims never deadlock with the
 * transactions that lock a recipient first and then its steps.
 */
export async function claimDue(client: PoolClient, now: Date, limit: number): Promise<{ states: Map<string, LoadedRecipient>; claimed: Array<{ step_id: string; recipient_id: string }> }> {
  const { rows: due } = await client.query<{ step_id: string; recipient_id: string }>(
    `SELECT id AS step_id, recipient_id FROM recipient_steps
      WHERE status = 'scheduled' AND due_at <= $1
      ORDER BY due_at LIMIT $2
      FOR UPDATE SKIP LOCKED`,
    [now, limit],
  );
  if (due.length === 0) return { states: new Map(), claimed: [] };
  const states = await loadClaimed(client, due.map((d) => d.recipient_id), { lock: true, token: true });
  return { states, claimed: due.filter((d) => states.has(d.recipient_id)) };
}

/**
 * Loads recipients with their steps: ones this transaction already holds locked, or (`lock`) locking
 * them now, skipping those another transaction holds; with their review link token for dispatching.
 */
async function loadClaimed(client: PoolClient, recipientIds: string[], o: { lock?: boolean; token?: boolean } = {}): Promise<Map<string, LoadedRecipient>> {
  const q = o.token ? WITH_TOKEN : WITHOUT_TOKEN;
  const { rows } = await client.query<RecipientRow>(
    `SELECT ${q.columns} FROM ${q.from} WHERE r.id = ANY($1::uuid[])${o.lock ? ' FOR UPDATE OF r SKIP LOCKED' : ''}`,
    [sqlArray([...new Set(recipientIds)], { bare: true })],
  );
  return toStates(client, rows);
}

/**
 * Claims up to `limit` steps dispatched at or before `before` that still have no result, with their
 * recipients (SKIP LOCKED like the dispatcher), counting one more result timeout on each.
 */
export async function claimTimedOut(
  client: PoolClient,
  before: Date,
  limit: number,
): Promise<{ states: Map<string, LoadedRecipient>; steps: Array<{ stepId: string; timeouts: number }> }> {
  const { rows: due } = await client.query<{ step_id: string; recipient_id: string }>(
    `SELECT s.id AS step_id, s.recipient_id
       FROM recipient_steps s JOIN recipients r ON r.id = s.recipient_id
      WHERE s.status = 'dispatched' AND s.dispatched_at <= $1
      ORDER BY s.dispatched_at LIMIT $2
      FOR UPDATE OF s, r SKIP LOCKED`,
    [before, limit],
  );
  if (due.length === 0) return { states: new Map(), steps: [] };
  const { rows: counted } = await client.query<{ id: string; result_timeouts: number }>(
    'UPDATE recipient_steps SET result_timeouts = result_timeouts + 1 WHERE id = ANY($1::uuid[]) RETURNING id, result_timeouts',
    [due.map((d) => d.step_id)],
  );
  const states = await loadClaimed(client, due.map((d) => d.recipient_id));
  return { states, steps: counted.map((c) => ({ stepId: c.id, timeouts: c.result_timeouts })) };
}

function finishEvent(state: LoadedRecipient, now: Date): { msgId: string; payload: Uint8Array } {
  const r = state.recipient;
  return finishEventFor({
    organizationId: r.organizationId,
    cascadeId: r.cascadeId,
    cascadeExternalId: state.meta.cascadeExternalId,
    locationId: state.meta.locationId,
    reviewRequestId: state.meta.reviewRequestId,
    recipient: { id: r.id, name: r.name, email: r.email, phone: r.phone, contactExternalId: state.meta.contactExternalId },
    rating: r.rating,
    feedback: r.feedback,
    reason: r.finishReason ?? '',
    steps: state.steps.map((s) => ({
      order: s.order,
      channel: s.channel,
      status: s.status,
      reason: s.reason ?? '',
      sentAt: s.sentAt,
      reroutedTo: s.reroutes.length ? s.reroutes[s.reroutes.length - 1].to : '',
    })),
    finishedAt: r.finishedAt ?? now,
  });
}

/**
 * Writes back what transitions marked dirty: steps, recipients, the cascades' running counts, and a
 * `cascade.recipient.finished` outbox row for each recipient finished now. Notifies the dispatcher of
 * the earliest new due time and the relay of new outbox rows; both notifications fire on commit.
 */
export async function saveStates(client: PoolClient, states: Iterable<LoadedRecipient>, now: Date): Promise<void> {
  const steps: StepState[] = [];
  const recipients: LoadedRecipient[] = [];
  const finishedByCascade = new Map<string, number>();
  const events: OutboxEvent[] = [];
  let earliestDue: number | null = null;
  for (const state of states) {
    for (const s of state.steps) {
      if (!s.dirty) continue;
      steps.push(s);
      s.dirty = false;
      if (s.status === 'scheduled' && s.dueAt && (earliestDue === null || s.dueAt.getTime() < earliestDue)) earliestDue = s.dueAt.getTime();
    }
    if (state.dirty) recipients.push(state);
    state.dirty = false;
    if (state.finishedNow) {
      state.finishedNow = false;
      finishedByCascade.set(state.recipient.cascadeId, (finishedByCascade.get(state.recipient.cascadeId) ?? 0) + 1);
      events.push({ ...finishEvent(state, now), recipientId: state.recipient.id, availableAt: state.eventNotBefore ?? now, headers: state.meta.traceContext });
    }
  }
  if (steps.length) await updateChanged(client, 'recipient_steps', STEP_COLUMNS, steps);
  if (recipients.length) await updateChanged(client, 'recipients', RECIPIENT_UPDATE_COLUMNS, recipients.map((x) => x.recipient));
  if (finishedByCascade.size) {
    const ids = [...finishedByCascade.keys()].sort();
    await client.query('SELECT 1 FROM cascades WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE', [ids]);
    await client.query(
      `UPDATE cascades c SET active_recipients = c.active_recipients - u.n,
              status = CASE WHEN c.active_recipients - u.n <= 0 AND c.status = 'running' THEN 'finished' ELSE c.status END,
              finished_at = CASE WHEN c.active_recipients - u.n <= 0 AND c.finished_at IS NULL THEN $3::timestamptz ELSE c.finished_at END
         FROM unnest($1::uuid[], $2::int[]) AS u(id, n) WHERE c.id = u.id`,
      [ids, ids.map((id) => finishedByCascade.get(id)), now],
    );
  }
  if (events.length) await writeOutbox(client, eventSubject(EVENT_TYPES.cascadeRecipientFinished), events);
  if (earliestDue !== null) await client.query('SELECT pg_notify($1, $2)', [DUE_CHANNEL, String(earliestDue)]);
}

interface Column<T> {
  /** The column, and the field of the loaded row holding its value. */
  name: string;
  /** Its position in a loaded row of array mode (STEP_SELECT). */
  index?: number;
  /** Array type of the parameter; timestamps travel as epoch milliseconds. */
  type: 'uuid' | 'text' | 'int' | 'float8' | 'jsonb';
  get(row: T): string | number | Date | null;
  /** SQL of the new value from `u.<name>`. */
  value?: string;
  /** The loaded value in the form `get` returns (default: the field as loaded). */
  loaded?(value: unknown): string | number | Date | null;
}

const timestamp = <T>(name: string, get: (row: T) => Date | null, index?: number): Column<T> => ({ name, index, type: 'float8', get, value: `to_timestamp(u.${name} / 1000)` });

const reroutesJson = (reroutes: StepState['reroutes']): string => (reroutes.length ? JSON.stringify(reroutes) : '[]');

const STEP_COLUMNS: Column<StepState>[] = [
  { name: 'status', index: 5, type: 'text', get: (s) => s.status },
  { name: 'sent_channel', index: 6, type: 'text', get: (s) => s.sentChannel },
  { name: 'attempt', index: 7, type: 'int', get: (s) => s.attempt },
  timestamp('due_at', (s) => s.dueAt, 8),
  timestamp('dispatched_at', (s) => s.dispatchedAt, 9),
  timestamp('sent_at', (s) => s.sentAt, 10),
  timestamp('skipped_at', (s) => s.skippedAt, 11),
  timestamp('delivered_at', (s) => s.deliveredAt, 12),
  { name: 'reason', index: 13, type: 'text', get: (s) => s.reason },
  { name: 'reroutes', index: 14, type: 'jsonb', get: (s) => reroutesJson(s.reroutes), loaded: (v) => (typeof v === 'string' ? v : reroutesJson(v as StepState['reroutes'])) },
];

const RECIPIENT_UPDATE_COLUMNS: Column<RecipientState['recipient']>[] = [
  { name: 'status', type: 'text', get: (r) => r.status },
  { name: 'finish_reason', type: 'text', get: (r) => r.finishReason },
  { name: 'rating', type: 'int', get: (r) => r.rating },
  timestamp('rated_at', (r) => r.ratedAt),
  { name: 'feedback', type: 'text', get: (r) => r.feedback },
  timestamp('finished_at', (r) => r.finishedAt),
];

function same(a: string | number | Date | null, b: string | number | Date | null): boolean {
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  return a === b;
}

/**
 * One UPDATE of the rows by id, setting only the columns in which some row differs from its row as
 * loaded (kept on the object; a row never loaded counts as changed in every column): most batches
 * change three or four columns, and every array parameter is built, sent and parsed.
 */
async function updateChanged<T extends { id: string }>(client: PoolClient, table: string, columns: Column<T>[], rows: T[]): Promise<void> {
  const changed = columns.filter((c) =>
    rows.some((row) => {
      const before = (row as Loaded)[LOADED];
      if (!before) return true;
      const value = (Array.isArray(before) ? before[c.index ?? -1] : before[c.name]) ?? null;
      return !same(c.get(row), c.loaded ? c.loaded(value) : (value as string | number | Date | null));
    }),
  );
  if (changed.length === 0) return;
  const params = [sqlArray(rows.map((r) => r.id), { bare: true }), ...changed.map((c) => sqlArray(rows.map(c.get)))];
  await client.query(
    `UPDATE ${table} t SET ${changed.map((c) => `${c.name} = ${c.value ?? `u.${c.name}`}`).join(', ')}
       FROM unnest($1::uuid[], ${changed.map((c, i) => `$${i + 2}::${c.type}[]`).join(', ')}) AS u(id, ${changed.map((c) => c.name).join(', ')})
      WHERE t.id = u.id`,
    params,
  );
  // The loaded row no longer says what is stored: a second save in the same transaction (rare) writes
  // every column of these rows.
  for (const row of rows) (row as Loaded)[LOADED] = undefined;
}

export interface OutboxEvent {
  msgId: string;
  payload: Uint8Array;
  recipientId?: string;
  availableAt?: Date;
  /** Trace context to publish with (see RecipientMeta.traceContext). */
  headers?: Record<string, string>;
}

export async function writeOutbox(client: PoolClient, subject: string, events: OutboxEvent[]): Promise<void> {
  await client.query(
    `INSERT INTO outbox (msg_id, subject, payload, recipient_id, available_at, headers)
     SELECT m, $1, p, r, coalesce(a, clock_timestamp()), h FROM unnest($2::text[], $3::bytea[], $4::uuid[], $5::timestamptz[], $6::jsonb[]) AS u(m, p, r, a, h)`,
    [
      subject, events.map((e) => e.msgId), events.map((e) => Buffer.from(e.payload)), events.map((e) => e.recipientId ?? null),
      events.map((e) => e.availableAt ?? null), events.map((e) => JSON.stringify(e.headers ?? {})),
    ],
  );
  const earliest = Math.min(...events.map((e) => e.availableAt?.getTime() ?? 0));
  await client.query('SELECT pg_notify($1, $2)', [OUTBOX_CHANNEL, String(earliest)]);
}

/** Rewrites a recipient's not yet published finish event (now with its feedback) and releases it at once. */
export async function releaseFinishEvent(client: PoolClient, state: LoadedRecipient, now: Date): Promise<void> {
  const { msgId: _fresh, payload } = finishEvent(state, now);
  const { rows } = await client.query<{ msg_id: string }>(
    'SELECT msg_id FROM outbox WHERE recipient_id = $1 AND published_at IS NULL FOR UPDATE',
    [state.recipient.id],
  );
  if (!rows[0]) return;
  // The event keeps its id: it is the same event, completed before anyone saw it.
  const decoded = eventsV1.Event.decode(payload);
  decoded.id = rows[0].msg_id;
  await client.query('UPDATE outbox SET payload = $2, available_at = clock_timestamp() WHERE msg_id = $1', [rows[0].msg_id, Buffer.from(eventsV1.Event.encode(decoded).finish())]);
  await client.query('SELECT pg_notify($1, $2)', [OUTBOX_CHANNEL, '0']);
}
