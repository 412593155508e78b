import { RATING_SUBMITTED_SUBJECT, RATINGS_DURABLE, ratingsBusV1 } from '@rrs/proto';
import { collapseRepeats, counter, DomainError, isDatabaseUnavailable, type Bus, type BusMessage, type Logger, type Subscription } from '@rrs/runtime';

/*
 * The ratings intake: ratings the review form accepted while the scheduler could not record them (the
 * scheduler down, or its database) wait on the RATINGS stream, and are recorded here once they can be.
 * A message is acked only after its rating is committed; recording is idempotent (the first rating of a
 * link stands), so a redelivery after a crash between commit and ack changes nothing.
 */

/** Redelivery while a rating cannot be recorded: 0.5 s doubling to 10 s, so it is applied soon after the database is back. */
export const RATING_BACKOFF = { baseMs: 500, maxMs: 10_000 };
/**
 * Deliveries of one rating before it is given up: with RATING_BACKOFF, about 27 hours of a database
 * outage. A rating is the customer's only answer; it must outlive any outage we plan for.
 */
export const RATING_MAX_DELIVER = 10_000;
/**
 * A failure that is not an outage (the database answers, yet recording fails) is given up after this
 * many deliveries, so that one broken message cannot hold dispatching (see `ratingsFirst`) for a day.
 */
export const RATING_MAX_FAULTS = 20;
/** How often a held dispatcher looks again whether the ratings are applied. */
const GATE_POLL_MS = 100;

const intakeOutcomes = counter({
  name: 'scheduler_ratings_intake_total',
  help: 'Ratings taken from the RATINGS stream, by outcome: applied, duplicate (the link was already rated), retry, refused (no such link, invalid), dropped.',
  labelNames: ['outcome'],
});
const heldRounds = counter({ name: 'scheduler_dispatch_held_for_ratings_total', help: 'Dispatch rounds held because ratings waited on the RATINGS stream.' });

export function ratingRedeliveryDelayMs(deliveryCount: number): number {
  return Math.min(RATING_BACKOFF.maxMs, RATING_BACKOFF.baseMs * 2 ** Math.min(Math.max(0, deliveryCount - 1), 30));
}

/** Records a rating; resolves `recorded: false` when the link was already rated (the first rating stands). */
export type RecordRating = (token: string, rating: number) => Promise<{ recorded: boolean }>;

export interface RatingIntake {
  /**
   * The dispatcher's ratings-first gate: resolves once the RATINGS stream has no rating left to apply
   * (waiting, or in flight anywhere), so that no reminder goes out to a customer whose rating was
   * accepted. Throws when the bus cannot say (NATS down: the dispatcher could not publish either).
   */
  ratingsFirst(): Promise<void>;
  drain(): Promise<void>;
}

export async function startRatingIntake(options: { bus: Bus; record: RecordRating; logger: Logger; maxDeliver?: number; concurrency?: number }): Promise<RatingIntake> {
  const { bus, logger } = options;
  const maxDeliver = options.maxDeliver ?? RATING_MAX_DELIVER;
  const failures = collapseRepeats(logger);
  let stopped = false;

  const handle = async (msg: BusMessage): Promise<void> => {
    let submitted: ratingsBusV1.RatingSubmitted;
    try {
      submitted = ratingsBusV1.RatingSubmitted.decode(msg.data);
    } catch (err) {
      logger.error({ err, seq: msg.seq }, 'undecodable rating, dropped');
      intakeOutcomes.inc({ outcome: 'dropped' });
      msg.term('undecodable');
      return;
    }
    try {
      const { recorded } = await options.record(submitted.token, submitted.rating);
      intakeOutcomes.inc({ outcome: recorded ? 'applied' : 'duplicate' });
      msg.ack();
    } catch (err) {
      // Nothing to apply: the link does not exist, or the rating is out of range (the form checks it first).
      if (err instanceof DomainError && (err.kind === 'not_found' || err.kind === 'invalid')) {
        logger.warn({ err, seq: msg.seq, code: err.code }, 'rating refused, dropped');
        intakeOutcomes.inc({ outcome: 'refused' });
        msg.term(err.code);
        return;
      }
      const outage = isDatabaseUnavailable(err) || (err instanceof DomainError && err.kind === 'unavailable');
      if (msg.deliveryCount >= maxDeliver || (!outage && msg.deliveryCount >= RATING_MAX_FAULTS)) {
        logger.error({ err, seq: msg.seq, rating: submitted.rating, token: submitted.token, deliveries: msg.deliveryCount }, 'rating could not be recorded and is given up');
        intakeOutcomes.inc({ outcome: 'dropped' });
        msg.term('given up');
        return;
      }
      failures.warn({ err, outage }, 'recording a rating from the bus failed; it will be redelivered');
      intakeOutcomes.inc({ outcome: 'retry' });
      msg.nak(ratingRedeliveryDelayMs(msg.deliveryCount));
    }
  };

  const subscription: Subscription = await bus.consume(
    { stream: 'RATINGS', durable: RATINGS_DURABLE, filterSubject: RATING_SUBMITTED_SUBJECT, concurrency: options.concurrency ?? 32, maxDeliver },
    handle,
  );

  return {
    async ratingsFirst() {
      // Bounded by the intake: it acks, terms or (after maxDeliver) drops every message; and by stop.
      for (let held = false; !stopped; held = true) {
        if ((await bus.pending('RATINGS', RATINGS_DURABLE)) === 0) return;
        if (!held) heldRounds.inc();
        await new Promise((resolve) => setTimeout(resolve, GATE_POLL_MS).unref());
      }
    },
    async drain() {
      stopped = true;
      await subscription.drain();
      failures.flush();
    },
  };
}
