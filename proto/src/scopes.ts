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
