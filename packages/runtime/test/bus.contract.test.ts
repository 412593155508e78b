import { BusError, type BusMessage } from '../src/bus';
import { describeEachBus, enc, sleep, unique, waitFor } from './busHarness';

/** The bus contract (`src/bus/types.ts`), both transports: publish, deliver, and settle (ack, nak, term, ack wait, maxDeliver, dedupe). */

describeEachBus(({ impl, bus, consume, collect, pending, takeErrors }) => {
  test('publish → consume → ack', async () => {
    const name = unique('basic');
    const ack = await bus().publish(`steps.${name}`, enc('hello'));
    expect(ack).toEqual({ stream: expect.stringMatching(/_STEPS$/), seq: expect.any(Number), duplicate: false });
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}` });
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
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: subject, concurrency: 1 });
    await waitFor('sentinel', () => got.some((d) => d.data === 'sentinel'));
    expect(got.map((d) => d.data)).toEqual(['one', 'sentinel']);
  });

  test('msgId dedupe lasts the duplicate window, counted from the first publish; then the id is stored again', async () => {
    const windowMs = 1_000;
    const own = await impl.setup({ duplicateWindowMs: windowMs });
    try {
      const first = await own.bus.publish('steps.window', enc('one'), { msgId: 'w1' });
      const acceptedAt = Date.now();
      await sleep(windowMs / 2);
      expect(await own.bus.publish('steps.window', enc('two'), { msgId: 'w1' })).toEqual({ stream: first.stream, seq: first.seq, duplicate: true });
      // The duplicate did not restart the window.
      await sleep(acceptedAt + windowMs + 500 - Date.now());
      expect(await own.bus.publish('steps.window', enc('three'), { msgId: 'w1' })).toEqual({ stream: first.stream, seq: first.seq + 1, duplicate: false });
      expect(await own.bus.publish('steps.window', enc('four'), { msgId: 'w1' })).toEqual({ stream: first.stream, seq: first.seq + 1, duplicate: true });
      expect(own.errors).toEqual([]);
    } finally {
      await own.teardown();
    }
  });

  test('nak(delay) redelivers after roughly the delay, deliveryCount 2', async () => {
    const name = unique('nak');
    const delayMs = 700;
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}` }, async (m) => {
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
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}`, ackWaitMs }, (m) => m.term('unprocessable'));
    await bus().publish(`steps.${name}`, enc('x'));
    await waitFor('delivery', () => got.length === 1);
    await waitFor('pending 0', async () => (await pending(name)) === 0);
    await sleep(ackWaitMs * 2);
    expect(got).toHaveLength(1);
  });

  test('settling twice is harmless: the first settlement wins', async () => {
    const name = unique('twice');
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}` }, async (m) => {
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
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}`, defaultNakDelayMs: 100 }, async (m) => {
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
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}.>`, maxDeliver: 3, defaultNakDelayMs: 0 }, async (m) => {
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
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}`, ackWaitMs }, async (m) => {
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
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}`, ackWaitMs }, async (m) => {
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
});
