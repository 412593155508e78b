/** API key permissions. A new key gets DEFAULT_SCOPES, which cover every documented method. */
export const SCOPES = [
  'locations:read',
  'contacts:write',
  'cascades:write',
  'cascades:read',
  'review-requests:write',
  'webhooks:read',
  'webhooks:write',
] as const;

export type Scope = (typeof SCOPES)[number];

export const DEFAULT_SCOPES: readonly Scope[] = SCOPES;

export function isScope(s: string): s is Scope {
  return (SCOPES as readonly string[]).includes(s);
}

/**
 * The scope an event's data needs: subscribing a webhook endpoint to an event type delivers its data
 * (names, emails, phones, ratings, feedback), so the key must be allowed to read that data through the
 * API as well as to manage webhooks. Every subscribable event carries cascade or review-request data,
 * which the API shows only to `cascades:read`.
 */
export const EVENT_DATA_SCOPES: Readonly<Record<string, Scope>> = {
  'cascade.recipient.finished': 'cascades:read',
  'cascade.recipient.rated': 'cascades:read',
  'review_request.rated': 'cascades:read',
};
