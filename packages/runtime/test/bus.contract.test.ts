import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'nats';
import { BusError, connectJetStreamBus, createMemoryBus, type Bus, type BusMessage, type KvEntry, type Subscription } from '../src/bus';

/** The contract of `src/bus/types.ts`, run against both implementations. */

const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

interface Harness {
  bus: Bus;
  errors: BusError[];
  teardown(): Promise<void>;
}

interface Implementation {
  name: 'memory' | 'jetstream';
  setup(): Promise<Harness>;
}

const implementations: Implementation[] = [
  {
    name: 'memory',
    async setup() {
      const errors: BusError[] = [];
      const bus = createMemoryBus({ prefix: 'mem', onError: (e) => errors.push(e) });
      return { bus, errors, teardown: () => bus.close() };
    },
  },
  {
    name: 'jetstream',
    async setup() {
      // A fresh prefix per run: no test can see streams, durables or buckets left by an earlier run.
      const prefix = `t${randomBytes(5).toString('hex')}`;
      const errors: BusError[] = [];
      const bus = await connectJetStreamBus({ url: NATS_URL, prefix, name: 'bus-contract-test', onError: (e) => errors.push(e) });
      return {
        bus,
        errors,
        teardown: async () => {
          await bus.close();
          await deleteStreams(NATS_URL, prefix);
        },
      };
    },
  },
];

