import { eventsV1 } from '@rrs/proto';
import type { PoolClient } from '@rrs/runtime';
import { finishEventOf } from './finishEvent';
import type { LoadedRecipient } from './recipientStore';
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

/** Writes events to the outbox in the caller's transaction; the relay is notified on commit. */
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
  await client.query(`WITH written AS (${insert}) SELECT pg_notify(${params.add(OUTBOX_CHANNEL, 'text')}, ${params.add(String(earliest), 'text')})`, params.values);
}

/** Rewrites a recipient's not yet published finish event (now with its feedback) and releases it at once. */
export async function releaseFinishEvent(client: PoolClient, state: LoadedRecipient, now: Date): Promise<void> {
  const { payload } = finishEventOf(state, now);
  const { rows } = await client.query<{ msg_id: string }>('SELECT msg_id FROM outbox WHERE recipient_id = $1 AND published_at IS NULL FOR UPDATE', [state.recipient.id]);
  if (!rows[0]) return;
  // The event keeps its id: it is the same event, completed before anyone saw it.
  const event = eventsV1.Event.decode(payload);
  event.id = rows[0].msg_id;
  await client.query('UPDATE outbox SET payload = $2, available_at = clock_timestamp() WHERE msg_id = $1', [rows[0].msg_id, Buffer.from(eventsV1.Event.encode(event).finish())]);
  await client.query('SELECT pg_notify($1, $2)', [OUTBOX_CHANNEL, '0']);
}
