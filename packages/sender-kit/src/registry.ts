import { hostname } from 'node:os';
import { busV1, CHANNEL_KEY_PATTERN } from '@rrs/proto';
import type { Bus, KvEntry, KvStore, Logger } from '@rrs/runtime';
import type { ProviderHealthSource } from './providers';

/** The KV bucket holding the channel catalog (prefixed by the bus prefix). */
export const CHANNELS_BUCKET = 'channels';
/**
 * Bucket TTL. NATS 2.9 has only a bucket-wide max age, so an entry lives this long after its last
 * refresh; senders refresh every third of it, so one missed refresh never drops a running channel.
 */
export const DEFAULT_CHANNEL_TTL_MS = 30_000;
/**
 * A breaker's change is put at once, but a sender puts changed entries at most this often: a provider
 * flapping between open and half-open must not flood the KV with puts.
 */
export const DEFAULT_HEALTH_PUT_INTERVAL_MS = 1_000;

/** This process, as the replica whose breakers a catalog entry's providers describe. */
export const DEFAULT_REPLICA = `${hostname()}:${process.pid}`;

export type ChannelCatalogEntry = busV1.ChannelCatalogEntry;

/** What a sender announces: the entry without its time; available unless it says otherwise. */
export type AnnouncedEntry = Omit<ChannelCatalogEntry, 'announcedAt' | 'unavailable' | 'unavailableReason' | 'providers'> & Partial<Pick<ChannelCatalogEntry, 'unavailable' | 'unavailableReason'>>;

export interface ChannelAvailability {
  available: boolean;
  /** Why not, when not available, e.g. `account_blocked`. */
  reason?: string;
}

export interface ChannelAnnouncement {
  /** Stops refreshing. Entries are left to expire: another replica of the sender may still be running. */
  stop(): void;
  /**
   * Marks a channel (un)available and puts its entry at once, so the catalog (`configured: false`) follows
   * an account going down or coming back within a put, not a refresh.
   */
  setAvailability(key: string, availability: ChannelAvailability): Promise<void>;
}

export interface AnnounceOptions {
  bus: Bus;
  entries: AnnouncedEntry[];
  logger: Logger;
  ttlMs?: number;
  refreshMs?: number;
  /** Each channel's providers (by channel key): announced with their circuit state. */
  health?: ReadonlyMap<string, ProviderHealthSource>;
  /** Least time between two puts caused by breaker changes. Default DEFAULT_HEALTH_PUT_INTERVAL_MS. */
  healthPutIntervalMs?: number;
  /** Names this replica in the announced provider health. Default DEFAULT_REPLICA. */
  replica?: string;
}

const SLUG = /^[a-z][a-z0-9-]{0,31}$/;

export function openChannelsBucket(bus: Bus, ttlMs = DEFAULT_CHANNEL_TTL_MS): Promise<KvStore> {
  return bus.kv(CHANNELS_BUCKET, { ttlMs });
}

