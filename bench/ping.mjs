#!/usr/bin/env node
// GET /api/v1/ping through the gateway (API key check cached in Redis + Redis rate limiter) against a
// bare express hello-world, measured in the same run with autocannon, loopback only.
// Usage: npm run build && node bench/ping.mjs [--duration 10] [--connections 64]
// Needs the PostgreSQL (DATABASE_URL / TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)
// and Redis (REDIS_URL, default redis://127.0.0.1:6379) the tests use. Targets: ratio ≥ 0.5, p99 < 20 ms.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cpus, loadavg } from 'node:os';

const require = createRequire(import.meta.url);
const autocannon = require('autocannon');
const pg = require('pg');
const Redis = require('ioredis');
const here = dirname(fileURLToPath(import.meta.url));

const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '64' }, warmup: { type: 'string', default: '2' } } });
const duration = Math.min(60, Math.max(1, Number(values.duration)));
const connections = Math.min(256, Math.max(1, Number(values.connections)));
const warmup = Math.min(10, Math.max(0, Number(values.warmup)));

const pgUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const suffix = randomBytes(4).toString('hex');
const dbName = `rrs_bench_${suffix}`;
const redisPrefix = `rrs:bench:${suffix}:`;

function loopbackOnly(url) {
  const host = new URL(url).hostname;
  if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(host)) throw new Error(`refusing to load a non-loopback target: ${url}`);
}

async function withDatabase(fn) {
  const admin = new pg.Client({ connectionString: pgUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  await admin.end();
  const url = new URL(pgUrl);
  url.pathname = `/${dbName}`;
  try {
    return await fn(url.toString());
  } finally {
    const c = new pg.Client({ connectionString: pgUrl });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await c.end();
    const redis = new Redis(redisUrl);
    const keys = await redis.keys(`${redisPrefix}*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
  }
}

const children = new Set();

function startServer(kind, env) {
  const child = fork(join(here, 'ping-servers.mjs'), [kind], { execArgv: kind === 'gateway' && process.env.BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir=/tmp/gwprof'] : [], env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${kind} did not start within 30 s`)), 30_000);
    child.once('message', (m) => {
      clearTimeout(timer);
      resolve({ ...m, stop: () => new Promise((r) => { child.once('exit', r); child.send('stop'); }) });
    });
    child.once('exit', (code) => reject(new Error(`${kind} exited with ${code}`)));
  });
}

function load(target, seconds) {
  loopbackOnly(target.url);
  return autocannon({ url: target.url, headers: target.headers, connections, duration: seconds, pipelining: 1 });
}

async function measure(label, target) {
  if (warmup > 0) await load(target, warmup);
  const r = await load(target, duration);
  const statuses = { '2xx': r['2xx'], non2xx: r.non2xx, errors: r.errors, timeouts: r.timeouts };
  console.log(`${label.padEnd(26)} ${r.requests.average.toFixed(0).padStart(7)} req/s   p50 ${String(r.latency.p50).padStart(3)} ms   p99 ${String(r.latency.p99).padStart(3)} ms   ${JSON.stringify(statuses)}`);
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${label}: ${r.non2xx} non-2xx responses and ${r.errors} errors; the comparison is void`);
  return r;
}

await withDatabase(async (databaseUrl) => {
  try {
    const bare = await startServer('express', {});
    const gw = await startServer('gateway', { BENCH_DATABASE_URL: databaseUrl, BENCH_REDIS_URL: redisUrl, BENCH_REDIS_PREFIX: redisPrefix });
    // Load generator, gateway, Redis and the baseline share this machine: its load is part of the result.
    console.log(`autocannon: ${connections} connections, ${duration} s per side (after ${warmup} s warm-up), loopback; ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    const b = await measure('bare express hello-world', bare);
    const g = await measure('gateway GET /api/v1/ping', gw);
    const ratio = g.requests.average / b.requests.average;
    console.log(`ratio gateway / bare express: ${ratio.toFixed(2)} (target ≥ 0.5)   gateway p99: ${g.latency.p99} ms (target < 20 ms)`);
    process.exitCode = ratio >= 0.5 && g.latency.p99 < 20 ? 0 : 1;
    await gw.stop();
    await bare.stop();
  } finally {
    // A server left behind by a failed run is ended here, before its database is dropped.
    for (const child of children) child.kill('SIGKILL');
  }
});
