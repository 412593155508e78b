import { DomainError } from '@rrs/runtime';

/*
 * The organization's recipient budget is the scheduler's (services/cascade-scheduler/src/recipientBudget.ts):
 * it is taken with the start, for every entry point alike. The gateway only shows it: the windows the
 * scheduler answers (or refuses with) become the RateLimit fields, counted in recipients, after the
 * key's request policy when the route has one.
 */

/** One window of the budget, as StartCascadeResponse / CreateReviewRequestResponse and the refusal's details carry it. */
export interface RecipientWindow {
  name: string;
  limit: number;
  windowSeconds: number;
  remaining: number;
  resetSeconds: number;
}

type Headers = { getHeader(name: string): unknown; setHeader(name: string, value: string): unknown };

/** Adds the recipient windows to the response's RateLimit fields. */
export function setRecipientHeaders(res: Headers, windows: readonly RecipientWindow[]): void {
  if (windows.length === 0) return;
  const join = (name: string, items: string[]) => {
    const before = res.getHeader(name);
    res.setHeader(name, [...(before ? [String(before)] : []), ...items].join(', '));
  };
  join('RateLimit-Policy', windows.map((w) => `"${w.name}";q=${w.limit};w=${w.windowSeconds}`));
  join('RateLimit', windows.map((w) => `"${w.name}";r=${w.remaining};t=${w.resetSeconds}`));
}

/**
 * A 429 `recipient_quota_exceeded` from the scheduler carries its windows in `details.windows`: they
 * become the RateLimit fields (not members of the problem); `Retry-After` comes from `retryAfterSeconds`
 * as for every rate limit.
 */
export function showRecipientRefusal(res: Headers, err: unknown): void {
  if (!(err instanceof DomainError) || err.code !== 'recipient_quota_exceeded' || !err.details) return;
  const details = err.details as { windows?: RecipientWindow[] };
  if (!Array.isArray(details.windows)) return;
  setRecipientHeaders(res, details.windows);
  delete details.windows;
}
