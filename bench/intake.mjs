#!/usr/bin/env node
// Intake: POST /api/v1/cascades with 500 recipients on a 3-step flow, through the real gateway →
// cascade-scheduler (one transaction per request: cascade, 500 recipients, 500 review links, 1 500
// steps, idempotency record), beside a raw COPY of the same rows into the same tables in the same run.
// Usage: npm run build && node bench/intake.mjs [--requests 80] [--concurrency 4] [--seconds 30] [--warmup 40]
// --warmup N: N requests through the API and N cascades through COPY before each side's measured phase,
// not measured (a running service's intake path is compiled by V8's optimizing tier; three requests left
// it in the baseline tiers for much of the measured phase). --warmup 3 is the measurement before 2026-11-28.
// Loopback PostgreSQL only (TEST_DATABASE_URL / DATABASE_URL). Target: ≥ 20 000 recipients/s accepted.
// Prints the CPU each process spent per request of the API phase (from /proc). BENCH_PROFILE_OUT=<file>:
// a CPU profile of the servers' process over the API phase only (BENCH_PROFILE_HEAP=1: its sampled
// allocations instead).
import { fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { cpus, loadavg } from 'node:os';
import { adminSql } from './lib/pg-admin.mjs';
import { cpuByGroup } from './lib/proc-cpu.mjs';

const require = createRequire(import.meta.url);
const pg = require('pg');
const { from: copyFrom } = require('pg-copy-streams');
const here = dirname(fileURLToPath(import.meta.url));

const { values } = parseArgs({ options: { requests: { type: 'string', default: '80' }, concurrency: { type: 'string', default: '4' }, seconds: { type: 'string', default: '30' }, warmup: { type: 'string', default: '40' } } });
const REQUESTS = Math.min(400, Math.max(1, Number(values.requests)));
const CONCURRENCY = Math.min(32, Math.max(1, Number(values.concurrency)));
const MAX_SECONDS = Math.min(120, Math.max(1, Number(values.seconds)));
const RECIPIENTS = 500;
const WARMUP = Math.min(200, Math.max(1, Number(values.warmup)));

const pgUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
if (!['127.0.0.1', 'localhost', '::1'].includes(new URL(pgUrl).hostname)) throw new Error('loopback PostgreSQL only');
const dbName = `rrs_bench_${randomBytes(4).toString('hex')}`;

const admin = (sql) => adminSql(pgUrl, sql);


/** Sends `message` to the servers' process and waits for its answer carrying `key`. */
function ask(message, key) {
  return new Promise((resolve) => {
    const listener = (m) => {
      if (m && key in m) {
        child.off('message', listener);
        resolve(m);
      }
    };
    child.on('message', listener);
    child.send(message);
  });
}

/** Runs `task(i)` for i < count, `concurrency` at a time, stopping new tasks after maxMs. */
async function bounded(count, concurrency, maxMs, task) {
  let next = 0;
  let done = 0;
  const deadline = Date.now() + maxMs;
  const latencies = [];
  const started = process.hrtime.bigint();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < count && Date.now() < deadline) {
      const i = next++;
      const t0 = process.hrtime.bigint();
      await task(i);
      latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      done++;
    }
  }));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))];
  return { done, seconds, p50: pct(0.5), p99: pct(0.99) };
}

function body(i) {
  return JSON.stringify({
    locationId: server.locationId,
    externalId: `bench-${i}`,
    recipients: Array.from({ length: RECIPIENTS }, (_, k) => ({ name: `Customer ${k}`, email: `c${i}.${k}@example.com`, phone: `+7916${String(1000000 + ((i * RECIPIENTS + k) % 9000000)).padStart(7, '0')}` })),
  });
}

