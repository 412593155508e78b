import { eventsV1, EVENT_TYPES } from '@rrs/proto';
import { execute, type PoolClient } from '@rrs/runtime';
import { finishEventOf } from './finishEvent';
import type { LoadedRecipient } from './loadedRecipient';
import { insertRows, StatementParams, type ColumnTypes } from './sql/statement';

/** Notified (with the earliest `available_at`, epoch ms) when outbox rows are written; the relay listens. */
export const OUTBOX_CHANNEL = 'rrs_scheduler_outbox';

export interface OutboxEvent {
  msgId: string;
  payload: Uint8Array;
  recipientId?: string;
  availableAt?: Date;
  /** Trace context to publish with (see RecipientMeta.traceContext). */
  headers?: Record<string, string>;
}

interface OutboxRow {
  msg_id: string;
  payload: Buffer;
  recipient_id: string | null;
  available_at: Date | null;
  headers: string;
}

const OUTBOX_COLUMNS: ColumnTypes<OutboxRow> = { msg_id: 'text', payload: 'bytea', recipient_id: 'uuid', available_at: 'timestamptz', headers: 'jsonb' };

/** Writes events to the outbox in the caller's transaction (with its next request, when coalesced); the relay is notified on commit. */
export async function writeOutbox(client: PoolClient, subject: string, events: OutboxEvent[]): Promise<void> {
  const params = new StatementParams();
  const rows = events.map((event): OutboxRow => ({
    msg_id: event.msgId,
    payload: Buffer.from(event.payload),
    recipient_id: event.recipientId ?? null,
    available_at: event.availableAt ?? null,
    headers: JSON.stringify(event.headers ?? {}),
  }));
  const earliest = Math.min(...events.map((event) => event.availableAt?.getTime() ?? 0));
  const insert = insertRows(params, 'outbox', OUTBOX_COLUMNS, rows, { subject: params.add(subject, 'text'), available_at: 'coalesce(u.available_at, clock_timestamp())' });
  await execute(client, { text: `WITH written AS (${insert}) SELECT pg_notify(${params.add(OUTBOX_CHANNEL, 'text')}, ${params.add(String(earliest), 'text')})`, values: params.values });
}

/**
 * Rewrites the latest not yet published event about a recipient (its finish, or its late rating) as
 * its state is now (with its feedback, or a step's late result), keeping the event's type and id;
 * `release` also lets it go at once. False when no such event is waiting.
 */
export async function refreshFinishEvent(client: PoolClient, state: LoadedRecipient, now: Date, options: { release: boolean }): Promise<boolean> {
  return rewriteWaitingEvent(client, state.recipient.id, options, (type) =>
    finishEventOf(state, now, type === EVENT_TYPES.cascadeRecipientRated ? EVENT_TYPES.cascadeRecipientRated : EVENT_TYPES.cascadeRecipientFinished).payload,
  );
}

/**
 * The one place an event still in the outbox is rewritten. `subjectId` is what the event is about: a
 * recipient, or a review request made without a cascade (the column is named for the first).
 */
export async function rewriteWaitingEvent(client: PoolClient, subjectId: string, options: { release: boolean }, render: (type: string) => Uint8Array): Promise<boolean> {
  const { rows } = await client.query<{ msg_id: string; payload: Buffer }>(
    'SELECT msg_id, payload FROM outbox WHERE recipient_id = $1 AND published_at IS NULL ORDER BY id DESC LIMIT 1 FOR UPDATE',
    [subjectId],
  );
  if (!rows[0]) return false;
  const waiting = eventsV1.Event.decode(rows[0].payload);
  // The event keeps its id and time: it is the same event, completed before anyone saw it.
  const event = eventsV1.Event.decode(render(waiting.type));
  event.id = rows[0].msg_id;
  event.occurredAt = waiting.occurredAt;
  const encoded = Buffer.from(eventsV1.Event.encode(event).finish());
  if (!options.release) {
    await client.query('UPDATE outbox SET payload = $2 WHERE msg_id = $1', [rows[0].msg_id, encoded]);
    return true;
  }
  await client.query('UPDATE outbox SET payload = $2, available_at = clock_timestamp() WHERE msg_id = $1', [rows[0].msg_id, encoded]);
  await client.query('SELECT pg_notify($1, $2)', [OUTBOX_CHANNEL, '0']);
  return true;
}
