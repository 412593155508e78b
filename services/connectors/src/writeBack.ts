import { eventsV1, EVENT_TYPES } from '@rrs/proto';
import { counter, inTransaction, startDueWorkLoop, type Bus, type DueWorkLoop, type Logger, type Notifier, type Pool, type Subscription } from '@rrs/runtime';
import type { ConnectorPolicy } from './config';
import { WRITE_BACK_CHANNEL, type Connectors } from './connectors';
import type { CrmClients } from './crm';
import type { ReviewServices } from './reviewServices';
import { backoffMs, judgeFailure } from './inbox';
import { noteText, eventMarker } from './noteText';

/*
 * Write-back: the integrator events of a recipient's outcome (`cascade.recipient.finished`, and
 * `cascade.recipient.rated` for a rating after the finish) of a cascade a connector started are logged
 * by event id, then written to the deal by a worker: a note and the configured custom fields. Each part
 * is marked done once the CRM accepted it; a retry after a crash between the CRM's answer and that mark
 * first looks for the event's marker among the deal's notes, so no event writes its note twice.
 */

/** Event types written back; both carry the CascadeRecipientFinished payload. */
export const WRITE_BACK_EVENT_TYPES: readonly string[] = [EVENT_TYPES.cascadeRecipientFinished, EVENT_TYPES.cascadeRecipientRated];

const written = counter({ name: 'connector_write_backs_total', help: 'Write-backs to CRM deals, by outcome.', labelNames: ['outcome'] });

/** The recipient outcome an event carries: both written-back event types use the `cascade_recipient_finished` payload. */
export function recipientOutcomeOf(event: eventsV1.Event): eventsV1.CascadeRecipientFinished | null {
  return event.payload?.$case === 'cascadeRecipientFinished' ? event.payload.cascadeRecipientFinished : null;
}

export interface WriteBackOptions {
  pool: Pool;
  connectors: Connectors;
  crm: CrmClients;
  reviewServices: ReviewServices;
  policy: ConnectorPolicy;
  logger: Logger;
  notifier?: Notifier;
}

/**
 * Logs the outcome events of connector cascades, from the durable consumer `connectors` on
 * `events.cascade.recipient.*`. An event of a cascade no connector started is acked and forgotten; a
 * redelivered event adds nothing (the log is keyed by event id). Acked after the commit only.
 */
export async function consumeOutcomeEvents(bus: Bus, o: Pick<WriteBackOptions, 'pool' | 'logger'>, onQueued: () => void): Promise<Subscription> {
  return bus.consume({ stream: 'EVENTS', durable: 'connectors', filterSubject: 'events.cascade.recipient.*', concurrency: 8, maxDeliver: 1000 }, async (msg) => {
    let event: eventsV1.Event;
    try {
      event = eventsV1.Event.decode(msg.data);
    } catch (err) {
      o.logger.error({ err, seq: msg.seq }, 'undecodable event, dropped');
      msg.term('undecodable');
      return;
    }
    const outcome = WRITE_BACK_EVENT_TYPES.includes(event.type) ? recipientOutcomeOf(event) : null;
    if (!event.id || !outcome) {
      msg.ack();
      return;
    }
    let queued: boolean;
    try {
      queued = await inTransaction(o.pool, async (client) => {
        // A connector cascade has one recipient: its finish is the cascade's, and the deal is no longer watched for a loss.
        if (event.type === EVENT_TYPES.cascadeRecipientFinished) {
          await client.query('UPDATE deal_cascades SET finished_at = coalesce(finished_at, $3) WHERE cascade_id = $1 AND organization_id = $2', [outcome.cascadeId, event.organizationId, event.occurredAt ?? new Date()]);
        }
        const { rowCount } = await client.query(
          `INSERT INTO write_backs (event_id, connector_id, deal_id, event_type, cascade_id, rating, feedback, reason, occurred_at, stop_reason)
           SELECT $1, d.connector_id, d.deal_id, $2, d.cascade_id, $3, $4, $5, $6, CASE WHEN $5 = 'canceled' THEN d.stop_reason END FROM deal_cascades d
           WHERE d.cascade_id = $7 AND d.organization_id = $8
           ON CONFLICT (event_id) DO NOTHING`,
          [event.id, event.type, outcome.rating > 0 ? outcome.rating : null, outcome.feedback, outcome.reason, event.occurredAt ?? new Date(), outcome.cascadeId, event.organizationId],
        );
        if (rowCount) await client.query(`SELECT pg_notify('${WRITE_BACK_CHANNEL}', '')`);
        return (rowCount ?? 0) > 0;
      });
    } catch (err) {
      const delay = Math.min(60_000, 1_000 * 2 ** Math.min(6, msg.deliveryCount - 1));
      o.logger.error({ err, eventId: event.id, retryInMs: delay }, 'could not log the write-back; redelivering');
      msg.nak(delay);
      return;
    }
    msg.ack();
    if (queued) onQueued();
  });
}

