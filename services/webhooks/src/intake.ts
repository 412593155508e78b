import { eventsV1 } from '@rrs/proto';
import { injectTraceContext, inTransaction, StatementBatcher, type Bus, type Logger, type Pool, type Subscription } from '@rrs/runtime';
import { createDeliveries, hasSubscribers, storeEvent, subscribedPairs } from './deliveries';
import { eventData, renderBody } from './payload';

/**
 * Turns each integrator event from `events.>` into deliveries, one per subscribed endpoint, in the same
 * transaction as the stored event. Deliveries are keyed by (event, endpoint), so a redelivered message
 * adds nothing; the message is acked only after the commit, so a crash in between redelivers it. An
 * event no endpoint subscribes to is not stored: it carries recipients' contact data, kept only to send.
 * Each delivery keeps the message's trace context, so its attempts join the trace the event came in.
 */
export async function consumeEvents(bus: Bus, pool: Pool, logger: Logger, onQueued: () => void): Promise<Subscription> {
  // Most events (a finish event per recipient) go to organizations without an endpoint for them: they
  // are answered by one statement for the events that arrive together, with no transaction. An event
  // that has subscribers is checked again inside its transaction, so an endpoint disabled in between
  // never gets it, and an event is stored only with its deliveries.
  const subscribed = new StatementBatcher(
    async (events: eventsV1.Event[]) => {
      const pairs = await subscribedPairs(pool, events);
      return events.map((event) => pairs.has(`${event.organizationId}|${event.type}`));
    },
    { key: (event) => event.id },
  );
  // A PostgreSQL outage must not lose events: redelivery backs off to a minute and goes on for about
  // 16 hours (1000 deliveries) before the bus gives up on a message.
  return bus.consume({ stream: 'EVENTS', durable: 'webhooks', filterSubject: 'events.>', concurrency: 16, maxDeliver: 1000 }, async (msg) => {
    let event: eventsV1.Event;
    try {
      event = eventsV1.Event.decode(msg.data);
    } catch (err) {
      logger.error({ err, seq: msg.seq }, 'undecodable event, dropped');
      msg.term('undecodable');
      return;
    }
    if (!event.id || !event.type || !event.organizationId) {
      logger.error({ seq: msg.seq, id: event.id, type: event.type }, 'event without id, type or organization, dropped');
      msg.term('incomplete envelope');
      return;
    }
    // An erasure is read by its own consumer (personErasure.ts), never delivered.
    if (event.payload?.$case === 'personErased') {
      msg.ack();
      return;
    }
    // The message's consumer span (a child of its publisher's `traceparent`): every attempt of these
    // deliveries, whenever a worker makes it, is traced under it.
    const traceContext = injectTraceContext({});
    let queued: string[];
    try {
      if (!(await subscribed.submit(event))) {
        msg.ack();
        return;
      }
      queued = await inTransaction(pool, async (client) => {
        if (!(await hasSubscribers(client, event))) return [];
        await storeEvent(client, {
          id: event.id,
          type: event.type,
          organizationId: event.organizationId,
          occurredAt: event.occurredAt ?? new Date(),
          payload: eventData(event),
          body: renderBody(event),
        });
        return createDeliveries(client, event, { traceContext });
      });
    } catch (err) {
      const delay = Math.min(60_000, 1_000 * 2 ** Math.min(6, msg.deliveryCount - 1));
      logger.error({ err, eventId: event.id, delivery: msg.deliveryCount, retryInMs: delay }, 'could not store event; redelivering');
      msg.nak(delay);
      return;
    }
    msg.ack();
    if (queued.length > 0) onQueued();
  });
}
