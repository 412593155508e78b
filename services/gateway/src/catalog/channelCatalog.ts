import type { Bus, Logger } from '@rrs/runtime';
import { DEFAULT_CHANNEL_TTL_MS, openChannelsBucket, readChannelCatalog, type ChannelCatalogEntry } from '@rrs/sender-kit';

/** The channels running senders announce, as the gateway currently knows them. */
export interface ChannelCatalogSource {
  /** Cheap: a cached array, replaced whenever the catalog changes. */
  list(): readonly ChannelCatalogEntry[];
  /** Bumped on every change, so derived values (e.g. send routes) can be cached per version. */
  readonly version: number;
}

export interface RunningChannelCatalog extends ChannelCatalogSource {
  /** Re-reads the bucket now (also done on every watch event and every `pollMs`). */
  refresh(): Promise<void>;
  stop(): void;
}

const same = (a: readonly ChannelCatalogEntry[], b: readonly ChannelCatalogEntry[]) =>
  a.length === b.length && a.every((e, i) => e.key === b[i].key && e.slug === b[i].slug && e.label === b[i].label && e.contactField === b[i].contactField && e.position === b[i].position && e.capabilities.join() === b[i].capabilities.join() && e.unavailable === b[i].unavailable && e.unavailableReason === b[i].unavailableReason);

/**
 * Reads the `channels` KV bucket into memory and keeps it current: a watch applies announcements at
 * once; a poll applies expiries (an entry older than the TTL is dropped even if the bucket still holds
 * it), since an expiry produces no watch event.
 */
export async function startChannelCatalog(options: { bus: Bus; logger: Logger; ttlMs?: number; pollMs?: number }): Promise<RunningChannelCatalog> {
  const ttlMs = options.ttlMs ?? DEFAULT_CHANNEL_TTL_MS;
  const kv = await openChannelsBucket(options.bus, ttlMs);
  let entries: readonly ChannelCatalogEntry[] = [];
  let version = 0;
  let reading: Promise<void> | null = null;
  const refresh = (): Promise<void> => {
    reading ??= readChannelCatalog(kv, ttlMs)
      .then((next) => {
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
  const unwatch = await kv.watch(() => {
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
    stop() {
      clearInterval(timer);
      unwatch();
    },
  };
}
