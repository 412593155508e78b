import { StatementBatcher } from '../src';

describe('StatementBatcher (group commit)', () => {
  /** A write that records its batches and finishes when the test says so. */
  function controlledWrite() {
    const batches: string[][] = [];
    const pending: Array<() => void> = [];
    const write = (items: string[]) =>
      new Promise<string[]>((resolve) => {
        batches.push(items);
        pending.push(() => resolve(items.map((item) => `done ${item}`)));
      });
    const finishNext = async () => {
      pending.shift()!();
      await new Promise((resolve) => setImmediate(resolve));
    };
    return { write, batches, finishNext };
  }

  it('writes what was submitted in one turn as one batch, and what came in meanwhile as the next', async () => {
    const { write, batches, finishNext } = controlledWrite();
    const batcher = new StatementBatcher(write, { key: (item: string) => item });
    const first = ['a', 'b', 'c'].map((item) => batcher.submit(item));
    await new Promise((resolve) => setImmediate(resolve));
    expect(batches).toEqual([['a', 'b', 'c']]);
    const second = ['d', 'e'].map((item) => batcher.submit(item));
    await new Promise((resolve) => setImmediate(resolve));
    // One statement at a time: d and e wait for the first batch.
    expect(batches).toHaveLength(1);
    await finishNext();
    expect(await Promise.all(first)).toEqual(['done a', 'done b', 'done c']);
    expect(batches).toEqual([['a', 'b', 'c'], ['d', 'e']]);
    await finishNext();
    expect(await Promise.all(second)).toEqual(['done d', 'done e']);
  });

  it('never puts one key twice in a batch, and keeps the order of a key', async () => {
    const { write, batches, finishNext } = controlledWrite();
    const batcher = new StatementBatcher(write, { key: (item: string) => item.split('#')[0], maxBatch: 2 });
    const all = ['x#1', 'x#2', 'y#1', 'z#1'].map((item) => batcher.submit(item));
    await new Promise((resolve) => setImmediate(resolve));
    await finishNext();
    await finishNext();
    expect(batches).toEqual([['x#1', 'y#1'], ['x#2', 'z#1']]);
    expect(await Promise.all(all)).toEqual(['done x#1', 'done x#2', 'done y#1', 'done z#1']);
  });

  it('fails every item of a failed batch, and goes on with the next', async () => {
    let calls = 0;
    const batcher = new StatementBatcher(
      async (items: number[]) => {
        calls++;
        if (calls === 1) throw new Error('database gone');
        return items.map((item) => item * 2);
      },
      { key: String },
    );
    const failed = await Promise.allSettled([1, 2].map((item) => batcher.submit(item)));
    expect(failed.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected']);
    expect(await Promise.all([3, 4].map((item) => batcher.submit(item)))).toEqual([6, 8]);
  });
});
