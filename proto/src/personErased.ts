import { Event, PersonErased } from './gen/rrs/events/v1/events';

/*
 * A person's erasure reaching every service (docs/customer-respect.md, "Erasure in every service"). The
 * scheduler, completing an erasure, writes one PersonErased event per batch of the person's recipients
 * to its outbox (in the transaction that anonymizes them), relayed to `PERSON_ERASED_SUBJECT` on the
 * EVENTS stream. Each service that holds the person's rows reads it with a durable consumer of its own
 * (`personErasedDurable`) and deletes or anonymizes them by the ids it carries; a service not deployed
 * has no durable and reads nothing. The event carries ids only, never a name, address or external id.
 */

export const PERSON_ERASED_TYPE = 'lifecycle.person_erased';
export const PERSON_ERASED_SUBJECT = `events.${PERSON_ERASED_TYPE}`;

/** The durable consumer of a service's erasures (one per service: each reads every erasure). */
export function personErasedDurable(service: string): string {
  return `${service}-erasures`;
}

/** The erasure as a consumer sees it: the organization and the ids of what was erased. */
export interface ErasedPerson extends PersonErased {
  organizationId: string;
}

/** The envelope the outbox relays. `id` deduplicates it on the bus: one per erasure and batch. */
export function personErasedEvent(id: string, organizationId: string, erased: PersonErased, occurredAt: Date): Uint8Array {
  return Event.encode({ id, type: PERSON_ERASED_TYPE, organizationId, occurredAt, payload: { $case: 'personErased', personErased: erased } }).finish();
}

/** The bus as the consumer needs it (structural: the runtime's Bus is one). */
export interface PersonErasedBus {
  consume(
    options: { stream: 'EVENTS'; durable: string; filterSubject: string; concurrency?: number; maxDeliver?: number },
    handler: (msg: { data: Uint8Array; deliveryCount: number; ack(): void; nak(delayMs?: number): void; term(reason?: string): void }) => Promise<void>,
  ): Promise<{ drain(): Promise<void> }>;
}

/**
 * Reads the erasures with the service's durable and applies each with `erase`, which must be idempotent
 * (a redelivery, or the same ids in a later batch, erases nothing more). The message is acked after
 * `erase` resolves; a failure (its database down) is redelivered with a backoff up to a minute, for
 * about 16 hours, as the other EVENTS consumers do.
 */
export function consumePersonErasures(
  bus: PersonErasedBus,
  options: { service: string; logger: { error(obj: object, msg: string): void } },
  erase: (erased: ErasedPerson) => Promise<void>,
): Promise<{ drain(): Promise<void> }> {
  return bus.consume({ stream: 'EVENTS', durable: personErasedDurable(options.service), filterSubject: PERSON_ERASED_SUBJECT, concurrency: 2, maxDeliver: 1000 }, async (msg) => {
    let event: Event;
    try {
      event = Event.decode(msg.data);
    } catch (err) {
      options.logger.error({ err }, 'undecodable erasure event, dropped');
      msg.term('undecodable');
      return;
    }
    if (event.payload?.$case !== 'personErased' || !event.organizationId) {
      options.logger.error({ id: event.id, type: event.type }, 'erasure event without its payload or organization, dropped');
      msg.term('incomplete erasure event');
      return;
    }
    try {
      await erase({ ...event.payload.personErased, organizationId: event.organizationId });
    } catch (err) {
      const delay = Math.min(60_000, 1_000 * 2 ** Math.min(6, msg.deliveryCount - 1));
      options.logger.error({ err, eventId: event.id, delivery: msg.deliveryCount, retryInMs: delay }, 'could not erase a person; redelivering');
      msg.nak(delay);
      return;
    }
    msg.ack();
  });
}