interface WriteBackRow {
  event_id: string;
  connector_id: string;
  deal_id: string;
  event_type: string;
  rating: number | null;
  feedback: string;
  reason: string;
  note_done: boolean;
  fields_done: boolean;
  attempts: number;
  occurred_at: Date;
  stop_reason: string | null;
}

export function startWriteBackWorker(o: WriteBackOptions): DueWorkLoop {
  const { pool, policy } = o;

  async function writeOne(row: WriteBackRow): Promise<void> {
    const connector = await o.connectors.load(row.connector_id);
    if (!connector) return;
    const { writeBack } = connector.settings;
    try {
      const crm = o.crm.for(connector);
      if (writeBack.note && !row.note_done) {
        const marker = eventMarker(row.event_id);
        // Only a retry can follow a note the CRM took but this log did not record.
        const already = row.attempts > 1 && (await crm.hasNote(row.deal_id, marker));
        if (!already) {
          const locale = await o.reviewServices.organizationLocale(connector.organizationId);
          await crm.addNote(row.deal_id, noteText(locale, { rating: row.rating, feedback: row.feedback, reason: row.reason, stopReason: row.stop_reason, eventType: row.event_type, eventId: row.event_id }));
        }
        await pool.query('UPDATE write_backs SET note_done = true WHERE event_id = $1', [row.event_id]);
      }
      const values: Record<string, string | number> = {};
      if (writeBack.ratingField && row.rating !== null) values[writeBack.ratingField] = row.rating;
      if (writeBack.feedbackField && row.feedback !== '') values[writeBack.feedbackField] = row.feedback;
      if (writeBack.reasonField && row.reason !== '') values[writeBack.reasonField] = row.reason;
      if (!row.fields_done && Object.keys(values).length > 0) await crm.setDealFields(row.deal_id, values);
      await pool.query(`UPDATE write_backs SET fields_done = true, status = 'done', done_at = now(), last_error = NULL WHERE event_id = $1`, [row.event_id]);
      await o.connectors.recordSuccess(connector.id);
      written.inc({ outcome: 'done' });
    } catch (err) {
      const failure = judgeFailure(err);
      await o.connectors.recordError(connector.id, failure.code, `write-back: ${failure.message}`);
      if (!failure.retry || row.attempts >= policy.maxAttempts) {
        o.logger.warn({ err, connectorId: connector.id, eventId: row.event_id, attempts: row.attempts }, 'write-back given up');
        await pool.query(`UPDATE write_backs SET status = 'failed', last_error = $2, done_at = now() WHERE event_id = $1`, [row.event_id, `${failure.code}: ${failure.message}`.slice(0, 1000)]);
        written.inc({ outcome: 'failed' });
        return;
      }
      await pool.query(`UPDATE write_backs SET next_attempt_at = now() + make_interval(secs => $2 / 1000.0), last_error = $3 WHERE event_id = $1`, [
        row.event_id,
        backoffMs(policy, row.attempts, failure.retryAfterMs),
        `${failure.code}: ${failure.message}`.slice(0, 1000),
      ]);
      written.inc({ outcome: 'retry' });
    }
  }

  return startDueWorkLoop({
    name: 'connector write-back',
    logger: o.logger,
    notifier: o.notifier,
    channels: [WRITE_BACK_CHANNEL],
    async round() {
      const batch = policy.concurrency;
      const { rows } = await pool.query<WriteBackRow>(
        `UPDATE write_backs SET attempts = attempts + 1, next_attempt_at = now() + make_interval(secs => $2 / 1000.0)
         WHERE event_id IN (SELECT event_id FROM write_backs WHERE status = 'pending' AND next_attempt_at <= now() ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED)
         RETURNING event_id, connector_id, deal_id, event_type, rating, feedback, reason, note_done, fields_done, attempts, occurred_at, stop_reason`,
        [batch, policy.leaseMs],
      );
      // One deal's write-backs go in order (a finish, then a late rating), so they are not run side by side.
      const byDeal = new Map<string, WriteBackRow[]>();
      for (const r of rows) byDeal.set(`${r.connector_id}\u0000${r.deal_id}`, [...(byDeal.get(`${r.connector_id}\u0000${r.deal_id}`) ?? []), r]);
      await Promise.all(
        [...byDeal.values()].map(async (list) => {
          for (const r of list.sort((a, b) => a.occurred_at.getTime() - b.occurred_at.getTime())) await writeOne(r);
        }),
      );
      return rows.length === batch;
    },
    async nextDueInMs() {
      const { rows } = await pool.query<{ ms: number | null }>(`SELECT (EXTRACT(EPOCH FROM min(next_attempt_at) - now()) * 1000)::float8 AS ms FROM write_backs WHERE status = 'pending'`);
      return rows[0].ms;
    },
  });
}
