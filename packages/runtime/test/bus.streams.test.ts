import { BusError } from '../src/bus';
import { deferred, describeEachBus, enc, sleep, unique, waitFor } from './busHarness';

/** The bus contract, both transports: the two streams' retention, headers, subjects, drain and close. */

describeEachBus(({ impl, bus, consume, collect, pending }) => {
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

  test('work queue: pending counts messages waiting behind a full consumer, not messages of other subjects', async () => {
    const name = unique('backlog');
    const gate = deferred();
    let started = 0;
    await consume({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}`, concurrency: 1 }, async (m) => {
      started++;
      await gate.promise;
      m.ack();
    });
    for (let i = 0; i < 4; i++) {
      await bus().publish(`steps.${name}`, enc(String(i)));
      await bus().publish(`steps.${name}other`, enc(String(i)));
    }
    await waitFor('one in flight', () => started === 1);
    // One in flight, three waiting; the other subject's messages are not this consumer's.
    expect(await pending(name)).toBe(4);
    gate.resolve();
    await waitFor('pending 0', async () => (await pending(name)) === 0);
    expect(started).toBe(4);
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
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}` });
    await bus().publish(`steps.${name}`, enc('x'), { msgId: `${name}-id`, headers: { 'X-Trace-Id': 'trace-1', tenant: 'acme' } });
    await waitFor('delivery', () => got.length === 1);
    expect(got[0].headers).toEqual({ 'X-Trace-Id': 'trace-1', tenant: 'acme', 'Nats-Msg-Id': `${name}-id` });
    await expect(bus().publish(`steps.${name}`, enc('x'), { headers: { 'bad:name': 'v' } })).rejects.toBeInstanceOf(BusError);
  });

  test('subjects: both transports refuse and accept the same subjects and filters', async () => {
    const name = unique('subjects');
    const refused = ['', '>', 'steps', 'events', 'steps.', `.steps.${name}`, `steps..${name}`, `steps.${name} x`, `steps.${name}\tx`, `steps.${name}\nx`];
    refused.push('steps.*', 'steps.>', `steps.${name}*`, `steps.${name}.a>b`, `elsewhere.${name}`, `STEPS.${name}`, `stepsx.${name}`);
    for (const subject of refused) {
      const why = `subject ${subject} is not within the bus streams (steps.>, events.>, ratings.>)`;
      await expect(bus().publish(subject, enc('x'))).rejects.toThrow(why);
      await expect(bus().publishBatch([{ subject, data: enc('x') }])).rejects.toThrow(why);
    }
    const refusedFilters = ['>', '*.x', `steps.>.${name}`, `steps.${name}*`, `steps.${name}.a b`, `steps..${name}`];
    for (const [i, filterSubject] of refusedFilters.entries()) {
      await expect(bus().consume({ stream: 'STEPS', durable: `${name}f${i}`, filterSubject }, async (m) => m.ack())).rejects.toBeInstanceOf(BusError);
      await expect(pending(`${name}f${i}`)).rejects.toBeInstanceOf(BusError);
    }
    await expect(bus().consume({ stream: 'STEPS', durable: `${name}e`, filterSubject: `events.${name}.>` }, async (m) => m.ack())).rejects.toThrow(
      `filter events.${name}.> is not within stream STEPS`,
    );
    const oneLevel = await collect({ stream: 'STEPS', durable: `${name}star`, filterSubject: `steps.${name}.*` });
    const deeper = await collect({ stream: 'STEPS', durable: `${name}deep`, filterSubject: `steps.${name}.a.>` });
    await bus().publish(`steps.${name}.x`, enc('1'));
    await bus().publishBatch([
      { subject: `steps.${name}.a-b_c=9`, data: enc('2') },
      { subject: `steps.${name}.a.b`, data: enc('3') },
    ]);
    await bus().publish(`steps.${name}.a.b.c`, enc('4'));
    await waitFor('deliveries', () => oneLevel.length === 2 && deeper.length === 2);
    await sleep(200);
    expect(oneLevel.map((d) => [d.subject, d.data])).toEqual([
      [`steps.${name}.x`, '1'],
      [`steps.${name}.a-b_c=9`, '2'],
    ]);
    expect(deeper.map((d) => [d.subject, d.data])).toEqual([
      [`steps.${name}.a.b`, '3'],
      [`steps.${name}.a.b.c`, '4'],
    ]);
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
});
