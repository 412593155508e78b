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
