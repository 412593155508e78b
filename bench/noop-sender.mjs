#!/usr/bin/env node
// Child process of bench/dispatch.mjs and bench/lateness.mjs: a no-op channel sender on JetStream, as a
// separate process like a real sender service. Takes `steps.<channel>` and `steps.<channel>.small`, answers SENT through the sender
// kit's result publisher (batches on `steps.result.batch`), as the real senders do.
// Env: NATS_URL (loopback), BENCH_PREFIX, BENCH_CHANNEL (default email).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { connectJetStreamBus } = require('@rrs/runtime');
const { busV1, stepSubjects } = require('@rrs/proto');
const { StepResultPublisher } = require('@rrs/sender-kit');

const bus = await connectJetStreamBus({ url: process.env.NATS_URL ?? 'nats://127.0.0.1:4222', prefix: process.env.BENCH_PREFIX, name: 'bench-noop-sender' });
const channel = process.env.BENCH_CHANNEL ?? 'email';
const results = new StepResultPublisher(bus);
// Both of the channel's subjects, bulk and small requests', as a real sender reads them.
const lanes = await Promise.all(stepSubjects(channel).map((lane) => bus.consume({ stream: 'STEPS', durable: `bench-noop-${lane.durable}`, filterSubject: lane.subject, concurrency: 1024 }, async (msg) => {
  const s = busV1.StepDue.decode(msg.data);
  await results.publish(s, { outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, parts: 1 });
  msg.ack();
})));
const sub = { drain: () => Promise.all(lanes.map((lane) => lane.drain())) };
// BENCH_PROFILE_OUT=<file>: a CPU profile of this process from ready to stop, to <file>.sender.
let profiler = null;
if (process.env.BENCH_PROFILE_OUT) {
  const { Session } = await import('node:inspector/promises');
  profiler = new Session();
  profiler.connect();
  await profiler.post('Profiler.enable');
  await profiler.post('Profiler.start');
}
process.send('ready');
process.on('message', async (m) => {
  if (m === 'stop') {
    if (profiler) {
      const { profile } = await profiler.post('Profiler.stop');
      (await import('node:fs')).writeFileSync(`${process.env.BENCH_PROFILE_OUT}.sender`, JSON.stringify(profile));
    }
    await sub.drain();
    await bus.close();
    process.exit(0);
  }
});
