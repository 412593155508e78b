/**
 * Fair share (docs/operations.md, "Fair share"): who goes first when more steps are due than the
 * senders can take.
 *
 * - Between organizations: round-robin over the (organization, channel) queues with steps due, each
 *   queue's oldest first, whatever their backlogs; not weighted by plan (every organization pays for
 *   its own messages, and a bulk send is no less paid for than an order's message).
 * - Within an organization and channel: steps of small requests (at most SMALL_REQUEST_MAX_RECIPIENTS
 *   recipients in the cascade: a contact's `startCascade`, a review request, a CRM deal, a small send)
 *   go ahead of bulk ones (larger batches, CSV uploads), each in due order.
 * - At or over a channel's in-flight bound: small requests' steps have a lane of their own past it,
 *   DISPATCH_SMALL_REQUEST_HEADROOM small steps in flight (config.ts); bulk ones wait for room
 *   (sql/dueSteps.ts, fairClaim).
 */

/** A cascade of more recipients than this is bulk. */
export const SMALL_REQUEST_MAX_RECIPIENTS = 10;

export function isBulk(recipientsTotal: number): boolean {
  return recipientsTotal > SMALL_REQUEST_MAX_RECIPIENTS;
}
