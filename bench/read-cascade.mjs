#!/usr/bin/env node
// GET /api/v1/cascades/{id} of one 500-recipient cascade (3-step flow), read sequentially (issue 35:
// p99 < 50 ms, and ≤ 1.2 × an empty database's time on a long history). The real gateway → contacts +
// cascade-scheduler (bench/cascade-servers.mjs, no dispatcher), each build on its own database. With
// several --builds (repository roots, each built with `node scripts/build.mjs`), their servers run side by
// side and the reads alternate between them in --rounds rounds, so the builds are compared in the same run
// on the same machine load. --history N seeds N finished recipients (cascades of 3, 3 sent steps each,
// the shape bench/history.mjs seeds) into each database before the cascade is posted. --cpu-prof writes
// the servers' CPU profiles into --cpu-prof-dir. Besides the latencies it prints the CPU time each read
// cost the servers' process and their PostgreSQL backends (from /proc: unlike a latency, it does not
// grow when other work shares the machine). Each database is dropped at the end, error or not.
// Usage: npm run build && flock /tmp/rrs-bench.lock node bench/read-cascade.mjs [--reads 200] [--rounds 4]
//   [--history 0] [--builds /path/to/rootA,/path/to/rootB] [--cpu-prof --cpu-prof-dir /tmp/prof]
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { seedHistory } from './lib/history-seed.mjs';
import { adminSql } from './lib/pg-admin.mjs';

const require = createRequire(import.meta.url);
const pg = require('pg');
const here = dirname(fileURLToPath(import.meta.url));

const { values } = parseArgs({
  options: {
    reads: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '4' },
    history: { type: 'string', default: '0' },
    builds: { type: 'string', default: resolve(here, '..') },
    'cpu-prof': { type: 'boolean', default: false },
    'cpu-prof-dir': { type: 'string', default: '/tmp/rrs-read-cascade-prof' },
  },
});
const READS = Math.min(10_000, Math.max(10, Number(values.reads)));
const ROUNDS = Math.min(50, Math.max(1, Number(values.rounds)));
const HISTORY = Math.min(10_000_000, Math.max(0, Number(values.history)));
const BUILDS = values.builds.split(',').map((root) => resolve(root));
const RECIPIENTS = 500;

const pgUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
if (!['127.0.0.1', 'localhost', '::1'].includes(new URL(pgUrl).hostname)) throw new Error('loopback PostgreSQL only');