/** Puts the sender's catalog entries now and keeps them fresh until `stop()`. */
export async function announceChannels(options: AnnounceOptions): Promise<ChannelAnnouncement> {
  const ttlMs = options.ttlMs ?? DEFAULT_CHANNEL_TTL_MS;
  const refreshMs = options.refreshMs ?? Math.max(50, Math.floor(ttlMs / 3));
  if (refreshMs >= ttlMs) throw new Error(`channel refresh (${refreshMs} ms) must be shorter than the TTL (${ttlMs} ms)`);
  for (const entry of options.entries) {
    if (!CHANNEL_KEY_PATTERN.test(entry.key)) throw new Error(`invalid channel key ${JSON.stringify(entry.key)}: upper-case letters, digits, _`);
    // Its steps would go to `steps.result`, where senders answer the scheduler.
    if (entry.key === 'RESULT') throw new Error('channel key RESULT is reserved');
    if (!SLUG.test(entry.slug)) throw new Error(`invalid channel slug ${JSON.stringify(entry.slug)}: lower-case letters, digits, -`);
  }
  for (const key of options.health?.keys() ?? []) {
    if (!options.entries.some((e) => e.key === key)) throw new Error(`provider health for channel ${key}, which this sender does not announce`);
  }
  const kv = await openChannelsBucket(options.bus, ttlMs);
  const replica = options.replica ?? DEFAULT_REPLICA;
  const entries = new Map(options.entries.map((e) => [e.key, { ...e, unavailable: e.unavailable ?? false, unavailableReason: e.unavailableReason ?? '' }]));
  const providersOf = (key: string): busV1.ProviderHealth[] =>
    (options.health?.get(key)?.health() ?? []).map((p) => ({ name: p.name, state: p.state, since: p.since, lastFailureCode: p.lastFailureCode, lastFailureAt: p.lastFailureAt, replica }));
  let lastPutAt = 0;
  const put = (e: Omit<ChannelCatalogEntry, 'announcedAt' | 'providers'>) => {
    lastPutAt = Date.now();
    return kv.put(e.key, busV1.ChannelCatalogEntry.encode({ ...e, providers: providersOf(e.key), announcedAt: new Date() }).finish());
  };
  const putAll = () => Promise.all([...entries.values()].map(put));
  await putAll();
  let stopped = false;
  const warn = (err: unknown) => {
    if (!stopped) options.logger.warn({ err }, 'refreshing the channel catalog entries failed; will try again');
  };
  const timer = setInterval(() => putAll().catch(warn), refreshMs);
  timer.unref();
  // Breaker changes: the changed channels are put at once, or once the put interval since the last put
  // has passed; changes meanwhile join that one put.
  const healthPutIntervalMs = options.healthPutIntervalMs ?? DEFAULT_HEALTH_PUT_INTERVAL_MS;
  const changed = new Set<string>();
  let pending: NodeJS.Timeout | undefined;
  const putChanged = () => {
    pending = undefined;
    if (stopped) return;
    const keys = [...changed];
    changed.clear();
    Promise.all(keys.map((key) => put(entries.get(key)!))).catch(warn);
  };
  const unsubscribe = [...(options.health ?? [])].map(([key, source]) =>
    source.onHealthChange(() => {
      changed.add(key);
      if (pending || stopped) return;
      pending = setTimeout(putChanged, Math.max(0, lastPutAt + healthPutIntervalMs - Date.now()));
      pending.unref();
    }),
  );
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
      clearTimeout(pending);
      for (const off of unsubscribe) off();
    },
    async setAvailability(key, availability) {
      const entry = entries.get(key);
      if (!entry) throw new Error(`channel ${key} is not announced by this sender`);
      const next = { ...entry, unavailable: !availability.available, unavailableReason: availability.available ? '' : availability.reason ?? 'unavailable' };
      entries.set(key, next);
      if (!stopped) await put(next);
    },
  };
}

/** Live catalog entries, in catalog order; entries older than the TTL are ignored even if still stored. */
export async function readChannelCatalog(kv: KvStore, ttlMs = DEFAULT_CHANNEL_TTL_MS, now = Date.now()): Promise<ChannelCatalogEntry[]> {
  const out: ChannelCatalogEntry[] = [];
  for (const entry of await kv.entries()) {
    if (entry.createdAt + ttlMs <= now) continue;
    const decoded = decodeCatalogEntry(entry);
    if (decoded) out.push(decoded);
  }
  return out.sort((a, b) => a.position - b.position || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** A stored catalog entry, or undefined when it does not decode or does not match its key. */
export function decodeCatalogEntry(entry: KvEntry): ChannelCatalogEntry | undefined {
  let decoded: ChannelCatalogEntry;
  try {
    decoded = busV1.ChannelCatalogEntry.decode(entry.value);
  } catch {
    return undefined;
  }
  return decoded.key === entry.key && SLUG.test(decoded.slug) ? decoded : undefined;
}
