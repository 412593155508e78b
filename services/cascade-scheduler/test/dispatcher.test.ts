import { createPool, Notifier, type Bus, type OutgoingMessage, type Pool, type PublishAck, type PublishOptions } from '@rrs/runtime';
import { testLogger, waitFor } from '@rrs/testkit';
import { ConfiguredChannels, SCHEMA, startDispatcher, type RunningDispatcher } from '../src';
import { LOCATION, ORG, recipientsInput, startHarness, startScriptedSender, type Harness } from './harness';
import { AddressHasher, DEVELOPMENT_PERSON_HASH_KEY } from '../src/personHash';

/** A bus that counts what each dispatcher publishes (the stream would hide a double publish). */
function countingBus(bus: Bus, log: Array<{ msgId: string; duplicate: boolean }>): Bus {
  const isStep = (subject: string) => subject.startsWith('steps.') && !subject.startsWith('steps.result');
  return new Proxy(bus, {
    get(target, prop, receiver) {
      if (prop === 'publish') {
        return async (subject: string, data: Uint8Array, options?: PublishOptions): Promise<PublishAck> => {
          const ack = await target.publish(subject, data, options);
          if (isStep(subject)) log.push({ msgId: options?.msgId ?? '', duplicate: ack.duplicate });
          return ack;
        };
      }
      if (prop === 'publishBatch') {
        return async (messages: OutgoingMessage[]): Promise<PublishAck[]> => {
          const acks = await target.publishBatch(messages);
          messages.forEach((m, i) => {
            if (isStep(m.subject)) log.push({ msgId: m.options?.msgId ?? '', duplicate: acks[i].duplicate });
          });
          return acks;
        };
      }
      return Reflect.get(target, prop, receiver);
    },
  });
}

