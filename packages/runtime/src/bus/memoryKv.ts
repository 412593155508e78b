import { toBusError, type BusErrorHandler } from './errors';
import { byKey, checkKey, isLive } from './rules';
import type { KvEntry, KvStore } from './types';

interface StoredEntry {
  value: Uint8Array;
  revision: number;
  createdAt: number;
}

/** An in-process bucket with one value per key (JetStream `history: 1`) and the bucket's TTL. */
export class MemoryBucket implements KvStore {
  /** Insertion order is write order (a put re-inserts), so expired entries are always at the front. */
  private readonly store = new Map<string, StoredEntry>();
  private readonly watchers = new Set<(key: string, entry: KvEntry | null) => void>();
  private revision = 0;

  constructor(
    private readonly name: string,
    private readonly ttlMs: number,
    private readonly onError: BusErrorHandler,
  ) {}

  async put(key: string, value: Uint8Array): Promise<number> {
    checkKey(this.name, key);
    this.expireOld();
    const stored: StoredEntry = { value: value.slice(), revision: ++this.revision, createdAt: Date.now() };
    this.store.delete(key);
    this.store.set(key, stored);
    this.notify(key, stored);
    return stored.revision;
  }

  async get(key: string): Promise<KvEntry | null> {
    checkKey(this.name, key);
    this.expireOld();
    const stored = this.store.get(key);
    return stored ? toEntry(key, stored) : null;
  }

  async delete(key: string): Promise<void> {
    checkKey(this.name, key);
    // A delete is a write (JetStream stores a marker), so it takes a revision even for a missing key.
    ++this.revision;
    this.store.delete(key);
    this.notify(key, null);
  }

  async entries(): Promise<KvEntry[]> {
    this.expireOld();
    return [...this.store.entries()].map(([key, stored]) => toEntry(key, stored)).sort(byKey);
  }

  async watch(onChange: (key: string, entry: KvEntry | null) => void): Promise<() => void> {
    this.watchers.add(onChange);
    return () => {
      this.watchers.delete(onChange);
    };
  }

  close(): void {
    this.watchers.clear();
  }

  private notify(key: string, stored: StoredEntry | null): void {
    for (const watcher of this.watchers) {
      const entry = stored ? toEntry(key, stored) : null;
      // Asynchronous and in write order, as with a JetStream watch; a throwing watcher cannot fail the write.
      queueMicrotask(() => {
        if (!this.watchers.has(watcher)) return;
        try {
          watcher(key, entry);
        } catch (err) {
          this.onError(toBusError(`kv ${this.name}: watch callback failed for ${key}`, err));
        }
      });
    }
  }

  private expireOld(): void {
    const now = Date.now();
    for (const [key, stored] of this.store) {
      if (isLive(stored.createdAt, this.ttlMs, now)) break;
      this.store.delete(key);
    }
  }
}

function toEntry(key: string, stored: StoredEntry): KvEntry {
  return { key, value: stored.value.slice(), revision: stored.revision, createdAt: stored.createdAt };
}
