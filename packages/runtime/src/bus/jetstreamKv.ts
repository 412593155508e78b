import { KvWatchInclude, type JetStreamManager, type KV, type KvEntry as NatsKvEntry, type QueuedIterator } from 'nats';
import { BusError, toBusError, type BusErrorHandler } from './errors';
import { byKey, checkKey, isLive } from './rules';
import type { KvEntry, KvStore } from './types';

/** A JetStream KV bucket (`history: 1`), read with the rulebook's key and liveness rules. */
export class JetStreamKv implements KvStore {
  constructor(
    private readonly jsm: JetStreamManager,
    private readonly kv: KV,
    private readonly name: string,
    private readonly ttlMs: number,
    private readonly onError: BusErrorHandler,
    private readonly watchers: Set<() => void>,
  ) {}

  async put(key: string, value: Uint8Array): Promise<number> {
    checkKey(this.name, key);
    try {
      return await this.kv.put(key, value);
    } catch (err) {
      throw toBusError(`kv ${this.name}: put ${key} failed`, err);
    }
  }

  async get(key: string): Promise<KvEntry | null> {
    checkKey(this.name, key);
    let entry: NatsKvEntry | null;
    try {
      entry = await this.kv.get(key);
    } catch (err) {
      throw toBusError(`kv ${this.name}: get ${key} failed`, err);
    }
    return entry && this.isLive(entry) ? toKvEntry(entry) : null;
  }

  async delete(key: string): Promise<void> {
    checkKey(this.name, key);
    try {
      await this.kv.delete(key);
    } catch (err) {
      throw toBusError(`kv ${this.name}: delete ${key} failed`, err);
    }
  }

  async entries(): Promise<KvEntry[]> {
    // The keys from the stream's subjects, then each key's last value. A watch that waits to be told it
    // has seen every key (nats.js initializedFn) hangs when a value expires between the count and its
    // delivery; reading the subjects has no such window.
    const prefix = `$KV.${this.name}.`;
    let subjects: Record<string, number>;
    try {
      subjects = (await this.jsm.streams.info(`KV_${this.name}`, { subjects_filter: `${prefix}>` })).state.subjects ?? {};
    } catch (err) {
      throw toBusError(`kv ${this.name}: listing entries failed`, err);
    }
    const keys = Object.keys(subjects).filter((s) => s.startsWith(prefix)).map((s) => s.slice(prefix.length));
    const found = await Promise.all(keys.map((key) => this.get(key)));
    return found.filter((e): e is KvEntry => e !== null).sort(byKey);
  }

  async watch(onChange: (key: string, entry: KvEntry | null) => void): Promise<() => void> {
    let iterator: QueuedIterator<NatsKvEntry>;
    try {
      iterator = await this.kv.watch({ key: '>', include: KvWatchInclude.UpdatesOnly });
    } catch (err) {
      throw toBusError(`kv ${this.name}: watch failed`, err);
    }
    let stopped = false;
    const stop = (): void => {
      if (stopped) return;
      stopped = true;
      this.watchers.delete(stop);
      iterator.stop();
    };
    this.watchers.add(stop);
    void (async () => {
      try {
        for await (const entry of iterator) {
          try {
            onChange(entry.key, entry.operation === 'PUT' ? toKvEntry(entry) : null);
          } catch (err) {
            this.onError(toBusError(`kv ${this.name}: watch callback failed for ${entry.key}`, err));
          }
        }
        if (!stopped) this.onError(new BusError(`kv ${this.name}: watch ended unexpectedly`));
      } catch (err) {
        if (!stopped) this.onError(toBusError(`kv ${this.name}: watch failed`, err));
      }
    })();
    return stop;
  }

  /** The server expires entries on its own schedule; an entry past its TTL is treated as gone right away. */
  private isLive(entry: NatsKvEntry): boolean {
    return entry.operation === 'PUT' && isLive(entry.created.getTime(), this.ttlMs);
  }
}

function toKvEntry(entry: NatsKvEntry): KvEntry {
  return { key: entry.key, value: entry.value, revision: entry.revision, createdAt: entry.created.getTime() };
}
