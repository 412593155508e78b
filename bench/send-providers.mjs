#!/usr/bin/env node
// Child process of bench/send.mjs: the local providers of the distributed shape, in their own process
// so their CPU is counted apart from the services and the bench's HTTP client. BENCH_CHANNEL=EMAIL
// starts the SMTP sink, SMS the fake SMSC.ru API (both from packages/testkit, built). Over IPC: sends
// { ready, env } (the sender's provider variables) once listening; answers 'count' with { count }
// (messages accepted) and 'report' with every accepted message as [recipient, acceptedAt (epoch ms)].
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { startSmtpSink, startFakeSmsc } = require('../packages/testkit/dist/index.js');

const channel = process.env.BENCH_CHANNEL;
const accepted = [];
let provider;
let env;
if (channel === 'EMAIL') {
  provider = await startSmtpSink({ auth: { user: 'bench', pass: 'bench-secret' }, keepMessages: false, onMessage: (m) => accepted.push([m.to[0], m.acceptedAt]) });
  env = { SMTP_URL: provider.url };
} else if (channel === 'SMS') {
  provider = await startFakeSmsc({ login: 'bench', password: 'bench-secret', keepMessages: false, onMessage: (m) => accepted.push([m.phones[0], m.acceptedAt]) });
  env = { SMSC_URL: provider.url, SMSC_LOGIN: 'bench', SMSC_PASSWORD: 'bench-secret', SMSC_SENDER: 'BenchCoffee' };
} else {
  throw new Error(`BENCH_CHANNEL must be EMAIL or SMS, not ${channel}`);
}

process.on('message', async (m) => {
  if (m === 'count') process.send({ count: accepted.length });
  else if (m === 'report') process.send({ accepted });
  else if (m === 'stop') {
    await provider.close();
    process.exit(0);
  }
});
process.send({ ready: true, env });
