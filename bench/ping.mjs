#!/usr/bin/env node
// GET /api/v1/ping through the gateway (API key check cached in memory and Redis, the Redis rate limiter
// reserving in chunks) against a bare express hello-world, measured in the same run with autocannon,
// loopback only. Also prints each side's CPU per request (its process), the Redis server's CPU per
// request over the same seconds (the whole server: other clients count too), the load generator's (this
// process: autocannon shares the machine's two cores with the server), and each side's GC pauses.
// The two sides are measured in alternating slices (--rounds, default 5: bare 2 s, gateway 2 s, …), so a
// change in the machine's load during the run weighs on both; latency percentiles are over all slices.
// Usage: npm run build && node bench/ping.mjs [--duration 10] [--connections 64] [--rounds 5]
// Needs the PostgreSQL (DATABASE_URL / TEST_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/postgres)
// and Redis (REDIS_URL, default redis://127.0.0.1:6379) the tests use. Targets: ratio ≥ 0.85, p99 < 15 ms.
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

const { values } = parseArgs({ options: { duration: { type: 'string', default: '10' }, connections: { type: 'string', default: '64' }, warmup: { type: 'string', default: '2' }, rounds: { type: 'string', default: '5' } } });
const duration = Math.min(60, Math.max(1, Number(values.duration)));
const rounds = Math.min(duration, Math.max(1, Math.round(Number(values.rounds))));
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
/** The targets (issue 30): the gateway's req/s at least this share of the bare express's, and its p99 under this. */
const TARGET_RATIO = 0.85;
const TARGET_P99_MS = 15;

function startServer(kind, env) {
  const child = fork(join(here, 'ping-servers.mjs'), [kind], { execArgv: process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=/tmp/gwprof/${kind}`] : [], env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${kind} did not start within 30 s`)), 30_000);
    child.once('message', (m) => {
      clearTimeout(timer);
      resolve({
        ...m,
        usage: () => new Promise((r) => { child.once('message', r); child.send('cpu'); }),
        stop: () => new Promise((r) => { child.once('exit', r); child.send('stop'); }),
      });
    });
    child.once('exit', (code) => reject(new Error(`${kind} exited with ${code}`)));
  });
}

function load(target, seconds) {
  loopbackOnly(target.url);
  // Raw histograms, merged over the slices by aggregateResult.
  return autocannon({ url: target.url, headers: target.headers, connections, duration: seconds, pipelining: 1, skipAggregateResult: true });
}

/** The Redis server's CPU time so far (µs), from INFO cpu. */
async function redisCpuMicros(redis) {
  const info = await redis.info('cpu');
  const seconds = (name) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1e6;
}

/** One side's slices so far: requests, seconds, CPU of its process and of Redis. */
function side(label, target) {
  return { label, target, slices: [], seconds: 0, serverCpu: 0, redisCpu: 0, clientCpu: 0, gc: { count: 0, ms: 0, maxMs: 0 } };
}

async function slice(s, seconds, redis) {
  const [serverBefore, redisBefore] = [await s.target.usage(), await redisCpuMicros(redis)];
  const clientBefore = process.cpuUsage();
  const r = await load(s.target, seconds);
  const client = process.cpuUsage(clientBefore);
  const serverAfter = await s.target.usage();
  s.serverCpu += serverAfter.cpuMicros - serverBefore.cpuMicros;
  s.clientCpu += client.user + client.system;
  s.gc.count += serverAfter.gc.count - serverBefore.gc.count;
  s.gc.ms += serverAfter.gc.ms - serverBefore.gc.ms;
  // The longest pause of the process so far: after the warm-up, close enough to the measured slices'.
  s.gc.maxMs = serverAfter.gc.maxMs;
  s.redisCpu += (await redisCpuMicros(redis)) - redisBefore;
  s.slices.push(r);
  s.seconds += seconds;
  return r.totalCompletedRequests / seconds;
}

function report(s) {
  const r = autocannon.aggregateResult(s.slices, { url: s.target.url, connections });
  const rate = r.latency.totalCount / s.seconds;
  const statuses = { '2xx': r['2xx'], non2xx: r.non2xx, errors: r.errors, timeouts: r.timeouts };
  const perRequest = (micros) => String(Math.round(micros / r.latency.totalCount)).padStart(4);
  console.log(`${s.label.padEnd(26)} ${rate.toFixed(0).padStart(7)} req/s   p50 ${String(r.latency.p50).padStart(3)} ms   p99 ${String(r.latency.p99).padStart(3)} ms   CPU/req: process ${perRequest(s.serverCpu)} µs, Redis ${perRequest(s.redisCpu)} µs, load generator ${perRequest(s.clientCpu)} µs   ${JSON.stringify(statuses)}`);
  // GC pauses stop every request in flight: a pause of several ms is a p99 of several ms.
  console.log(`${''.padEnd(26)} GC: ${s.gc.count} pauses, mean ${(s.gc.ms / Math.max(1, s.gc.count)).toFixed(1)} ms, longest ${s.gc.maxMs.toFixed(1)} ms, ${perRequest(s.gc.ms * 1000)} µs/req`);
  if (r.non2xx > 0 || r.errors > 0) throw new Error(`${s.label}: ${r.non2xx} non-2xx responses and ${r.errors} errors; the comparison is void`);
  return { rate, p99: r.latency.p99 };
}

await withDatabase(async (databaseUrl) => {
  try {
    const bare = await startServer('express', {});
    const gw = await startServer('gateway', { BENCH_DATABASE_URL: databaseUrl, BENCH_REDIS_URL: redisUrl, BENCH_REDIS_PREFIX: redisPrefix });
    // Load generator, gateway, Redis and the baseline share this machine: its load is part of the result.
    console.log(`autocannon: ${connections} connections, ${duration} s per side in ${rounds} alternating slices (after ${warmup} s warm-up each), loopback; ${cpus().length} CPUs, load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    const redis = new Redis(redisUrl);
    const sides = [side('bare express hello-world', bare), side('gateway GET /api/v1/ping', gw)];
    const roundRatios = [];
    try {
      if (warmup > 0) for (const s of sides) await load(s.target, warmup);
      for (let round = 0; round < rounds; round++) {
        const [bareRate, gatewayRate] = [await slice(sides[0], duration / rounds, redis), await slice(sides[1], duration / rounds, redis)];
        roundRatios.push(gatewayRate / bareRate);
      }
    } finally {
      await redis.quit();
    }
    const [b, g] = sides.map(report);
    const ratio = g.rate / b.rate;
    const spread = rounds > 1 ? ` (slices ${Math.min(...roundRatios).toFixed(2)}–${Math.max(...roundRatios).toFixed(2)})` : '';
    console.log(`ratio gateway / bare express: ${ratio.toFixed(2)}${spread} (target ≥ ${TARGET_RATIO})   gateway p99: ${g.p99} ms (target < ${TARGET_P99_MS} ms)`);
    process.exitCode = ratio >= TARGET_RATIO && g.p99 < TARGET_P99_MS ? 0 : 1;
    await gw.stop();
    await bare.stop();
  } finally {
    // A server left behind by a failed run is ended here, before its database is dropped.
    for (const child of children) child.kill('SIGKILL');
  }
});
