#!/usr/bin/env node
// Child process of bench/ping.mjs: serves one side of the comparison on a loopback port and reports it
// over IPC. `gateway`: contacts (gRPC, PostgreSQL) + the gateway with REDIS_URL, so GET /ping runs the
// real key check (cached in Redis) and the Redis rate limiter. `express`: a bare express hello-world.
// Answers `cpu` with the process's CPU time so far (µs), for the CPU per request of each side, and its
// garbage collections so far (count, total and longest pause in ms), for what the latency tail waits on.
import { createRequire } from 'node:module';
import { PerformanceObserver } from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const kind = process.argv[2];

async function bareExpress() {
  const express = require('express');
  const app = express();
  app.get('/ping', (_req, res) => res.send('Hello World!'));
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return { url: `http://127.0.0.1:${server.address().port}/ping`, headers: {}, stop: async () => server.close() };
}

async function gateway() {
  const { createLogger, Lifecycle, Health } = require('@rrs/runtime');
  const { startContacts } = require('@rrs/contacts');
  const { startGateway } = require('@rrs/gateway');
  const logger = createLogger({ service: 'bench', level: 'warn' });
  const ctx = { logger, lifecycle: new Lifecycle(logger, 10_000), health: new Health() };
  const contacts = await startContacts({ databaseUrl: process.env.BENCH_DATABASE_URL, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
  const gw = await startGateway(
    {
      host: '127.0.0.1',
      port: 0,
      contactsAddress: `127.0.0.1:${contacts.grpcPort}`,
      schedulerAddress: '127.0.0.1:1',
      publicBaseUrl: 'http://127.0.0.1',
      redisUrl: process.env.BENCH_REDIS_URL,
      redisKeyPrefix: process.env.BENCH_REDIS_PREFIX,
      // A quota the run cannot use up, so nothing is refused: the limiter reserves its largest chunk
      // (MAX_CHUNK_POINTS, services/gateway/src/quotaChunks.ts) from Redis every 100 requests.
      rateLimits: { windowSeconds: 60, perPlan: { trial: 1e9, standard: 1e9, pro: 1e9 } },
    },
    ctx,
  );
  const org = await contacts.directory.createOrganization({ name: 'Bench', plan: 'pro', emailConfirmed: true, sendWindow: null });
  const { secret } = await contacts.directory.issueApiKey({ organizationId: org.id });
  return { url: `${gw.url}/api/v1/ping`, headers: { authorization: `Bearer ${secret}` }, stop: () => ctx.lifecycle.shutdown('bench done') };
}

const gc = { count: 0, ms: 0, maxMs: 0 };
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gc.count++;
    gc.ms += e.duration;
    gc.maxMs = Math.max(gc.maxMs, e.duration);
  }
}).observe({ entryTypes: ['gc'] });

const started = await (kind === 'gateway' ? gateway() : bareExpress());
process.send({ url: started.url, headers: started.headers });
process.on('message', async (m) => {
  if (m === 'cpu') {
    const { user, system } = process.cpuUsage();
    process.send({ cpuMicros: user + system, gc });
  } else if (m === 'stop') {
    await started.stop();
    process.exit(0);
  }
});