await admin(`CREATE DATABASE ${dbName}`);
const url = new URL(pgUrl);
url.pathname = `/${dbName}`;
const child = fork(join(here, 'cascade-servers.mjs'), [], { env: { ...process.env, DATABASE_URL: url.toString(), BENCH_DISPATCHER: '0' }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
const server = await new Promise((resolve, reject) => {
  child.once('message', resolve);
  child.once('exit', (code) => reject(new Error(`servers exited with ${code}`)));
});
try {
  const bodies = Array.from({ length: REQUESTS + WARMUP }, (_, i) => body(i));
  const post = async (i) => {
    const res = await fetch(`${server.base}/api/v1/cascades`, { method: 'POST', headers: { authorization: `Bearer ${server.key}`, 'content-type': 'application/json' }, body: bodies[i] });
    const json = await res.json();
    if (res.status !== 202 || json.queued !== RECIPIENTS) throw new Error(`unexpected answer ${res.status}: ${JSON.stringify(json).slice(0, 300)}`);
  };
  await bounded(WARMUP, CONCURRENCY, MAX_SECONDS * 1000, (i) => post(REQUESTS + i));
  // PostgreSQL: the backends of this run's database only (other work on the machine is not counted).
  const groups = { servers: (pid) => pid === child.pid, bench: (pid) => pid === process.pid, postgres: (_pid, comm, command) => comm === 'postgres' && command.includes(` ${dbName} `) };
  const profile = process.env.BENCH_PROFILE_OUT && { file: process.env.BENCH_PROFILE_OUT, heap: process.env.BENCH_PROFILE_HEAP === '1' };
  if (profile) await ask({ profile: 'start', heap: profile.heap }, 'profiling');
  const cpu0 = cpuByGroup(groups);
  const api = await bounded(REQUESTS, CONCURRENCY, MAX_SECONDS * 1000, post);
  const cpu1 = cpuByGroup(groups);
  if (profile) await ask({ profile: 'stop', heap: profile.heap, file: profile.file }, 'profiled');

  // The same rows, COPY'd raw into the same tables (no HTTP, no validation, no idempotency record). The
  // rows are built before the clock starts, so this measures what PostgreSQL takes to ingest them.
  const pool = new pg.Pool({ connectionString: url.toString(), max: CONCURRENCY, options: '-c search_path=scheduler' });
  const now = new Date().toISOString();
  const tsv = (rows) => Buffer.from(rows.map((r) => `${r.map((v) => (v === null ? '\\N' : String(v))).join('\t')}\n`).join(''));
  const copyInputs = Array.from({ length: api.done + WARMUP }, () => {
    const cascadeId = randomUUID();
    const recipients = Array.from({ length: RECIPIENTS }, (_, k) => [randomUUID(), cascadeId, server.organizationId, k, `Customer ${k}`, `c${k}@example.com`, '+79161234567', 'running', randomUUID()]);
    const steps = [];
    for (const r of recipients) for (const [k, ch] of ['EMAIL', 'SMS', 'EMAIL'].entries()) steps.push([randomUUID(), r[0], cascadeId, server.organizationId, k + 1, ch, 0, k === 0 ? 'scheduled' : 'pending', ch, k === 0 ? now : null]);
    return [
      [`COPY cascades (id, organization_id, location_id, status, recipients_total, active_recipients) FROM STDIN`, tsv([[cascadeId, server.organizationId, server.locationId, 'running', RECIPIENTS, RECIPIENTS]])],
      [`COPY review_requests (id, organization_id, token, location_id, recipient_id) FROM STDIN`, tsv(recipients.map((r) => [r[8], server.organizationId, randomBytes(16).toString('hex'), server.locationId, r[0]]))],
      [`COPY recipients (id, cascade_id, organization_id, position, name, email, phone, status, review_request_id) FROM STDIN`, tsv(recipients)],
      [`COPY recipient_steps (id, recipient_id, cascade_id, organization_id, step_order, channel, delay_minutes, status, sent_channel, due_at) FROM STDIN`, tsv(steps)],
    ];
  });
  const copyCascade = async (i) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      for (const [sql, data] of copyInputs[i]) await pipeline(Readable.from([data]), client.query(copyFrom(sql)));
      await client.query('COMMIT');
    } finally {
      client.release();
    }
  };
  await bounded(WARMUP, CONCURRENCY, MAX_SECONDS * 1000, (i) => copyCascade(api.done + i));
  const copyCpu0 = cpuByGroup(groups);
  const raw = await bounded(api.done, CONCURRENCY, MAX_SECONDS * 1000, copyCascade);
  const copyCpu1 = cpuByGroup(groups);
  await pool.end();

  const rate = (r) => Math.round((r.done * RECIPIENTS) / r.seconds);
  console.log(`intake on ${cpus().length} cores (load ${loadavg()[0].toFixed(1)}), ${RECIPIENTS} recipients × 3-step flow per request, concurrency ${CONCURRENCY}, each side warmed with ${WARMUP} (not measured)`);
  console.log(`  POST /api/v1/cascades : ${api.done} requests in ${api.seconds.toFixed(2)} s → ${rate(api)} recipients/s accepted (p50 ${api.p50.toFixed(1)} ms, p99 ${api.p99.toFixed(1)} ms per request)`);
  if (cpu0 && cpu1) console.log(`    CPU per request: ${Object.keys(groups).map((k) => `${k} ${(((cpu1[k] - cpu0[k]) / api.done) * 1000).toFixed(1)} ms`).join(', ')} (servers: gateway + contacts + scheduler; postgres: this database's backends)`);
  console.log(`  raw COPY, same rows   : ${raw.done} cascades in ${raw.seconds.toFixed(2)} s → ${rate(raw)} recipients/s (p50 ${raw.p50.toFixed(1)} ms, p99 ${raw.p99.toFixed(1)} ms)`);
  if (copyCpu0 && copyCpu1) console.log(`    CPU per cascade: postgres ${(((copyCpu1.postgres - copyCpu0.postgres) / raw.done) * 1000).toFixed(1)} ms, bench ${(((copyCpu1.bench - copyCpu0.bench) / raw.done) * 1000).toFixed(1)} ms`);
  console.log(`  API / raw COPY        : ${(rate(api) / rate(raw)).toFixed(2)}   target: ≥ 20000 recipients/s accepted → ${rate(api) >= 20000 ? 'MET' : 'NOT MET'}`);
} finally {
  child.send('stop');
  await new Promise((r) => child.once('exit', r));
  await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
}