describe('dispatcher replicas and crashes (Postgres + JetStream)', () => {
  let h: Harness;
  let sender: Awaited<ReturnType<typeof startScriptedSender>>;
  const extra: Array<{ pool: Pool; notifier: Notifier; dispatcher?: RunningDispatcher }> = [];

  beforeAll(async () => {
    // Thousands of recipients a minute from one organization: the recipient budget is not what this suite tests.
    const lifted = { perMinute: 1_000_000, perDay: 10_000_000 };
    h = await startHarness({ minuteMs: 40, deps: { noDispatcher: true }, config: { recipientQuotas: { trial: lifted, standard: lifted, pro: lifted } } });
    sender = await startScriptedSender(h.tb.bus, ['EMAIL']);
  });
  afterAll(async () => {
    for (const e of extra) {
      await e.dispatcher?.stop();
      await e.notifier.stop();
      await e.pool.end();
    }
    await sender.stop();
    await h.close();
  });

  async function replica(bus: Bus, options: { batchSize: number; loops?: number; afterPublish?: Parameters<typeof startDispatcher>[0]['afterPublish']; beforeRound?: () => Promise<void> }) {
    const pool = createPool({ url: h.db.url, schema: SCHEMA, logger: testLogger() });
    const notifier = new Notifier(h.db.url, SCHEMA, testLogger());
    const entry: (typeof extra)[number] = { pool, notifier };
    extra.push(entry);
    entry.dispatcher = await startDispatcher({
      pool, bus, notifier, logger: testLogger(), minuteMs: 40, publicBaseUrl: 'http://reviews.test',
      channels: new ConfiguredChannels(h.profiles), hasher: new AddressHasher(DEVELOPMENT_PERSON_HASH_KEY), batchSize: options.batchSize, loops: options.loops, afterPublish: options.afterPublish, beforeRound: options.beforeRound,
    });
    await notifier.start();
    return entry.dispatcher;
  }

  async function startCascades(count: number, perCascade: number, tag: string): Promise<string[]> {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const { result } = await h.scheduler.cascades.start({
        organizationId: ORG, locationId: LOCATION, name: tag, flowId: '', channel: 'EMAIL', externalId: `${tag}-${i}`,
        recipients: recipientsInput(perCascade, (k) => ({ email: `${tag}-${i}-${k}@example.com` })),
      });
      ids.push(result.id);
    }
    return ids;
  }

  const stepsOf = async (cascadeIds: string[]) =>
    (await h.pool.query<{ id: string; status: string; attempt: number }>('SELECT id, status, attempt FROM recipient_steps WHERE cascade_id = ANY($1::uuid[])', [cascadeIds])).rows;

  it('two replicas never dispatch the same step', async () => {
    const log: Array<{ msgId: string; duplicate: boolean }> = [];
    const bus = countingBus(h.tb.bus, log);
    const ids = await startCascades(4, 500, 'rep');
    const [a, b] = [await replica(bus, { batchSize: 50 }), await replica(bus, { batchSize: 50 })];
    await waitFor(async () => (await stepsOf(ids)).every((s) => s.status === 'sent'), { what: 'all 2000 steps sent', timeoutMs: 20_000 });
    await a.stop();
    await b.stop();
    const steps = await stepsOf(ids);
    expect(steps).toHaveLength(2000);
    expect(log).toHaveLength(2000);
    expect(new Set(log.map((l) => l.msgId)).size).toBe(2000);
    expect(log.every((l) => !l.duplicate)).toBe(true);
    expect(a.dispatchedCount + b.dispatchedCount).toBe(2000);
    expect(a.dispatchedCount).toBeGreaterThan(0);
    expect(b.dispatchedCount).toBeGreaterThan(0);
    expect(steps.every((s) => s.attempt === 1)).toBe(true);
    const delivered = sender.received.filter((s) => s.recipient?.email.startsWith('rep-'));
    expect(delivered).toHaveLength(2000);
  });

  it('a dispatcher killed in the middle of a batch loses nothing and duplicates nothing once another one runs', async () => {
    const log: Array<{ msgId: string; duplicate: boolean }> = [];
    const bus = countingBus(h.tb.bus, log);
    const ids = await startCascades(1, 300, 'crash');
    let killedBatch: string[] = [];
    let victim: RunningDispatcher | undefined;
    // One claim loop, so the killed batch is all the victim ever did.
    victim = await replica(bus, {
      batchSize: 100,
      loops: 1,
      afterPublish: async (client, dispatches) => {
        if (killedBatch.length) return;
        killedBatch = dispatches.map((d) => d.attemptId);
        void victim?.stop();
        // The process dies between publishing and committing: its connection goes away, the claim rolls back.
        (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
        throw new Error('killed');
      },
    });
    await waitFor(() => killedBatch.length > 0, { what: 'victim published a batch' });
    await victim.stop();
    expect((await stepsOf(ids)).filter((s) => s.status !== 'scheduled')).toHaveLength(0);

    const survivor = await replica(bus, { batchSize: 100 });
    await waitFor(async () => (await stepsOf(ids)).every((s) => s.status === 'sent'), { what: 'all steps sent after restart', timeoutMs: 15_000 }).catch(async (err) => {
      const st = await stepsOf(ids);
      console.log(survivor.dispatchedCount, JSON.stringify(st.reduce((m: Record<string, number>, s) => ({ ...m, [s.status]: (m[s.status] ?? 0) + 1 }), {})), sender.received.filter((s) => s.recipient?.email.startsWith('crash-')).length);
      throw err;
    });
    await survivor.stop();
    const steps = await stepsOf(ids);
    expect(steps.every((s) => s.attempt === 1)).toBe(true);
    // Every attempt id of the killed batch that was published again was dropped by the stream as a duplicate.
    expect(killedBatch).toHaveLength(100);
    const repeats = log.filter((l) => killedBatch.includes(l.msgId));
    expect(repeats.filter((l) => !l.duplicate)).toHaveLength(100);
    expect(new Set(log.filter((l) => !l.duplicate).map((l) => l.msgId)).size).toBe(log.filter((l) => !l.duplicate).length);
    const delivered = sender.received.filter((s) => s.recipient?.email.startsWith('crash-'));
    expect(delivered).toHaveLength(300);
    expect(new Set(delivered.map((d) => d.stepId)).size).toBe(300);
  });

  it('a recipient another transaction holds waits for a later round; the others go now', async () => {
    const ids = await startCascades(1, 20, 'held');
    const { rows: held } = await h.pool.query<{ id: string }>('SELECT id FROM recipients WHERE cascade_id = $1 ORDER BY position LIMIT 1', [ids[0]]);
    // A rating or a result being applied holds the recipient row, as this transaction does.
    const holder = await h.pool.connect();
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM recipients WHERE id = $1 FOR UPDATE', [held[0].id]);
    const d = await replica(h.tb.bus, { batchSize: 50 });
    try {
      await waitFor(async () => (await stepsOf(ids)).filter((s) => s.status === 'sent').length === 19, { what: 'the 19 free recipients sent', timeoutMs: 10_000 });
      const { rows: waiting } = await h.pool.query<{ status: string; attempt: number }>('SELECT status, attempt FROM recipient_steps WHERE recipient_id = $1 AND step_order = 1', [held[0].id]);
      expect(waiting).toEqual([{ status: 'scheduled', attempt: 0 }]);
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    await waitFor(async () => (await stepsOf(ids)).every((s) => s.status === 'sent'), { what: 'the held recipient sent once released', timeoutMs: 10_000 });
    await d.stop();
    expect((await stepsOf(ids)).every((s) => s.attempt === 1)).toBe(true);
  });

  it('waits for beforeRound (results first) before each claim', async () => {
    const ids = await startCascades(1, 10, 'gated');
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    let asked = 0;
    const d = await replica(h.tb.bus, {
      batchSize: 50,
      beforeRound: () => {
        asked++;
        return gate;
      },
    });
    await waitFor(() => asked > 0, { what: 'the dispatcher asking to start a round' });
    await new Promise((r) => setTimeout(r, 300));
    expect((await stepsOf(ids)).every((s) => s.status === 'scheduled')).toBe(true);
    open();
    await waitFor(async () => (await stepsOf(ids)).every((s) => s.status === 'sent'), { what: 'the steps sent once the gate opened', timeoutMs: 10_000 });
    await d.stop();
  });

  it('one single-recipient cascade is one claim: its notification wakes one claim loop, and a round with room left asks for the next due time instead of claiming again', async () => {
    let rounds = 0;
    const d = await replica(h.tb.bus, { batchSize: 50, loops: 2, beforeRound: async () => void rounds++ });
    // A first cascade through: both loops have had their first rounds (a cold first claim can take
    // hundreds of ms) and are asleep once its result is applied, after a moment to settle.
    const first = await startCascades(1, 1, 'single-first');
    await waitFor(async () => (await stepsOf(first)).every((s) => s.status === 'sent'), { what: 'the first step sent', timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 300));
    const before = rounds;
    const ids = await startCascades(1, 1, 'single');
    await waitFor(async () => (await stepsOf(ids)).every((s) => s.status === 'sent'), { what: 'the step sent', timeoutMs: 10_000 });
    // On the code before, the other loop's round (woken too) and the first one's round again came at once,
    // and the other loop's third within the contention wait (20 ms): it had seen the step still due under
    // the first one's lock.
    await new Promise((r) => setTimeout(r, 300));
    expect(rounds - before).toBe(1);
    await d.stop();
  });

  it('a round with room left reads the next due time after its COMMIT, in the same request, not in one of its own', async () => {
    const pg = await import('pg');
    // Calls through: records every request any client of this process sends.
    const spy = jest.spyOn(pg.default.Client.prototype, 'query');
    const requests = () => spy.mock.calls.map(([config]) => (typeof config === 'string' ? config : (config as { text?: string })?.text ?? ''));
    try {
      const d = await replica(h.tb.bus, { batchSize: 50 });
      const ids = await startCascades(1, 1, 'next-due');
      await waitFor(async () => (await stepsOf(ids)).every((s) => s.status === 'sent'), { what: 'the step sent', timeoutMs: 10_000 });
      await d.stop();
      const nextDueReads = requests().filter((text) => text.includes('min(due_at)'));
      expect(nextDueReads.length).toBeGreaterThan(0);
      // On the code before, each was a request of its own after the round's COMMIT.
      expect(nextDueReads.filter((text) => !/COMMIT;\s*SELECT/.test(text))).toEqual([]);
    } finally {
      spy.mockRestore();
    }
  });

  it('stops promptly while a round waits for beforeRound', async () => {
    const d = await replica(h.tb.bus, { batchSize: 50, beforeRound: () => new Promise<void>(() => undefined) });
    const started = Date.now();
    await d.stop();
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
