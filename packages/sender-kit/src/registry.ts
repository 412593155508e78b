import { busV1, CHANNEL_KEY_PATTERN } from '@rrs/proto';
import type { Bus, KvStore, Logger } from '@rrs/runtime';

/** The KV bucket holding the channel catalog (prefixed by the bus prefix). */
export const CHANNELS_BUCKET = 'channels';
/**
 * Bucket TTL. NATS 2.9 has only a bucket-wide max age, so an entry lives this long after its last
 * refresh; senders refresh every third of it, so one missed refresh never drops a running channel.
 */
export const DEFAULT_CHANNEL_TTL_MS = 30_000;

export type ChannelCatalogEntry = busV1.ChannelCatalogEntry;

/** What a sender announces: the entry without its time; available unless it says otherwise. */
export type AnnouncedEntry = Omit<ChannelCatalogEntry, 'announcedAt' | 'unavailable' | 'unavailableReason'> & Partial<Pick<ChannelCatalogEntry, 'unavailable' | 'unavailableReason'>>;

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
  const kv = await openChannelsBucket(options.bus, ttlMs);
  const entries = new Map(options.entries.map((e) => [e.key, { ...e, unavailable: e.unavailable ?? false, unavailableReason: e.unavailableReason ?? '' }]));
  const put = (e: ChannelCatalogEntry | Omit<ChannelCatalogEntry, 'announcedAt'>) => kv.put(e.key, busV1.ChannelCatalogEntry.encode({ ...e, announcedAt: new Date() }).finish());
  const putAll = () => Promise.all([...entries.values()].map(put));
  await putAll();
  let stopped = false;
  const timer = setInterval(() => {
    putAll().catch((err) => {
      if (!stopped) options.logger.warn({ err }, 'refreshing the channel catalog entries failed; will try again');
    });
  }, refreshMs);
  timer.unref();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
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
    let decoded: ChannelCatalogEntry;
    try {
      decoded = busV1.ChannelCatalogEntry.decode(entry.value);
    } catch {
      continue;
    }
    if (decoded.key !== entry.key || !SLUG.test(decoded.slug)) continue;
    out.push(decoded);
  }
  return out.sort((a, b) => a.position - b.position || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}
