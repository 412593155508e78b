import { BusError } from '../src/bus';
import { describeEachBus, enc, sleep, unique, waitFor } from './busHarness';

/** The bus contract, both transports: `publishBatch`. */

describeEachBus(({ bus, collect, pending }) => {
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
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: subject, concurrency: 8 });
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
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: subject, concurrency: 1 });
    await waitFor('sentinel', () => got.some((d) => d.data === 'sentinel'));
    expect(got.map((d) => d.data)).toEqual(['earlier', 'b', 'sentinel']);
  });

  test('publishBatch: headers round-trip per message, across both streams', async () => {
    const name = unique('batchheaders');
    const steps = await collect({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}` });
    const events = await collect({ stream: 'EVENTS', durable: name, filterSubject: `events.${name}.>` });
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
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: subject });
    await waitFor('sentinel', () => got.length === 1);
    await sleep(200);
    expect(got.map((d) => d.data)).toEqual(['sentinel']);
  });

  test('publishBatch: an empty batch resolves to []', async () => {
    await expect(bus().publishBatch([])).resolves.toEqual([]);
  });
});
