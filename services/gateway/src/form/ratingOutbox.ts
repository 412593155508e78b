import { RATING_SUBMITTED_SUBJECT, ratingMsgId, ratingsBusV1 } from '@rrs/proto';
import type { Bus } from '@rrs/runtime';

/**
 * Where the review form leaves a rating the scheduler cannot take now (it is down, or its database):
 * the RATINGS stream, from which the scheduler's ratings intake records it once it can. `accept`
 * resolves once the stream has stored the message (a JetStream PubAck: durable), and rejects when the
 * bus cannot store it now; it does not wait for a lost connection to come back, since the page that
 * answers then retries by itself.
 */
export interface RatingOutbox {
  accept(token: string, rating: number): Promise<void>;
}

export function busRatingOutbox(bus: Bus): RatingOutbox {
  return {
    async accept(token, rating) {
      if (!bus.isConnected()) throw new Error('not connected to NATS');
      const data = ratingsBusV1.RatingSubmitted.encode({ token, rating, submittedAt: new Date() }).finish();
      // One id per link: a second submit within the duplicate window is dropped; the first rating stands anyway.
      await bus.publish(RATING_SUBMITTED_SUBJECT, data, { msgId: ratingMsgId(token) });
    },
  };
}