async function deleteStreams(url: string, prefix: string): Promise<void> {
  const nc = await connect({ servers: url });
  try {
    const jsm = await nc.jetstreamManager();
    const doomed: string[] = [];
    for await (const name of jsm.streams.names()) {
      if (name.startsWith(`${prefix.toUpperCase()}_`) || name.startsWith(`KV_${prefix}_`)) doomed.push(name);
    }
    await Promise.all(doomed.map((name) => jsm.streams.delete(name)));
  } finally {
    await nc.close();
  }
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const enc = (s: string): Uint8Array => encoder.encode(s);
const dec = (b: Uint8Array): string => decoder.decode(b);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `condition` until it holds; fails with `what` after `timeoutMs`. */
async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

interface Delivery {
  subject: string;
  seq: number;
  deliveryCount: number;
  data: string;
  headers: Record<string, string>;
  at: number;
}

const record = (m: BusMessage): Delivery => ({
  subject: m.subject,
  seq: m.seq,
  deliveryCount: m.deliveryCount,
  data: dec(m.data),
  headers: { ...m.headers },
  at: Date.now(),
});

let counter = 0;
/** A name no other test uses: work-queue durables may not share subjects. */
const unique = (base: string): string => `${base}${++counter}`;

describe.each(implementations)('$name bus', (impl) => {
  let harness: Harness | undefined;
  let subs: Subscription[] = [];
  const bus = (): Bus => {
    if (!harness) throw new Error('bus not set up');
    return harness.bus;
  };
  const consume = async (...args: Parameters<Bus['consume']>): Promise<Subscription> => {
    const sub = await bus().consume(...args);
    subs.push(sub);
    return sub;
  };
  const pending = (durable: string, stream: 'STEPS' | 'EVENTS' = 'STEPS'): Promise<number> => bus().pending(stream, durable);
  /** Errors the bus reported to `onError`, cleared on read; any left unread fail the test. */
  const takeErrors = (): BusError[] => harness?.errors.splice(0) ?? [];

  beforeAll(async () => {
    harness = await impl.setup();
    await harness.bus.ensureStreams();
  });

  afterEach(async () => {
    await Promise.all(subs.map((s) => s.drain()));
    subs = [];
    expect(takeErrors().map((e) => e.message)).toEqual([]);
  });

  afterAll(async () => {
    await harness?.teardown();
  });

  test('publish → consume → ack', async () => {
    const name = unique('basic');
    const ack = await bus().publish(`steps.${name}`, enc('hello'));
    expect(ack).toEqual({ stream: expect.stringMatching(/_STEPS$/), seq: expect.any(Number), duplicate: false });
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}` }, async (m) => {
      got.push(record(m));
      m.ack();
    });
    await waitFor('delivery', () => got.length === 1);
    expect(got[0]).toMatchObject({ subject: `steps.${name}`, data: 'hello', deliveryCount: 1, seq: ack.seq, headers: {} });
    await waitFor('pending 0', async () => (await pending(name)) === 0);
  });

  test('msgId dedupe: second publish is answered duplicate and never delivered', async () => {
    const name = unique('dedupe');
    const subject = `steps.${name}`;
    const first = await bus().publish(subject, enc('one'), { msgId: `${name}-a` });
    const again = await bus().publish(subject, enc('two'), { msgId: `${name}-a` });
    expect(first.duplicate).toBe(false);
    expect(again).toEqual({ stream: first.stream, seq: first.seq, duplicate: true });
    await bus().publish(subject, enc('sentinel'), { msgId: `${name}-b` });
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: subject, concurrency: 1 }, async (m) => {
      got.push(record(m));
      m.ack();
    });
    await waitFor('sentinel', () => got.some((d) => d.data === 'sentinel'));
    expect(got.map((d) => d.data)).toEqual(['one', 'sentinel']);
  });

  test('nak(delay) redelivers after roughly the delay, deliveryCount 2', async () => {
    const name = unique('nak');
    const delayMs = 700;
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}` }, async (m) => {
      got.push(record(m));
      if (m.deliveryCount === 1) m.nak(delayMs);
      else m.ack();
    });
    await bus().publish(`steps.${name}`, enc('x'));
    await waitFor('redelivery', () => got.length === 2);
    const gap = got[1].at - got[0].at;
    expect(gap).toBeGreaterThanOrEqual(delayMs - 50);
    expect(gap).toBeLessThan(delayMs + 1_500);
    expect(got[1]).toMatchObject({ seq: got[0].seq, deliveryCount: 2 });
    await waitFor('pending 0', async () => (await pending(name)) === 0);
  });

  test('term is never redelivered', async () => {
    const name = unique('term');
    const ackWaitMs = 300;
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}`, ackWaitMs }, async (m) => {
      got.push(record(m));
      m.term('unprocessable');
    });
    await bus().publish(`steps.${name}`, enc('x'));
    await waitFor('delivery', () => got.length === 1);
    await waitFor('pending 0', async () => (await pending(name)) === 0);
    await sleep(ackWaitMs * 2);
    expect(got).toHaveLength(1);
  });

  test('settling twice is harmless: the first settlement wins', async () => {
    const name = unique('twice');
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}` }, async (m) => {
      got.push(record(m));
      if (m.deliveryCount === 1) {
        m.nak(0);
        m.ack();
        m.term();
      } else {
        m.ack();
        m.nak(0);
      }
    });
    await bus().publish(`steps.${name}`, enc('x'));
    await waitFor('redelivery', () => got.length === 2);
    await waitFor('pending 0', async () => (await pending(name)) === 0);
    expect(got.map((d) => d.deliveryCount)).toEqual([1, 2]);
  });

  test('a handler that throws without settling is redelivered after defaultNakDelayMs', async () => {
    const name = unique('throw');
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}`, defaultNakDelayMs: 100 }, async (m) => {
      got.push(record(m));
      if (m.deliveryCount === 1) throw new Error('boom');
      m.ack();
    });
    await bus().publish(`steps.${name}`, enc('x'));
    await waitFor('redelivery', () => got.length === 2);
    expect(got[1]).toMatchObject({ seq: got[0].seq, deliveryCount: 2 });
    expect(got[1].at - got[0].at).toBeGreaterThanOrEqual(90);
    await waitFor('pending 0', async () => (await pending(name)) === 0);
    const errors = takeErrors();
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(BusError);
    expect(errors[0].message).toContain('boom');
  });

  test('maxDeliver is respected (nak and throw alike)', async () => {
    const name = unique('maxdel');
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}.>`, maxDeliver: 3, defaultNakDelayMs: 0 }, async (m) => {
      got.push(record(m));
      if (m.subject.endsWith('.throws')) throw new Error('always fails');
      m.nak(0);
    });
    await bus().publish(`steps.${name}.naks`, enc('nak'));
    await bus().publish(`steps.${name}.throws`, enc('throw'));
    await waitFor('three deliveries each', () => got.length === 6);
    await waitFor('pending 0', async () => (await pending(name)) === 0);
    await sleep(300);
    expect(got).toHaveLength(6);
    for (const data of ['nak', 'throw']) {
      expect(got.filter((d) => d.data === data).map((d) => d.deliveryCount)).toEqual([1, 2, 3]);
    }
    expect(takeErrors()).toHaveLength(3);
  });

  test('an unsettled message is redelivered when ackWaitMs expires', async () => {
    const name = unique('ackwait');
    const ackWaitMs = 500;
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}`, ackWaitMs }, async (m) => {
      got.push(record(m));
      if (m.deliveryCount > 1) m.ack();
    });
    await bus().publish(`steps.${name}`, enc('x'));
    await waitFor('redelivery', () => got.length === 2);
    expect(got[1]).toMatchObject({ seq: got[0].seq, deliveryCount: 2 });
    expect(got[1].at - got[0].at).toBeGreaterThanOrEqual(ackWaitMs - 50);
    await waitFor('pending 0', async () => (await pending(name)) === 0);
  });

  test('working() extends the ack deadline', async () => {
    const name = unique('working');
    const ackWaitMs = 400;
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}`, ackWaitMs }, async (m) => {
      got.push(record(m));
      for (let i = 0; i < 4; i++) {
        await sleep(ackWaitMs / 2);
        m.working();
      }
      m.ack();
    });
    await bus().publish(`steps.${name}`, enc('x'));
    await waitFor('delivery', () => got.length === 1);
    await waitFor('pending 0', async () => (await pending(name)) === 0, 5_000);
    expect(got).toHaveLength(1);
  });

  test('competing consumers on one durable never get the same message', async () => {
    const name = unique('compete');
    const count = 200;
    const handledBy = new Map<number, string[]>();
    const handler = (who: string) => async (m: BusMessage) => {
      handledBy.set(m.seq, [...(handledBy.get(m.seq) ?? []), who]);
      await new Promise((resolve) => setImmediate(resolve));
      m.ack();
    };
    const options = { stream: 'STEPS' as const, durable: name, filterSubject: `steps.${name}`, concurrency: 4 };
    await consume(options, handler('a'));
    await consume(options, handler('b'));
    const acks = await Promise.all(Array.from({ length: count }, (_, i) => bus().publish(`steps.${name}`, enc(String(i)))));
    await waitFor('all handled', () => handledBy.size === count, 15_000);
    await waitFor('pending 0', async () => (await pending(name)) === 0);
    expect([...handledBy.keys()].sort((x, y) => x - y)).toEqual(acks.map((a) => a.seq).sort((x, y) => x - y));
    expect([...handledBy.values()].filter((who) => who.length !== 1)).toEqual([]);
    const perConsumer = (who: string): number => [...handledBy.values()].filter((w) => w[0] === who).length;
    expect(perConsumer('a')).toBeGreaterThan(0);
    expect(perConsumer('b')).toBeGreaterThan(0);
  });

  test('at most `concurrency` handlers run at once', async () => {
    const name = unique('conc');
    let active = 0;
    let maxActive = 0;
    let done = 0;
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}`, concurrency: 3 }, async (m) => {
      active++;
      maxActive = Math.max(maxActive, active);
      await sleep(30);
      active--;
      done++;
      m.ack();
    });
    await Promise.all(Array.from({ length: 10 }, (_, i) => bus().publish(`steps.${name}`, enc(String(i)))));
    await waitFor('all handled', () => done === 10);
    expect(maxActive).toBe(3);
  });

  test('work queue: pending counts in-flight messages, and an acked message is gone', async () => {
    const name = unique('wq');
    const gate = deferred();
    let started = 0;
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}` }, async (m) => {
      started++;
      await gate.promise;
      m.ack();
    });
    for (let i = 0; i < 3; i++) await bus().publish(`steps.${name}`, enc(String(i)));
    await waitFor('three in flight', () => started === 3);
    expect(await pending(name)).toBe(3);
    gate.resolve();
    await waitFor('pending 0', async () => (await pending(name)) === 0);
    expect(started).toBe(3);
  });

  test('work queue: a second durable with an overlapping filter is rejected', async () => {
    const name = unique('overlap');
    await consume({ stream: 'STEPS', durable: `${name}a`, filterSubject: `steps.${name}.>` }, async (m) => m.ack());
    await expect(bus().consume({ stream: 'STEPS', durable: `${name}b`, filterSubject: `steps.${name}.x` }, async (m) => m.ack())).rejects.toBeInstanceOf(
      BusError,
    );
  });

  test('EVENTS: two durables each receive every event, including those published before they existed', async () => {
    const name = unique('events');
    const published: number[] = [];
    for (let i = 0; i < 3; i++) published.push((await bus().publish(`events.${name}.happened`, enc(String(i)))).seq);
    const seen: Record<string, number[]> = { a: [], b: [] };
    for (const who of ['a', 'b']) {
      await consume({ stream: 'EVENTS', durable: `${name}${who}`, filterSubject: `events.${name}.>` }, async (m) => {
        seen[who].push(m.seq);
        m.ack();
      });
    }
    await waitFor('early events', () => seen.a.length === 3 && seen.b.length === 3);
    for (let i = 3; i < 5; i++) published.push((await bus().publish(`events.${name}.happened`, enc(String(i)))).seq);
    await waitFor('all events', () => seen.a.length === 5 && seen.b.length === 5);
    expect(seen.a.sort((x, y) => x - y)).toEqual(published);
    expect(seen.b.sort((x, y) => x - y)).toEqual(published);
    await waitFor('pending 0', async () => (await pending(`${name}a`, 'EVENTS')) === 0 && (await pending(`${name}b`, 'EVENTS')) === 0);
  });

  test('headers round-trip', async () => {
    const name = unique('headers');
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}` }, async (m) => {
      got.push(record(m));
      m.ack();
    });
    await bus().publish(`steps.${name}`, enc('x'), { msgId: `${name}-id`, headers: { 'X-Trace-Id': 'trace-1', tenant: 'acme' } });
    await waitFor('delivery', () => got.length === 1);
    expect(got[0].headers).toEqual({ 'X-Trace-Id': 'trace-1', tenant: 'acme', 'Nats-Msg-Id': `${name}-id` });
    await expect(bus().publish(`steps.${name}`, enc('x'), { headers: { 'bad:name': 'v' } })).rejects.toBeInstanceOf(BusError);
  });

  test('publishBatch: every message is stored and delivered exactly once, acks in input order', async () => {
    const name = unique('batch');
    const subject = `steps.${name}`;
    const count = 50;
    const acks = await bus().publishBatch(
      Array.from({ length: count }, (_, i) => ({ subject, data: enc(String(i)), options: { msgId: `${name}-${i}` } })),
    );
    expect(acks).toHaveLength(count);
    for (const ack of acks) expect(ack).toEqual({ stream: expect.stringMatching(/_STEPS$/), seq: expect.any(Number), duplicate: false });
    for (let i = 1; i < count; i++) expect(acks[i].seq).toBeGreaterThan(acks[i - 1].seq);
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: subject, concurrency: 8 }, async (m) => {
      got.push(record(m));
      m.ack();
    });
    await waitFor('every delivery', () => got.length === count);
    await waitFor('pending 0', async () => (await pending(name)) === 0);
    await sleep(200);
    expect(got).toHaveLength(count);
    expect(got.every((d) => d.deliveryCount === 1)).toBe(true);
    const bySeq = new Map(got.map((d) => [d.seq, d.data]));
    expect(acks.map((a) => bySeq.get(a.seq))).toEqual(Array.from({ length: count }, (_, i) => String(i)));
  });

  test('publishBatch: msgId dedupe within the batch and against an earlier publish', async () => {
    const name = unique('batchdedupe');
    const subject = `steps.${name}`;
    const earlier = await bus().publish(subject, enc('earlier'), { msgId: `${name}-a` });
    const acks = await bus().publishBatch([
      { subject, data: enc('again'), options: { msgId: `${name}-a` } },
      { subject, data: enc('b'), options: { msgId: `${name}-b` } },
      { subject, data: enc('b again'), options: { msgId: `${name}-b` } },
      { subject, data: enc('sentinel'), options: { msgId: `${name}-c` } },
    ]);
    expect(acks.map((a) => a.duplicate)).toEqual([true, false, true, false]);
    expect(acks[0]).toEqual({ stream: earlier.stream, seq: earlier.seq, duplicate: true });
    expect(acks[2].seq).toBe(acks[1].seq);
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: subject, concurrency: 1 }, async (m) => {
      got.push(record(m));
      m.ack();
    });
    await waitFor('sentinel', () => got.some((d) => d.data === 'sentinel'));
    expect(got.map((d) => d.data)).toEqual(['earlier', 'b', 'sentinel']);
  });

  test('publishBatch: headers round-trip per message, across both streams', async () => {
    const name = unique('batchheaders');
    const steps: Delivery[] = [];
    const events: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}` }, async (m) => {
      steps.push(record(m));
      m.ack();
    });
    await consume({ stream: 'EVENTS', durable: name, filterSubject: `events.${name}.>` }, async (m) => {
      events.push(record(m));
      m.ack();
    });
    const acks = await bus().publishBatch([
      { subject: `steps.${name}`, data: enc('one'), options: { msgId: `${name}-1`, headers: { 'X-Trace-Id': 'trace-1', tenant: 'acme' } } },
      { subject: `events.${name}.happened`, data: enc('two'), options: { headers: { tenant: 'globex' } } },
      { subject: `steps.${name}`, data: enc('three') },
    ]);
    expect(acks.map((a) => a.stream.slice(a.stream.lastIndexOf('_')))).toEqual(['_STEPS', '_EVENTS', '_STEPS']);
    await waitFor('deliveries', () => steps.length === 2 && events.length === 1);
    const steps1 = steps.find((d) => d.data === 'one');
    const steps3 = steps.find((d) => d.data === 'three');
    expect(steps1?.headers).toEqual({ 'X-Trace-Id': 'trace-1', tenant: 'acme', 'Nats-Msg-Id': `${name}-1` });
    expect(steps3?.headers).toEqual({});
    expect(events[0]).toMatchObject({ subject: `events.${name}.happened`, data: 'two', headers: { tenant: 'globex' }, seq: acks[1].seq });
    await waitFor('pending 0', async () => (await pending(name)) === 0 && (await pending(name, 'EVENTS')) === 0);
  });

  test('publishBatch: one invalid message rejects the batch with nothing published', async () => {
    const name = unique('batchinvalid');
    const subject = `steps.${name}`;
    const outside = bus().publishBatch([
      { subject, data: enc('x'), options: { msgId: `${name}-x` } },
      { subject: 'elsewhere.x', data: enc('y') },
    ]);
    await expect(outside).rejects.toBeInstanceOf(BusError);
    await expect(outside).rejects.toThrow('elsewhere.x');
    await expect(bus().publishBatch([{ subject, data: enc('x') }, { subject: 'steps.*', data: enc('y') }])).rejects.toBeInstanceOf(BusError);
    await expect(bus().publishBatch([{ subject, data: enc('x') }, { subject, data: enc('y'), options: { headers: { 'bad:name': 'v' } } }])).rejects.toBeInstanceOf(
      BusError,
    );
    // The msgId of the rejected batch was never taken: the same id is stored now.
    expect((await bus().publish(subject, enc('sentinel'), { msgId: `${name}-x` })).duplicate).toBe(false);
    const got: Delivery[] = [];
    await consume({ stream: 'STEPS', durable: name, filterSubject: subject }, async (m) => {
      got.push(record(m));
      m.ack();
    });
    await waitFor('sentinel', () => got.length === 1);
    await sleep(200);
    expect(got.map((d) => d.data)).toEqual(['sentinel']);
  });

  test('publishBatch: an empty batch resolves to []', async () => {
    await expect(bus().publishBatch([])).resolves.toEqual([]);
  });

  test('drain waits for the in-flight handler and stops taking messages', async () => {
    const name = unique('drain');
    const gate = deferred();
    let started = 0;
    let finished = false;
    const sub = await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}` }, async (m) => {
      started++;
      await gate.promise;
      finished = true;
      m.ack();
    });
    await bus().publish(`steps.${name}`, enc('x'));
    await waitFor('handler started', () => started === 1);
    let drained = false;
    const draining = sub.drain().then(() => {
      drained = true;
    });
    await sleep(200);
    expect(drained).toBe(false);
    gate.resolve();
    await draining;
    expect(finished).toBe(true);
    await waitFor('pending 0', async () => (await pending(name)) === 0);
    await bus().publish(`steps.${name}`, enc('y'));
    await waitFor('pending 1', async () => (await pending(name)) === 1);
    await sleep(200);
    expect(started).toBe(1);
  });

  test('close waits for in-flight handlers, then rejects further use', async () => {
    const own = await impl.setup();
    try {
      const gate = deferred();
      let started = false;
      let finished = false;
      await own.bus.consume({ stream: 'STEPS', durable: 'closing', filterSubject: 'steps.closing' }, async (m) => {
        started = true;
        await gate.promise;
        finished = true;
        m.ack();
      });
      await own.bus.publish('steps.closing', enc('x'));
      await waitFor('handler started', () => started);
      const closing = own.bus.close();
      setTimeout(gate.resolve, 100);
      await closing;
      expect(finished).toBe(true);
      await expect(own.bus.publish('steps.closing', enc('y'))).rejects.toBeInstanceOf(BusError);
      expect(own.errors).toEqual([]);
    } finally {
      await own.teardown();
    }
  });

  test('invalid use fails with BusError', async () => {
    await expect(bus().publish('elsewhere.x', enc('x'))).rejects.toBeInstanceOf(BusError);
    await expect(bus().publish('steps.*', enc('x'))).rejects.toBeInstanceOf(BusError);
    await expect(pending(unique('nosuchdurable'))).rejects.toBeInstanceOf(BusError);
    await expect(bus().consume({ stream: 'EVENTS', durable: unique('wrong'), filterSubject: 'steps.x' }, async () => undefined)).rejects.toBeInstanceOf(
      BusError,
    );
  });

  test('KV: put, get, entries, delete and watch', async () => {
    const bucket = unique('kv');
    const kv = await bus().kv(bucket, { ttlMs: 60_000 });
    const changes: [string, string | null][] = [];
    const stop = await kv.watch((key, entry) => changes.push([key, entry ? dec(entry.value) : null]));
    const before = Date.now();
    const r1 = await kv.put('alpha', enc('1'));
    const r2 = await kv.put('beta', enc('2'));
    const r3 = await kv.put('alpha', enc('1b'));
    expect(r2).toBeGreaterThan(r1);
    expect(r3).toBeGreaterThan(r2);
    const alpha = (await kv.get('alpha')) as KvEntry;
    expect({ ...alpha, value: dec(alpha.value) }).toEqual({ key: 'alpha', value: '1b', revision: r3, createdAt: expect.any(Number) });
    expect(alpha.createdAt).toBeGreaterThanOrEqual(before - 1_000);
    expect(alpha.createdAt).toBeLessThanOrEqual(Date.now() + 1_000);
    expect(await kv.get('missing')).toBeNull();
    await kv.delete('beta');
    expect(await kv.get('beta')).toBeNull();
    const entries = await kv.entries();
    expect(entries.map((e) => [e.key, dec(e.value), e.revision])).toEqual([['alpha', '1b', r3]]);
    const sameBucket = await bus().kv(bucket, { ttlMs: 60_000 });
    expect((await sameBucket.entries()).map((e) => e.key)).toEqual(['alpha']);
    await waitFor('watch events', () => changes.length === 4);
    expect(changes).toEqual([
      ['alpha', '1'],
      ['beta', '2'],
      ['alpha', '1b'],
      ['beta', null],
    ]);
    stop();
    const later: string[] = [];
    const stopLater = await kv.watch((key) => later.push(key));
    await kv.put('gamma', enc('3'));
    await waitFor('second watcher sees gamma', () => later.includes('gamma'));
    stopLater();
    expect(changes).toHaveLength(4);
  });

  test('KV: entries expire after the bucket TTL', async () => {
    const ttlMs = 1_000;
    const kv = await bus().kv(unique('kvttl'), { ttlMs });
    const putAt = Date.now();
    await kv.put('short', enc('lived'));
    expect(await kv.get('short')).not.toBeNull();
    expect((await kv.entries()).map((e) => e.key)).toEqual(['short']);
    await waitFor('expiry', async () => (await kv.get('short')) === null, ttlMs + 3_000);
    expect(Date.now() - putAt).toBeGreaterThanOrEqual(ttlMs - 100);
    expect(await kv.entries()).toEqual([]);
  });
});

/** JetStream only: the bus's streams vanish while it runs (server state lost, or an operator deleted them). */
describe('jetstream bus whose streams were deleted behind its back', () => {
  const prefix = `t${randomBytes(5).toString('hex')}`;
  let bus: Bus | undefined;
  const errors: BusError[] = [];

  beforeAll(async () => {
    bus = await connectJetStreamBus({ url: NATS_URL, prefix, name: 'bus-contract-test', onError: (e) => errors.push(e) });
    await bus.ensureStreams();
  });

  afterAll(async () => {
    await bus?.close();
    await deleteStreams(NATS_URL, prefix);
  });

  test('publishBatch recreates the streams and stores the batch', async () => {
    const b = bus as Bus;
    // The ack subscription exists already, so only the streams are missing.
    await b.publishBatch([{ subject: 'steps.gone', data: enc('before') }]);
    await deleteStreams(NATS_URL, prefix);
    const acks = await b.publishBatch([
      { subject: 'steps.gone', data: enc('1'), options: { msgId: 'g1' } },
      { subject: 'events.gone.x', data: enc('2'), options: { msgId: 'g2' } },
      { subject: 'steps.gone', data: enc('3'), options: { msgId: 'g3' } },
    ]);
    const upper = prefix.toUpperCase();
    expect(acks).toEqual([
      { stream: `${upper}_STEPS`, seq: 1, duplicate: false },
      { stream: `${upper}_EVENTS`, seq: 1, duplicate: false },
      { stream: `${upper}_STEPS`, seq: 2, duplicate: false },
    ]);
    const nc = await connect({ servers: NATS_URL });
    try {
      const jsm = await nc.jetstreamManager();
      expect((await jsm.streams.info(`${upper}_STEPS`)).state.messages).toBe(2);
      expect((await jsm.streams.info(`${upper}_EVENTS`)).state.messages).toBe(1);
    } finally {
      await nc.close();
    }
    expect(errors).toEqual([]);
  });
});

/** Restarting a private server: a `consume()` must survive a short outage. JetStream only. */
describe('jetstream bus across a server restart', () => {
  let server: ChildProcess | undefined;
  let storeDir = '';
  let port = 0;
  let bus: Bus | undefined;
  const errors: BusError[] = [];

  const startServer = async (): Promise<void> => {
    const child = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], { stdio: 'ignore' });
    server = child;
    const exited = new Promise<never>((_, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`nats-server exited with ${code}`)));
    });
    const ready = waitFor('nats-server to accept connections', async () => {
      try {
        const nc = await connect({ servers: `nats://127.0.0.1:${port}` });
        await nc.close();
        return true;
      } catch {
        return false;
      }
    });
    await Promise.race([ready, exited]);
  };

  const stopServer = async (): Promise<void> => {
    const child = server;
    server = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  };

  /** SIGSTOP takes effect thread by thread; a server that still runs a thread could answer what is sent next. */
  const pauseServer = async (): Promise<void> => {
    const pid = server?.pid;
    if (!pid) throw new Error('no server to pause');
    process.kill(pid, 'SIGSTOP');
    await waitFor('every nats-server thread stopped', () => {
      try {
        return readdirSync(`/proc/${pid}/task`).every((tid) => /^\d+ \(.*\) [tT] /.test(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')));
      } catch {
        return false;
      }
    });
  };

  beforeAll(async () => {
    storeDir = mkdtempSync(join(tmpdir(), 'bus-restart-'));
    port = await freePort();
    await startServer();
    bus = await connectJetStreamBus({ url: `nats://127.0.0.1:${port}`, prefix: 'restart', onError: (e) => errors.push(e) });
  });

  afterAll(async () => {
    await bus?.close().catch(() => undefined);
    await stopServer();
    if (storeDir) rmSync(storeDir, { recursive: true, force: true });
  });

  test('consume keeps delivering after the server restarts', async () => {
    const b = bus as Bus;
    const got: string[] = [];
    const sub = await b.consume({ stream: 'STEPS', durable: 'survivor', filterSubject: 'steps.survivor' }, async (m) => {
      got.push(dec(m.data));
      m.ack();
    });
    await b.publish('steps.survivor', enc('before'));
    await waitFor('delivery before restart', () => got.length === 1);
    await stopServer();
    await startServer();
    // The client reconnects on its own; the publish waits for that instead of failing.
    await b.publish('steps.survivor', enc('after'));
    await waitFor('delivery after restart', () => got.includes('after'), 15_000);
    expect(got).toEqual(['before', 'after']);
    await sub.drain();
  });

  test('publishBatch fails after the ack timeout while the server does not answer; a retry is answered duplicate', async () => {
    const b = bus as Bus;
    const batch = ['t1', 't2', 't3'].map((id) => ({ subject: 'steps.stalled', data: enc(id), options: { msgId: id } }));
    await pauseServer();
    const startedAt = Date.now();
    try {
      await expect(b.publishBatch(batch)).rejects.toThrow(/3 of 3 messages not acknowledged/);
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(4_900);
    } finally {
      server?.kill('SIGCONT');
    }
    // The server stored the batch once it resumed; its late acks went nowhere.
    const acks = await b.publishBatch(batch);
    expect(acks.map((a) => a.duplicate)).toEqual([true, true, true]);
    expect(errors).toEqual([]);
  });

  test('publishBatch fails at once when the connection drops while acks are outstanding', async () => {
    const b = bus as Bus;
    const batch = [{ subject: 'steps.dropped', data: enc('x'), options: { msgId: 'd1' } }];
    await pauseServer();
    try {
      const publishing = b.publishBatch(batch);
      await sleep(200);
      const killedAt = Date.now();
      await stopServer();
      await expect(publishing).rejects.toThrow(/lost the connection to NATS/);
      expect(Date.now() - killedAt).toBeLessThan(2_000);
    } finally {
      if (server) server.kill('SIGCONT');
      else await startServer();
    }
    // The server died before reading the batch, so the retry stores it.
    expect(await b.publishBatch(batch)).toEqual([{ stream: 'RESTART_STEPS', seq: expect.any(Number), duplicate: false }]);
    expect(errors).toEqual([]);
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const found = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(found));
    });
  });
}
