import { busV1 } from '@rrs/proto';
import type { Bus, KvStore, Logger } from '@rrs/runtime';

/** The KV bucket holding the channel catalog (prefixed by the bus prefix). */
export const CHANNELS_BUCKET = 'channels';
/**
 * Bucket TTL. NATS 2.9 has only a bucket-wide max age, so an entry lives this long after its last
 * refresh; senders refresh every third of it, so one missed refresh never drops a running channel.
 */
export const DEFAULT_CHANNEL_TTL_MS = 30_000;

export type ChannelCatalogEntry = busV1.ChannelCatalogEntry;

export interface ChannelAnnouncement {
  /** Stops refreshing. Entries are left to expire: another replica of the sender may still be running. */
  stop(): void;
}

export interface AnnounceOptions {
  bus: Bus;
  entries: Omit<ChannelCatalogEntry, 'announcedAt'>[];
  logger: Logger;
  ttlMs?: number;
  refreshMs?: number;
}

const KEY = /^[A-Z][A-Z0-9_]{0,31}$/;
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
    if (!KEY.test(entry.key)) throw new Error(`invalid channel key ${JSON.stringify(entry.key)}: upper-case letters, digits, _`);
    // Its steps would go to `steps.result`, where senders answer the scheduler.
    if (entry.key === 'RESULT') throw new Error('channel key RESULT is reserved');
    if (!SLUG.test(entry.slug)) throw new Error(`invalid channel slug ${JSON.stringify(entry.slug)}: lower-case letters, digits, -`);
  }
  const kv = await openChannelsBucket(options.bus, ttlMs);
  const putAll = () => Promise.all(options.entries.map((e) => kv.put(e.key, busV1.ChannelCatalogEntry.encode({ ...e, announcedAt: new Date() }).finish())));
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
