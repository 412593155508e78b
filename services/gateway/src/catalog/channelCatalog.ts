import type { Bus, Logger } from '@rrs/runtime';
import { decodeCatalogEntry, DEFAULT_CHANNEL_TTL_MS, openChannelsBucket, readChannelCatalog, type ChannelCatalogEntry } from '@rrs/sender-kit';
import { ProviderHealthBoard, type ProviderHealthSummary } from './providerHealth';

/** The channels running senders announce, as the gateway currently knows them. */
export interface ChannelCatalogSource {
  /** Cheap: a cached array, replaced whenever the catalog changes. */
  list(): readonly ChannelCatalogEntry[];
  /** Bumped on every change, so derived values (e.g. send routes) can be cached per version. */
  readonly version: number;
  /** A channel's providers in failover order with their circuit state over the sender's replicas. */
  providerHealth?(key: string): ProviderHealthSummary[];
}

export interface RunningChannelCatalog extends ChannelCatalogSource {
  /** Re-reads the bucket now (also done on every watch event and every `pollMs`). */
  refresh(): Promise<void>;
  stop(): void;
}

const same = (a: readonly ChannelCatalogEntry[], b: readonly ChannelCatalogEntry[]) =>
  a.length === b.length && a.every((e, i) => e.key === b[i].key && e.slug === b[i].slug && e.label === b[i].label && e.contactField === b[i].contactField && e.position === b[i].position && e.capabilities.join() === b[i].capabilities.join() && e.unavailable === b[i].unavailable && e.unavailableReason === b[i].unavailableReason && sameSenderDomain(e.senderDomain, b[i].senderDomain));
/** A new DKIM key or SPF setting of the email sender is a change too (the deliverability check reads it). */
const sameSenderDomain = (a?: ChannelCatalogEntry['senderDomain'], b?: ChannelCatalogEntry['senderDomain']) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

/**
 * Reads the `channels` KV bucket into memory and keeps it current: a watch applies announcements at
 * once; a poll applies expiries (an entry older than the TTL is dropped even if the bucket still holds
 * it), since an expiry produces no watch event. Provider health is gathered from every put the watch sees
 * (ProviderHealthBoard): replicas of one sender share the channel's key, the last put wins the entry.
 */
export async function startChannelCatalog(options: { bus: Bus; logger: Logger; ttlMs?: number; pollMs?: number }): Promise<RunningChannelCatalog> {
  const ttlMs = options.ttlMs ?? DEFAULT_CHANNEL_TTL_MS;
  const kv = await openChannelsBucket(options.bus, ttlMs);
  let entries: readonly ChannelCatalogEntry[] = [];
  let version = 0;
  let reading: Promise<void> | null = null;
  const health = new ProviderHealthBoard(ttlMs);
  const refresh = (): Promise<void> => {
    reading ??= readChannelCatalog(kv, ttlMs)
      .then((next) => {
        for (const entry of next) health.record(entry);
        if (!same(entries, next)) {
          entries = next;
          version += 1;
          options.logger.info({ channels: next.map((e) => e.key) }, 'channel catalog changed');
        }
      })
      .finally(() => {
        reading = null;
      });
    return reading;
  };
  await refresh();
  // Every put, so each replica's announcement is seen, though they share the channel's key.
  const unwatch = await kv.watch((_key, stored) => {
    const entry = stored && decodeCatalogEntry(stored);
    if (entry) health.record(entry);
    refresh().catch((err) => options.logger.warn({ err }, 'reading the channel catalog failed'));
  });
  const timer = setInterval(() => {
    refresh().catch((err) => options.logger.warn({ err }, 'reading the channel catalog failed'));
  }, options.pollMs ?? 1_000);
  timer.unref();
  return {
    list: () => entries,
    get version() {
      return version;
    },
    refresh,
    providerHealth: (key) => health.of(key),
    stop() {
      clearInterval(timer);
      unwatch();
    },
  };
}
