import { eventsV1 } from '@rrs/proto';
import type { Bus, Logger, Pool, Subscription } from '@rrs/runtime';

/** Stores each integrator event from `events.>` once, keyed by its id. */
export async function consumeEvents(bus: Bus, pool: Pool, logger: Logger): Promise<Subscription> {
  return bus.consume({ stream: 'EVENTS', durable: 'webhooks', filterSubject: 'events.>', concurrency: 16 }, async (msg) => {
    let event: eventsV1.Event;
    try {
      event = eventsV1.Event.decode(msg.data);
    } catch (err) {
      logger.error({ err, seq: msg.seq }, 'undecodable event, dropped');
      msg.term('undecodable');
      return;
    }
    await pool.query(
      `INSERT INTO events (id, type, organization_id, occurred_at, payload) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
      [event.id, event.type, event.organizationId, event.occurredAt ?? new Date(), JSON.stringify(eventsV1.Event.toJSON(event))],
    );
    msg.ack();
  });
}
