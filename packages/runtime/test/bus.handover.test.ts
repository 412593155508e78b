import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { connectJetStreamBus, type Bus } from '../src/bus';
import { deleteStreams, describeEachBus, enc, NATS_URL, sleep, unique, waitFor } from './busHarness';

/**
 * A running handler keeps its message in progress, so the ack wait can be short: a message is not
 * redelivered while it is being worked on, and work a dead process had taken moves on within it.
 */

describeEachBus(({ bus, collect, pending }) => {
  test('a handler that runs for several ack waits keeps its message: it is delivered once', async () => {
    const name = unique('longrun');
    // Long enough that a loaded machine's event-loop stalls stay under the three quarters of it between
    // two keep-alives (every quarter); the handler still outlives it four times.
    const ackWaitMs = 1_000;
    const got = await collect({ stream: 'STEPS', durable: name, filterSubject: `steps.${name}`, ackWaitMs }, async (m) => {
      await sleep(ackWaitMs * 4);
      m.ack();
    });
    await bus().publish(`steps.${name}`, enc('x'));
    await waitFor('pending 0', async () => (await pending(name)) === 0, 10_000);
    expect(got).toHaveLength(1);
  });
});

/** The consumer that takes the message, in a process of its own that the test kills (SIGKILL). */
const CHILD = `
const { connectJetStreamBus } = require(${JSON.stringify(join(__dirname, '..', 'dist', 'bus'))});
(async () => {
  const [url, prefix, durable, subject] = process.argv.slice(1);
  const bus = await connectJetStreamBus({ url, prefix, name: 'handover-child' });
  await bus.consume({ stream: 'STEPS', durable, filterSubject: subject, concurrency: 1 }, async (m) => {
    process.stdout.write('took ' + m.seq + '\\n');
    await new Promise(() => undefined);
  });
  process.stdout.write('ready\\n');
})().catch((err) => { console.error(err); process.exit(1); });
`;

describe('jetstream: a consumer process killed mid-message', () => {
  const prefix = `t${randomBytes(5).toString('hex')}`;
  let bus: Bus;
  let child: ChildProcess | undefined;

  beforeAll(async () => {
    bus = await connectJetStreamBus({ url: NATS_URL, prefix, name: 'handover-test' });
    await bus.ensureStreams();
  });
  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await bus.close();
    await deleteStreams(NATS_URL, prefix);
  });

  test('another consumer of the durable gets its message within 5 s (the default ack wait), once', async () => {
    const durable = 'handover';
    const subject = 'steps.handover';
    const proc = spawn(process.execPath, ['-e', CHILD, NATS_URL, prefix, durable, subject], { stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    let out = '';
    proc.stdout!.on('data', (d) => (out += d));
    proc.stderr!.on('data', (d) => (out += d));
    await waitFor('child consuming', () => out.includes('ready'), 20_000);
    const { seq } = await bus.publish(subject, enc('work'), { msgId: 'work-1' });
    await waitFor('child took the message', () => out.includes(`took ${seq}`), 10_000);

    // The survivor joins the same durable (default ack wait), then the taker dies.
    const got: Array<{ seq: number; at: number; deliveryCount: number }> = [];
    const sub = await bus.consume({ stream: 'STEPS', durable, filterSubject: subject }, async (m) => {
      got.push({ seq: m.seq, at: Date.now(), deliveryCount: m.deliveryCount });
      m.ack();
    });
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGKILL');
    await exited;
    const killedAt = Date.now();
    await waitFor('the survivor got it', () => got.length === 1, 10_000);
    expect(got[0].seq).toBe(seq);
    expect(got[0].deliveryCount).toBe(2);
    expect(got[0].at - killedAt).toBeLessThan(5_000);
    await waitFor('pending 0', async () => (await bus.pending('STEPS', durable)) === 0, 5_000);
    expect(got).toHaveLength(1);
    await sub.drain();
  }, 60_000);
});
