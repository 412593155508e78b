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
const CHUNK = 300_000;

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

/** Finished history for `organizationId`: cascades of 3 recipients, 3 sent steps each (what GET /cascades/{id} reads past). */
async function seed(db, organizationId, locationId, total) {
  const cascades = Math.ceil(total / 3);
  for (let from = 0; from < cascades; from += CHUNK / 3) {
    const to = Math.min(cascades, from + CHUNK / 3) - 1;
    await db.query(
      `WITH c AS (
         INSERT INTO cascades (id, organization_id, location_id, status, recipients_total, active_recipients, created_at, finished_at)
         SELECT gen_random_uuid(), $1::uuid, $2, 'finished', 3, 0, t, t + interval '2 days'
           FROM (SELECT g, now() - interval '380 days' + g * (interval '378 days' / $5) AS t FROM generate_series($3::int, $4::int) g) s RETURNING id, created_at),
       r AS (
         INSERT INTO recipients (id, cascade_id, organization_id, position, name, email, phone, status, finish_reason, finished_at, review_request_id)
         SELECT gen_random_uuid(), c.id, $1::uuid, p, 'Seeded Person', 'seed' || md5(c.id::text || p) || '@example.com', '+7900' || lpad((abs(hashtext(c.id::text || p)) % 10000000)::text, 7, '0'),
                'finished', 'exhausted', c.created_at + interval '2 days', gen_random_uuid()
           FROM c, generate_series(0, 2) p RETURNING id, cascade_id, review_request_id, finished_at),
       rr AS (
         INSERT INTO review_requests (id, organization_id, token, location_id, recipient_id, status, created_at)
         SELECT r.review_request_id, $1::uuid, replace(r.review_request_id::text, '-', ''), $2, r.id, 'created', r.finished_at - interval '2 days' FROM r RETURNING 1)
       INSERT INTO recipient_steps (id, recipient_id, cascade_id, organization_id, step_order, channel, delay_minutes, status, sent_channel, attempt, sent_at, delivered_at)
       SELECT gen_random_uuid(), r.id, r.cascade_id, $1::uuid, s, CASE WHEN s = 1 THEN 'SMS' ELSE 'EMAIL' END, s * 60, 'sent', CASE WHEN s = 1 THEN 'SMS' ELSE 'EMAIL' END, 1,
              r.finished_at - interval '2 days' + s * interval '1 hour', r.finished_at - interval '2 days' + s * interval '1 hour'
         FROM r, generate_series(0, 2) s`,
      [organizationId, locationId, from, to, cascades],
    );
  }
  await db.query('ANALYZE');
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
        await seed(db, server.organizationId, server.locationId, HISTORY);
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
