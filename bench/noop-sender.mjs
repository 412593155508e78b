#!/usr/bin/env node
// Child process of bench/dispatch.mjs and bench/lateness.mjs: a no-op channel sender on JetStream, as a
// separate process like a real sender service. Takes `steps.<channel>`, answers SENT on `steps.result`.
// Env: NATS_URL (loopback), BENCH_PREFIX, BENCH_CHANNEL (default email).
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { connectJetStreamBus } = require('@rrs/runtime');
const { busV1, STEP_RESULT_SUBJECT } = require('@rrs/proto');

const bus = await connectJetStreamBus({ url: process.env.NATS_URL ?? 'nats://127.0.0.1:4222', prefix: process.env.BENCH_PREFIX, name: 'bench-noop-sender' });
const channel = process.env.BENCH_CHANNEL ?? 'email';
const sub = await bus.consume({ stream: 'STEPS', durable: `bench-noop-${channel}`, filterSubject: `steps.${channel}`, concurrency: 1024 }, async (msg) => {
  const s = busV1.StepDue.decode(msg.data);
  const body = busV1.StepResult.encode({ stepId: s.stepId, attemptId: s.attemptId, channel: s.channel, outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, reason: '', providerMessageId: '', parts: 1, at: new Date(), organizationId: s.organizationId }).finish();
  await bus.publish(STEP_RESULT_SUBJECT, body, { msgId: `${s.attemptId}:SENT` });
  msg.ack();
});
process.send('ready');
process.on('message', async (m) => {
  if (m === 'stop') {
    await sub.drain();
    await bus.close();
    process.exit(0);
  }
});