function percentiles(latencies) {
  const sorted = [...latencies].sort((a, b) => a - b);
  const pct = (p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
  return { p50: pct(0.5), p95: pct(0.95), p99: pct(0.99), n: sorted.length };
}

/** CPU time (user + system) a process has used so far, in ms; 0 once it is gone. */
function cpuMs(pid) {
  try {
    // Fields after the parenthesized command name: utime and stime are the 12th and 13th, in clock ticks (100 Hz).
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}


/** One build's servers on a database of its own, with the 500-recipient cascade posted; `read()` is one timed GET. */
async function startBuild(root) {
  const dbName = `rrs_bench_read_${randomBytes(4).toString('hex')}`;
  await adminSql(pgUrl, `CREATE DATABASE ${dbName}`);
  const url = new URL(pgUrl);
  url.pathname = `/${dbName}`;
  const execArgv = values['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${values['cpu-prof-dir']}`] : [];
  const child = fork(join(root, 'bench', 'cascade-servers.mjs'), [], { cwd: root, execArgv, env: { ...process.env, DATABASE_URL: url.toString(), BENCH_DISPATCHER: '0' }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let stopped;
  const stop = () => (stopped ??= (async () => {
    if (child.exitCode === null) {
      child.send('stop');
      await new Promise((done) => child.once('exit', done));
    }
    await adminSql(pgUrl, `DROP DATABASE IF EXISTS ${dbName}`);
  })());
  try {
    const server = await new Promise((done, fail) => {
      child.once('message', done);
      child.once('exit', (code) => fail(new Error(`servers of ${root} exited ${code}`)));
    });
    if (HISTORY > 0) {
      const db = new pg.Client({ connectionString: url.toString(), options: '-c search_path=scheduler' });
      await db.connect();
      try {
        await seedHistory(db, server.organizationId, server.locationId, HISTORY, { sendLogs: false });
      } finally {
        await db.end();
      }
    }
    const headers = { authorization: `Bearer ${server.key}`, 'content-type': 'application/json' };
    const res = await fetch(`${server.base}/api/v1/cascades`, {
      method: 'POST',
      headers: { ...headers, 'idempotency-key': randomUUID() },
      body: JSON.stringify({ locationId: server.locationId, externalId: 'read-cascade', recipients: Array.from({ length: RECIPIENTS }, (_, j) => ({ name: `R ${j}`, email: `r${j}-${randomBytes(3).toString('hex')}@example.com` })) }),
    });
    if (res.status !== 202) throw new Error(`POST /cascades ${res.status}: ${await res.text()}`);
    const { id } = await res.json();
    // The servers' process and its PostgreSQL backends (the pool's connections, open after the first reads).
    const admin = new pg.Client({ connectionString: url.toString() });
    await admin.connect();
    const backends = async () => (await admin.query('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()')).rows.map((row) => row.pid);
    const cpu = async () => ({ server: cpuMs(child.pid), database: (await backends()).reduce((sum, pid) => sum + cpuMs(pid), 0) });
    const read = async () => {
      const t0 = process.hrtime.bigint();
      const got = await fetch(`${server.base}/api/v1/cascades/${id}`, { headers });
      if (got.status !== 200) throw new Error(`GET /cascades/{id} ${got.status}`);
      const body = await got.arrayBuffer();
      return { ms: Number(process.hrtime.bigint() - t0) / 1e6, bytes: body.byteLength };
    };
    return { root, read, cpu, stop: async () => { await admin.end(); await stop(); } };
  } catch (err) {
    await stop();
    throw err;
  }
}

const builds = [];
try {
  for (const root of BUILDS) builds.push(await startBuild(root));
  const latencies = builds.map(() => []);
  const bytes = builds.map(() => 0);
  const cpuUsed = builds.map(() => ({ server: 0, database: 0 }));
  // A warm-up read each, then the rounds: each build READS / ROUNDS reads in turn.
  for (const build of builds) await build.read();
  const perRound = Math.max(1, Math.ceil(READS / ROUNDS));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, build] of builds.entries()) {
      const before = await build.cpu();
      for (let n = 0; n < perRound; n++) {
        const { ms, bytes: size } = await build.read();
        latencies[i].push(ms);
        bytes[i] = size;
      }
      const after = await build.cpu();
      cpuUsed[i].server += after.server - before.server;
      cpuUsed[i].database += after.database - before.database;
    }
  }
  const figures = builds.map((build, i) => ({ build: build.root, bytes: bytes[i], serverCpu: cpuUsed[i].server / latencies[i].length, databaseCpu: cpuUsed[i].database / latencies[i].length, ...percentiles(latencies[i]) }));
  console.log(`GET /cascades/{id} of ${RECIPIENTS} recipients (3-step flow), ${HISTORY} recipients of history, ${perRound * ROUNDS} sequential reads per build in ${ROUNDS} alternating rounds:`);
  for (const f of figures) {
    const ratio = f === figures[0] ? '' : ` (p50 ${(f.p50 / figures[0].p50).toFixed(2)} ×, p99 ${(f.p99 / figures[0].p99).toFixed(2)} × the first)`;
    console.log(`  ${f.build}: p50 ${f.p50.toFixed(1)} ms, p95 ${f.p95.toFixed(1)} ms, p99 ${f.p99.toFixed(1)} ms${ratio}; CPU a read: servers ${f.serverCpu.toFixed(1)} ms, PostgreSQL ${f.databaseCpu.toFixed(1)} ms; ${f.bytes} bytes`);
  }
} finally {
  for (const build of builds) await build.stop();
}
