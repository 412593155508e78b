import { eventsV1, eventSubject, EVENT_TYPES } from '@rrs/proto';
import type { PoolClient } from '@rrs/runtime';
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
  token: string;
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
  r.rating, r.rated_at, r.feedback, r.finished_at, r.contact_external_id, r.review_request_id,
  c.external_id AS cascade_external_id, c.location_id, c.locale, c.templates, c.trace_context, rr.token, coalesce(ls.name, '') AS location_name,
  coalesce(ls.address, '') AS location_address, coalesce(ls.city, '') AS location_city`;

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
  cascade_external_id: string | null;
  location_id: string;
  locale: string;
  templates: RecipientMeta['templates'];
  trace_context: Record<string, string>;
  token: string;
  location_name: string;
  location_address: string;
  location_city: string;
}

interface StepRow {
  id: string;
  recipient_id: string;
  step_order: number;
  channel: string;
  delay_minutes: number;
  status: StepState['status'];
  sent_channel: string;
  attempt: number;
  due_at: Date | null;
  dispatched_at: Date | null;
  sent_at: Date | null;
  skipped_at: Date | null;
  delivered_at: Date | null;
  reason: string | null;
  reroutes: StepState['reroutes'];
}

function toState(r: RecipientRow): LoadedRecipient {
  return {
    recipient: {
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
    },
    steps: [],
    meta: {
      cascadeExternalId: r.cascade_external_id,
      locationId: r.location_id,
      contactExternalId: r.contact_external_id,
      reviewRequestId: r.review_request_id,
      locale: r.locale,
      templates: r.templates,
      token: r.token,
      location: { id: r.location_id, name: r.location_name, address: r.location_address, city: r.location_city },
      traceContext: r.trace_context,
    },
  };
}

function toStep(s: StepRow): StepState {
  return {
    id: s.id,
    order: s.step_order,
    channel: s.channel,
    delayMinutes: s.delay_minutes,
    status: s.status,
    sentChannel: s.sent_channel,
    attempt: s.attempt,
    dueAt: s.due_at,
    dispatchedAt: s.dispatched_at,
    sentAt: s.sent_at,
    skippedAt: s.skipped_at,
    deliveredAt: s.delivered_at,
    reason: s.reason,
    reroutes: s.reroutes,
  };
}

/** The database clock: the one clock every replica reads. */
export async function dbNow(client: PoolClient): Promise<Date> {
  const { rows } = await client.query<{ now: Date }>('SELECT clock_timestamp() AS now');
  return rows[0].now;
}

async function attachSteps(client: PoolClient, states: Map<string, LoadedRecipient>): Promise<void> {
  if (states.size === 0) return;
  const { rows } = await client.query<StepRow>(
    `SELECT id, recipient_id, step_order, channel, delay_minutes, status, sent_channel, attempt, due_at, dispatched_at,
            sent_at, skipped_at, delivered_at, reason, reroutes
       FROM recipient_steps WHERE recipient_id = ANY($1::uuid[]) ORDER BY recipient_id, step_order`,
    [[...states.keys()]],
  );
  for (const row of rows) states.get(row.recipient_id)?.steps.push(toStep(row));
}

/** Locks recipients (waiting for other holders, in id order) and loads them with their steps. */
export async function lockRecipients(client: PoolClient, ids: string[]): Promise<Map<string, LoadedRecipient>> {
  const states = new Map<string, LoadedRecipient>();
  if (ids.length === 0) return states;
  const { rows } = await client.query<RecipientRow>(
    `SELECT ${RECIPIENT_COLUMNS}
       FROM recipients r JOIN cascades c ON c.id = r.cascade_id JOIN review_requests rr ON rr.id = r.review_request_id
       LEFT JOIN location_snapshots ls ON ls.organization_id = c.organization_id AND ls.location_id = c.location_id
      WHERE r.id = ANY($1::uuid[]) ORDER BY r.id FOR UPDATE OF r`,
    [[...new Set(ids)]],
  );
  for (const row of rows) states.set(row.id, toState(row));
  await attachSteps(client, states);
  return states;
}

/**
 * Claims up to `limit` due steps with their recipients, skipping rows another transaction holds, so
 * replicas share the work and none dispatches a step twice.
 */
export async function claimDue(client: PoolClient, now: Date, limit: number): Promise<{ states: Map<string, LoadedRecipient>; stepIds: string[] }> {
  const { rows: due } = await client.query<{ step_id: string; recipient_id: string }>(
    `SELECT s.id AS step_id, s.recipient_id
       FROM recipient_steps s JOIN recipients r ON r.id = s.recipient_id
      WHERE s.status = 'scheduled' AND s.due_at <= $1
      ORDER BY s.due_at LIMIT $2
      FOR UPDATE OF s, r SKIP LOCKED`,
    [now, limit],
  );
  if (due.length === 0) return { states: new Map(), stepIds: [] };
  const states = await loadClaimed(client, due.map((d) => d.recipient_id));
  return { states, stepIds: due.map((d) => d.step_id) };
}

/** Loads recipients this transaction already holds locked, with their steps. */
async function loadClaimed(client: PoolClient, recipientIds: string[]): Promise<Map<string, LoadedRecipient>> {
  const states = new Map<string, LoadedRecipient>();
  const { rows } = await client.query<RecipientRow>(
    `SELECT ${RECIPIENT_COLUMNS}
       FROM recipients r JOIN cascades c ON c.id = r.cascade_id JOIN review_requests rr ON rr.id = r.review_request_id
       LEFT JOIN location_snapshots ls ON ls.organization_id = c.organization_id AND ls.location_id = c.location_id
      WHERE r.id = ANY($1::uuid[])`,
    [[...new Set(recipientIds)]],
  );
  for (const row of rows) states.set(row.id, toState(row));
  await attachSteps(client, states);
  return states;
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
  if (steps.length) {
    await client.query(
      `UPDATE recipient_steps s SET status = u.status, sent_channel = u.sent_channel, attempt = u.attempt, due_at = u.due_at,
              dispatched_at = u.dispatched_at, sent_at = u.sent_at, skipped_at = u.skipped_at, delivered_at = u.delivered_at,
              reason = u.reason, reroutes = u.reroutes
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::timestamptz[], $7::timestamptz[],
                     $8::timestamptz[], $9::timestamptz[], $10::text[], $11::jsonb[])
              AS u(id, status, sent_channel, attempt, due_at, dispatched_at, sent_at, skipped_at, delivered_at, reason, reroutes)
        WHERE s.id = u.id`,
      [
        steps.map((s) => s.id),
        steps.map((s) => s.status),
        steps.map((s) => s.sentChannel),
        steps.map((s) => s.attempt),
        steps.map((s) => s.dueAt),
        steps.map((s) => s.dispatchedAt),
        steps.map((s) => s.sentAt),
        steps.map((s) => s.skippedAt),
        steps.map((s) => s.deliveredAt),
        steps.map((s) => s.reason),
        steps.map((s) => JSON.stringify(s.reroutes)),
      ],
    );
  }
  if (recipients.length) {
    const rs = recipients.map((x) => x.recipient);
    await client.query(
      `UPDATE recipients r SET status = u.status, finish_reason = u.finish_reason, rating = u.rating,
              rated_at = u.rated_at, feedback = u.feedback, finished_at = u.finished_at
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int[], $5::timestamptz[], $6::text[], $7::timestamptz[])
              AS u(id, status, finish_reason, rating, rated_at, feedback, finished_at)
        WHERE r.id = u.id`,
      [
        rs.map((r) => r.id),
        rs.map((r) => r.status),
        rs.map((r) => r.finishReason),
        rs.map((r) => r.rating),
        rs.map((r) => r.ratedAt),
        rs.map((r) => r.feedback),
        rs.map((r) => r.finishedAt),
      ],
    );
  }
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
