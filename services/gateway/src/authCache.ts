import { createHash, hash } from 'node:crypto';
import type { Redis } from 'ioredis';
import { DomainError, UnauthenticatedError, counter, type Logger } from '@rrs/runtime';
import type { Authenticator, Principal } from './http/auth';

/** The longest an answer may be cached: a revoked key must stop working within 5 s. */
export const MAX_AUTH_CACHE_TTL_MS = 5_000;
const MEMORY_ENTRIES = 10_000;

const lookups = counter({ name: 'gateway_auth_cache_total', help: 'API key lookups by cache outcome.', labelNames: ['outcome'] });
// Bound once: a hit (nearly every request) counts without a labels object of its own.
const localHits = lookups.labels('local_hit');

type Entry = { principal: Principal } | { invalid: string };

/** Where cached answers live: Redis (shared by replicas) or this process's memory. */
interface Store {
  get(id: string): Promise<Entry | undefined>;
  set(id: string, entry: Entry, ttlMs: number): Promise<void>;
}

/** This process's layer: synchronous, so a hit (nearly every request) awaits nothing. */
interface MemoryStore {
  get(id: string): Entry | undefined;
  set(id: string, entry: Entry, ttlMs: number): void;
}

function memoryStore(): MemoryStore {
  const map = new Map<string, { entry: Entry; expires: number }>();
  return {
    get(id) {
      const hit = map.get(id);
      if (!hit) return undefined;
      if (hit.expires <= Date.now()) {
        map.delete(id);
        return undefined;
      }
      return hit.entry;
    },
    set(id, entry, ttlMs) {
      // Oldest-first eviction keeps memory bounded when many distinct (e.g. random, invalid) keys arrive.
      if (map.size >= MEMORY_ENTRIES) map.delete(map.keys().next().value as string);
      map.set(id, { entry, expires: Date.now() + ttlMs });
    },
  };
}

function redisStore(redis: Redis, keyPrefix: string): Store {
  return {
    async get(id) {
      const raw = await redis.get(`${keyPrefix}auth:${id}`);
      return raw ? (JSON.parse(raw) as Entry) : undefined;
    },
    async set(id, entry, ttlMs) {
      await redis.set(`${keyPrefix}auth:${id}`, JSON.stringify(entry), 'PX', ttlMs);
    },
  };
}

/**
 * Caches the key → principal lookup, keyed by the SHA-256 of the key so the key itself is never stored.
 * With Redis, a small per-process layer sits in front of it (a quarter of the TTL, at most 1 s) and the
 * Redis entry lives for the rest, so an answer is never older than `ttlMs` (≤ 5 s) in total: a revoked
 * key stops working within `ttlMs`. Unknown keys are cached too (same TTL) so a flood of bad keys does not
 * reach the directory. Concurrent misses for one key share a single lookup. A cache failure falls back to
 * asking the directory.
 */
export function cachedAuthenticator(inner: Authenticator, options: { ttlMs: number; redis?: Redis; keyPrefix: string; logger?: Logger }): Authenticator {
  if (options.ttlMs > MAX_AUTH_CACHE_TTL_MS) throw new RangeError(`auth cache TTL ${options.ttlMs} ms exceeds ${MAX_AUTH_CACHE_TTL_MS} ms`);
  const local = memoryStore();
  const localTtl = options.redis ? Math.min(1_000, Math.floor(options.ttlMs / 4)) : options.ttlMs;
  const shared = options.redis ? redisStore(options.redis, options.keyPrefix) : undefined;
  const sharedTtl = options.ttlMs - localTtl;
  const inflight = new Map<string, Promise<Principal>>();

  const load = async (id: string, apiKey: string): Promise<Principal> => {
    let entry: Entry | undefined;
    if (shared) {
      try {
        entry = await shared.get(id);
      } catch (err) {
        options.logger?.warn({ err }, 'auth cache read failed; asking the directory');
      }
    }
    let refusal: DomainError | undefined;
    if (entry) lookups.inc({ outcome: 'shared_hit' });
    else {
      lookups.inc({ outcome: 'miss' });
      try {
        entry = { principal: await inner(apiKey) };
      } catch (err) {
        // Only a key nobody issued (or a revoked one) is an answer worth caching; a failure is not.
        if (!(err instanceof DomainError) || err.kind !== 'unauthenticated' || err.code !== 'invalid_api_key') throw err;
        entry = { invalid: err.message };
        refusal = err;
      }
      if (shared) await shared.set(id, entry, sharedTtl).catch((err: unknown) => options.logger?.warn({ err }, 'auth cache write failed'));
    }
    if (localTtl > 0) local.set(id, entry, localTtl);
    // The lookup that asked the directory rejects with its refusal; the cached answer serves the others.
    if (refusal) throw refusal;
    return unwrap(entry);
  };

  const authenticate: Authenticator = async (apiKey) => {
    if (options.ttlMs <= 0) return inner(apiKey);
    const id = keyId(apiKey);
    const cached = local.get(id);
    if (cached) {
      localHits.inc();
      return unwrap(cached);
    }
    let pending = inflight.get(id);
    if (!pending) {
      pending = load(id, apiKey).finally(() => inflight.delete(id));
      inflight.set(id, pending);
    }
    return pending;
  };
  // A valid key found in this process's layer; anything else (a refusal too) is left to `authenticate`.
  authenticate.cached = (apiKey) => {
    if (options.ttlMs <= 0) return undefined;
    const entry = local.get(keyId(apiKey));
    if (!entry || 'invalid' in entry) return undefined;
    localHits.inc();
    return entry.principal;
  };
  return authenticate;
}

/**
 * The cache's id of a key: its SHA-256. The one-shot `crypto.hash` (Node ≥ 20.12) costs a quarter of a
 * Hash object, on every request; earlier Node 20 releases (the service supports ≥ 20) make a Hash object.
 */
const keyId: (apiKey: string) => string =
  typeof hash === 'function' ? (apiKey) => hash('sha256', apiKey, 'base64url') : (apiKey) => createHash('sha256').update(apiKey).digest('base64url');

function unwrap(entry: Entry): Principal {
  if ('invalid' in entry) throw new UnauthenticatedError('invalid_api_key', entry.invalid);
  return entry.principal;
}
