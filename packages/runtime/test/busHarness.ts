import { randomBytes } from 'node:crypto';
import { connect } from 'nats';
import { connectJetStreamBus, createMemoryBus, type Bus, type BusError, type BusMessage, type BusOptions, type ConsumeOptions, type MessageHandler, type Subscription } from '../src/bus';

/**
 * The contract of `src/bus/types.ts` is one suite run against both transports: each `bus.*.test.ts`
 * file calls `describeEachBus` and gets a fresh bus per transport (a unique prefix on the shared NATS
 * server), with any error the bus reported and no test read failing the test.
 */

export const NATS_URL = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

export interface Harness {
  bus: Bus;
  errors: BusError[];
  teardown(): Promise<void>;
}

export interface Implementation {
  name: 'memory' | 'jetstream';
  setup(options?: Pick<BusOptions, 'duplicateWindowMs'>): Promise<Harness>;
}

export const implementations: Implementation[] = [
  {
    name: 'memory',
    async setup(options = {}) {
      const errors: BusError[] = [];
      const bus = createMemoryBus({ ...options, prefix: 'mem', onError: (e) => errors.push(e) });
      return { bus, errors, teardown: () => bus.close() };
    },
  },
  {
    name: 'jetstream',
    async setup(options = {}) {
      // A fresh prefix per run: no test can see streams, durables or buckets left by an earlier run.
      const prefix = `t${randomBytes(5).toString('hex')}`;
      const errors: BusError[] = [];
      const bus = await connectJetStreamBus({ ...options, url: NATS_URL, prefix, name: 'bus-contract-test', onError: (e) => errors.push(e) });
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

export async function deleteStreams(url: string, prefix: string): Promise<void> {
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
export const enc = (s: string): Uint8Array => encoder.encode(s);
export const dec = (b: Uint8Array): string => decoder.decode(b);
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `condition` until it holds; fails with `what` after `timeoutMs`. */
export async function waitFor(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

export interface Delivery {
  subject: string;
  seq: number;
  deliveryCount: number;
  data: string;
  headers: Record<string, string>;
  at: number;
}

export const record = (m: BusMessage): Delivery => ({
  subject: m.subject,
  seq: m.seq,
  deliveryCount: m.deliveryCount,
  data: dec(m.data),
  headers: { ...m.headers },
  at: Date.now(),
});

let counter = 0;
/** A name no other test uses: work-queue durables may not share subjects. */
export const unique = (base: string): string => `${base}${++counter}`;

export interface BusUnderTest {
  impl: Implementation;
  bus(): Bus;
  /** Consumes until the test ends (drained after each test). */
  consume(...args: Parameters<Bus['consume']>): Promise<Subscription>;
  /** Consumes until the test ends, recording every delivery before `settle` (default: ack) handles it. */
  collect(options: ConsumeOptions, settle?: MessageHandler | ((m: BusMessage) => void)): Promise<Delivery[]>;
  pending(durable: string, stream?: 'STEPS' | 'EVENTS'): Promise<number>;
  /** Errors the bus reported to `onError`, cleared on read; any left unread fail the test. */
  takeErrors(): BusError[];
}

/** Runs `body` once per transport, each on a bus of its own set up before the first test. */
export function describeEachBus(body: (t: BusUnderTest) => void): void {
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
    const collect = async (options: ConsumeOptions, settle: MessageHandler | ((m: BusMessage) => void) = (m) => m.ack()): Promise<Delivery[]> => {
      const got: Delivery[] = [];
      await consume(options, async (m) => {
        got.push(record(m));
        await settle(m);
      });
      return got;
    };
    const pending = (durable: string, stream: 'STEPS' | 'EVENTS' = 'STEPS'): Promise<number> => bus().pending(stream, durable);
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

    body({ impl, bus, consume, collect, pending, takeErrors });
  });
}
