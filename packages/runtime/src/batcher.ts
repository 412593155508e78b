import type { Pool, QueryResult } from 'pg';
import { queryTogether, type Statement } from './coalescedTransaction';

/**
 * Group commit for per-item database writes: items submitted one at a time (by concurrent handlers)
 * are written by one statement per batch. A batch is what was submitted during the same event-loop
 * turn, plus everything that came in while the previous batch's statement was running: at most
 * `parallel` statements run at once, so under load batches grow by themselves and the round trips per
 * item fall, while a lone item waits only for the turn to end.
 *
 * Each item's promise settles with its own answer from the batch, or with the batch's error (the
 * statement is one transaction: none of its items was written). Two items with the same key never
 * share a batch (a statement such as `INSERT … ON CONFLICT DO UPDATE` may not touch one row twice); the
 * later one goes with the next batch, so items of one key are written in the order submitted.
 */
export class StatementBatcher<I, O> {
  private queue: Array<{ item: I; key: string; resolve: (out: O) => void; reject: (err: unknown) => void }> = [];
  private running = 0;
  private scheduled = false;

  constructor(
    /** Writes a batch; answers one output per item, in the items' order. */
    private readonly write: (items: I[]) => Promise<O[]>,
    private readonly options: { key: (item: I) => string; maxBatch?: number; parallel?: number },
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, key: this.options.key(item), resolve, reject });
      if (!this.scheduled && this.running < (this.options.parallel ?? 1)) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.pump();
        });
      }
    });
  }

  private pump(): void {
    const maxBatch = this.options.maxBatch ?? 500;
    while (this.running < (this.options.parallel ?? 1) && this.queue.length > 0) {
      const keys = new Set<string>();
      const batch: typeof this.queue = [];
      const rest: typeof this.queue = [];
      for (const entry of this.queue) {
        if (batch.length < maxBatch && !keys.has(entry.key)) {
          keys.add(entry.key);
          batch.push(entry);
        } else {
          rest.push(entry);
        }
      }
      this.queue = rest;
      this.running++;
      void this.run(batch).finally(() => {
        this.running--;
        this.pump();
      });
    }
  }

  private async run(batch: typeof this.queue): Promise<void> {
    try {
      const outputs = await this.write(batch.map((entry) => entry.item));
      if (outputs.length !== batch.length) throw new Error(`a batch write answered ${outputs.length} outputs for ${batch.length} items`);
      batch.forEach((entry, i) => entry.resolve(outputs[i]));
    } catch (err) {
      for (const entry of batch) entry.reject(err);
    }
  }
}

/** One kind of item written by a `LaneBatcher`: its statement per batch and each item's answer from it. */
export interface Lane<I, O> {
  /** Two items with the same key never share a batch (see StatementBatcher). */
  key(item: I): string;
  /** The statement writing a batch of these items (at most `maxBatch`). */
  statement(items: I[]): Statement;
  /** Each item's answer, in the items' order, from the statement's result (may ask the database more). */
  answers(result: QueryResult, items: I[]): Promise<O[]> | O[];
}

type LaneEntry = { item: unknown; key: string; resolve: (out: unknown) => void; reject: (err: unknown) => void };

/**
 * Group commit for several kinds of per-item writes at once: what waits in every lane when a request
 * goes out is written by one request — one statement per lane with items — to PostgreSQL. The
 * statements run in the lanes' order in one implicit transaction (a simple-protocol Query of several
 * statements; runtime `queryTogether`): all of them commit, or none, and every item of the request then
 * fails with that error. One request at a time; the next carries what came in meanwhile, so under load
 * the lanes' batches fill together and each kind of write costs a fraction of a round trip, instead of
 * one round trip per kind (StatementBatcher, one per kind, sends them apart).
 */
export class LaneBatcher {
  private readonly lanes: Array<{ lane: Lane<unknown, unknown>; queue: LaneEntry[]; lingerMs: number; lingerWhile: () => boolean }> = [];
  private running = false;
  private scheduled = false;
  private lingering: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly options: { maxBatch?: number } = {},
  ) {}

  /**
   * Adds a lane; lanes' statements run in the order the lanes were added. A lane with `lingerMs` does
   * not start a request by itself for that long (or until its batch is full, or `lingerWhile` says
   * more of its items are no longer on their way): its items ride with the next request another lane
   * starts, or go together when the time is up — for writes whose caller can wait a little, so that
   * they stop costing a request of their own each.
   */
  lane<I, O>(lane: Lane<I, O>, options: { lingerMs?: number; lingerWhile?: () => boolean } = {}): (item: I) => Promise<O> {
    const entry = { lane: lane as Lane<unknown, unknown>, queue: [] as LaneEntry[], lingerMs: options.lingerMs ?? 0, lingerWhile: options.lingerWhile ?? (() => true) };
    this.lanes.push(entry);
    return (item: I) =>
      new Promise<O>((resolve, reject) => {
        entry.queue.push({ item, key: lane.key(item), resolve: resolve as (out: unknown) => void, reject });
        this.schedule();
      });
  }

  private schedule(): void {
    if (this.running) return;
    const maxBatch = this.options.maxBatch ?? 500;
    const waiting = this.lanes.filter((entry) => entry.queue.length > 0);
    if (waiting.length === 0) return;
    const urgent = waiting.some((entry) => entry.lingerMs === 0 || entry.queue.length >= maxBatch || !entry.lingerWhile());
    if (urgent) {
      clearTimeout(this.lingering);
      this.lingering = undefined;
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        void this.pump();
      });
      return;
    }
    if (this.scheduled || this.lingering) return;
    // Not unref'd: a sender draining at shutdown awaits these writes.
    this.lingering = setTimeout(() => {
      this.lingering = undefined;
      void this.pump();
    }, Math.min(...waiting.map((entry) => entry.lingerMs)));
  }

  private async pump(): Promise<void> {
    if (this.running) return;
    const maxBatch = this.options.maxBatch ?? 500;
    const taken: Array<{ lane: Lane<unknown, unknown>; batch: LaneEntry[] }> = [];
    for (const entry of this.lanes) {
      const keys = new Set<string>();
      const batch: LaneEntry[] = [];
      const rest: LaneEntry[] = [];
      for (const waiting of entry.queue) {
        if (batch.length < maxBatch && !keys.has(waiting.key)) {
          keys.add(waiting.key);
          batch.push(waiting);
        } else rest.push(waiting);
      }
      entry.queue = rest;
      if (batch.length) taken.push({ lane: entry.lane, batch });
    }
    if (taken.length === 0) return;
    this.running = true;
    try {
      let results: QueryResult[];
      try {
        results = await queryTogether(this.pool, taken.map(({ lane, batch }) => lane.statement(batch.map((entry) => entry.item))));
      } catch (err) {
        for (const { batch } of taken) for (const entry of batch) entry.reject(err);
        return;
      }
      await Promise.all(
        taken.map(async ({ lane, batch }, i) => {
          try {
            const outputs = await lane.answers(results[i], batch.map((entry) => entry.item));
            if (outputs.length !== batch.length) throw new Error(`a batch write answered ${outputs.length} outputs for ${batch.length} items`);
            batch.forEach((entry, k) => entry.resolve(outputs[k]));
          } catch (err) {
            for (const entry of batch) entry.reject(err);
          }
        }),
      );
    } finally {
      this.running = false;
      if (this.lanes.some((entry) => entry.queue.length > 0)) this.schedule();
    }
  }
}
