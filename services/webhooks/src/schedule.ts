/**
 * The retry schedule of a delivery: the delay before each attempt, counted from the previous attempt's
 * failure. Attempt 1 is at once; after the last attempt fails the delivery is failed.
 */
export const PRODUCTION_RETRY_SCHEDULE_MS: readonly number[] = [
  0,
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
];

/** ±10 % around each delay, so deliveries that failed together do not all come back together. */
export const JITTER = 0.1;

/** Longest wait a receiver's Retry-After can impose; a larger value is clamped to it. */
export const MAX_RETRY_AFTER_MS = 24 * 3_600_000;

/**
 * When the attempt after `attemptsMade` failed attempts is due, in ms from now, or null when the
 * schedule is exhausted. `retryAfterMs` (from a 429/5xx answer) postpones the attempt, never advances it.
 */
export function nextAttemptDelay(schedule: readonly number[], attemptsMade: number, retryAfterMs: number | null = null, random: () => number = Math.random): number | null {
  if (attemptsMade >= schedule.length) return null;
  const base = schedule[attemptsMade];
  const jittered = Math.round(base * (1 + JITTER * (2 * random() - 1)));
  if (retryAfterMs === null) return jittered;
  return Math.max(jittered, Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
}

/**
 * Parses a Retry-After header: delay-seconds or an HTTP date. Returns ms from `now`, or null when absent
 * or unreadable.
 */
export function parseRetryAfter(value: string | undefined, now: number = Date.now()): number | null {
  if (value === undefined) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - now);
}
