import type { RateLimiterAbstract, RateLimiterRes } from 'rate-limiter-flexible';

/** The largest chunk a replica reserves, whatever the limit: an idle replica never holds more. */
export const MAX_CHUNK_POINTS = 100;

/**
 * Points a replica reserves from a key's shared quota at once: 1 % of the limit, at least 1 and at most
 * MAX_CHUNK_POINTS (trial 60 → 1, so exact; standard 600 → 6; pro 3000 → 30). The one rule for every
 * plan: a key may be refused up to (replicas − 1) × chunk points before its limit within a window, never
 * allowed over it (docs/api-conventions.md, "Rate limits").
 */
export function chunkPoints(limit: number): number {
  return Math.min(MAX_CHUNK_POINTS, Math.max(1, Math.floor(limit / 100)));
}

/** One request's share of the quota. */
export interface QuotaAnswer {
  allowed: boolean;
  /** What the store had left at this replica's last reservation plus what this replica holds unspent. */
  remaining: number;
  /** Until the window the answer was counted in ends. */
  msBeforeReset: number;
}

/** A key's quota as one replica spends it. A store failure (Redis and its insurance limiter both) rejects. */
export interface ChunkedQuota {
  take(key: string): Promise<QuotaAnswer>;
  /**
   * The answer this replica can give from what it holds, without the store: a point of the held chunk,
   * or the refusal of a window used up. Undefined when only a reservation can answer (use `take`).
   */
  takeHeld(key: string): QuotaAnswer | undefined;
}

/** What one replica holds of one key's quota in the current window. */
interface Chunk {
  /** Reserved from the store and not yet spent here. */
  unspent: number;
  /** What the store had left right after this replica's last reservation (0: the window is used up). */
  storeRemaining: number;
  /** When the store's window the chunk was taken from ends, by this process's clock, never after the store's end. */
  windowEnds: number;
  /** The reservation in flight: requests that find the chunk empty wait for it rather than reserve again. */
  reserving?: Promise<void>;
}

/** Entries kept before the first sweep of ended windows; then twice what a sweep leaves. */
const SWEEP_FLOOR = 1024;

/**
 * A shared quota (a rate-limiter-flexible limiter: Redis with its in-memory insurance, or memory) spent in
 * chunks: a request finding this replica's chunk empty reserves `chunk` points with one atomic increment
 * of the store's counter, the next ones are answered from memory.
 *
 * - Shared and never exceeded: the store's counter is incremented atomically, so every reservation owns
 *   the points (counter − chunk, counter]; only those at or under the limit are granted. Granted points of
 *   all replicas are therefore distinct points of 1..limit. When fewer than `chunk` are left, the
 *   reservation gets what is left; when none are, the request is refused, and so is every request of the
 *   key on this replica until the window ends (the fixed window's counter only grows).
 * - A chunk dies with its window: it ends at the reservation's start plus the store's msBeforeNext, which
 *   is never after the store's own end (the store counted it after that start), and its unspent points
 *   are dropped then, never carried into the next window.
 * - One reservation per key at a time on a replica, so it holds at most one chunk.
 */
export function chunkedQuota(options: { store: RateLimiterAbstract; limit: number; chunk: number }): ChunkedQuota {
  const { store, limit, chunk } = options;
  const chunks = new Map<string, Chunk>();
  let sweepAt = SWEEP_FLOOR;

  const spend = (held: Chunk, now: number): QuotaAnswer => {
    held.unspent--;
    return { allowed: true, remaining: held.storeRemaining + held.unspent, msBeforeReset: held.windowEnds - now };
  };
  const refuse = (held: Chunk, now: number): QuotaAnswer => ({ allowed: false, remaining: 0, msBeforeReset: held.windowEnds - now });

  const sweep = (now: number) => {
    for (const [key, held] of chunks) if (held.windowEnds <= now && !held.reserving) chunks.delete(key);
    sweepAt = Math.max(SWEEP_FLOOR, 2 * chunks.size);
  };

  const reserve = async (key: string, held: Chunk): Promise<QuotaAnswer> => {
    const startedAt = Date.now();
    let done!: () => void;
    held.reserving = new Promise<void>((resolve) => (done = resolve));
    try {
      // penalty() is the store's plain increment: it never refuses (consume() would refuse a chunk larger
      // than what is left, and its in-memory block would hide the counter); the grant is decided here.
      const counted: RateLimiterRes = await store.penalty(key, chunk);
      const before = counted.consumedPoints - chunk;
      const granted = Math.min(chunk, Math.max(0, limit - before));
      held.storeRemaining = Math.max(0, limit - counted.consumedPoints);
      held.windowEnds = startedAt + Math.max(0, counted.msBeforeNext);
      held.unspent = granted;
      const now = Date.now();
      // The point this request asked for is its own even if the window ended while the store answered.
      return granted > 0 ? spend(held, now) : refuse(held, now);
    } finally {
      held.reserving = undefined;
      done();
    }
  };

  const fromHeld = (held: Chunk | undefined, now: number): QuotaAnswer | undefined => {
    if (!held || held.reserving || now >= held.windowEnds) return undefined;
    if (held.unspent > 0) return spend(held, now);
    if (held.storeRemaining === 0) return refuse(held, now);
    return undefined;
  };

  return {
    takeHeld(key) {
      return fromHeld(chunks.get(key), Date.now());
    },
    async take(key) {
      for (;;) {
        const now = Date.now();
        let held = chunks.get(key);
        if (held?.reserving) {
          await held.reserving;
          continue;
        }
        const answer = fromHeld(held, now);
        if (answer) return answer;
        if (!held) {
          if (chunks.size >= sweepAt) sweep(now);
          held = { unspent: 0, storeRemaining: 0, windowEnds: 0 };
          chunks.set(key, held);
        }
        return reserve(key, held);
      }
    },
  };
}
