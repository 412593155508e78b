#!/usr/bin/env node
// Issue 2 targets: the all-in-one answers /api/v1/ping within 15 s of start, and idle resident memory
// stays under 400 MB for the all-in-one and under 150 MB for each service alone.
// Run after `npm run build`, with PostgreSQL and NATS on their standard loopback ports:
//   node bench/startup.mjs
import { spawn, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, chmodSync, rmSync, readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const require = createRequire(join(root, 'package.json'));
const pg = require('pg');
const PG = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const NATS = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
const IDLE_MS = 5_000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const freePort = () => new Promise((res) => { const s = createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });

function rssMb(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

/**
 * Proportional set size: each shared page counted once across the processes sharing it. Summing RSS
 * over PostgreSQL's processes would count its shared buffers once per backend.
 */
function pssMb(pid) {
  const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

/** The process and every descendant (embedded PostgreSQL runs as child processes), by PSS. */
function treeRssMb(pid) {
  const children = new Map();
  for (const d of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const ppid = Number(readFileSync(`/proc/${d}/stat`, 'utf8').split(') ')[1].split(' ')[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(d));
    } catch { /* process gone */ }
  }
  let total = 0;
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop();
    try { total += pssMb(p); } catch { /* gone */ }
    stack.push(...(children.get(p) ?? []));
  }
  return total;
}

async function waitUntil(probe, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try { if (await probe()) return true; } catch { /* not yet */ }
    await sleep(20);
  }
  return false;
}

function run(cmd, args, env, cwd = root) {
  const child = spawn(cmd, args, { cwd, env: { ...process.env, LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  child.out = '';
  child.stdout.on('data', (d) => (child.out += d));
  child.stderr.on('data', (d) => (child.out += d));
  return child;
}

const stop = (child) => new Promise((res) => { if (child.exitCode !== null) return res(); child.once('exit', res); child.kill('SIGTERM'); });

async function allInOne(label, dataDir) {
  const port = await freePort();
  const pgPort = await freePort();
  const t0 = performance.now();
  const child = run(process.execPath, ['packages/all-in-one/dist/main.js'], { PORT: String(port), EMBEDDED_PG_PORT: String(pgPort), DATA_DIR: dataDir });
  let key;
  const ok = await waitUntil(async () => {
    key ??= /Demo organization API key: (rrs_\w+)/.exec(child.out)?.[1];
    if (!key) return false;
    const r = await fetch(`http://127.0.0.1:${port}/api/v1/ping`, { headers: { authorization: `Bearer ${key}` } });
    return r.status === 200;
  }, 60_000);
  const startMs = performance.now() - t0;
  if (!ok) throw new Error(`all-in-one did not answer /ping:\n${child.out}`);
  await sleep(IDLE_MS);
  const node = rssMb(child.pid);
  const tree = treeRssMb(child.pid);
  await stop(child);
  console.log(`all-in-one ${label.padEnd(14)} ping answered after ${(startMs / 1000).toFixed(2)} s (target < 15 s)  idle RSS: node ${node.toFixed(0)} MB; with embedded PostgreSQL ${tree.toFixed(0)} MB (PSS of the process tree; target < 400 MB)`);
  return { startMs, node, tree };
}

async function serviceAlone(name, env, readyUrl) {
  const child = run(process.execPath, ['dist/main.js'], env, join(root, 'services', name));
  const ok = await waitUntil(async () => (await fetch(readyUrl)).status === 200, 20_000);
  if (!ok) throw new Error(`${name} not ready:\n${child.out}`);
  await sleep(IDLE_MS);
  const mb = rssMb(child.pid);
  console.log(`service ${name.padEnd(18)} idle RSS ${mb.toFixed(0)} MB (target < 150 MB)`);
  return { child, mb };
}

execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { stdio: 'ignore' });
const dataDir = mkdtempSync(join(tmpdir(), 'rrs-bench-'));
chmodSync(dataDir, 0o755);
const results = [];
try {
  results.push(await allInOne('(first start)', dataDir));
  results.push(await allInOne('(restart)', dataDir));
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}

const dbName = `rrs_bench_${Date.now().toString(36)}`;
const admin = new pg.Client({ connectionString: PG });
await admin.connect();
await admin.query(`CREATE DATABASE ${dbName}`);
const url = new URL(PG);
url.pathname = `/${dbName}`;
const prefix = `bench${Date.now().toString(36)}`;
const running = [];
let worst = 0;
try {
  const ports = {};
  for (const k of ['contactsGrpc', 'contactsOps', 'schedGrpc', 'schedOps', 'gw', 'email', 'sms', 'msg', 'wh']) ports[k] = await freePort();
  const common = { DATABASE_URL: url.toString(), NATS_URL: NATS, BUS_PREFIX: prefix };
  const specs = [
    ['contacts', { ...common, GRPC_PORT: ports.contactsGrpc, OPS_PORT: ports.contactsOps }, ports.contactsOps],
    ['cascade-scheduler', { ...common, GRPC_PORT: ports.schedGrpc, OPS_PORT: ports.schedOps }, ports.schedOps],
    ['gateway', { PORT: ports.gw, CONTACTS_ADDR: `127.0.0.1:${ports.contactsGrpc}`, SCHEDULER_ADDR: `127.0.0.1:${ports.schedGrpc}` }, ports.gw],
    ['channel-email', { ...common, OPS_PORT: ports.email }, ports.email],
    ['channel-sms', { ...common, OPS_PORT: ports.sms }, ports.sms],
    ['channel-messenger', { ...common, OPS_PORT: ports.msg }, ports.msg],
    ['webhooks', { ...common, OPS_PORT: ports.wh, WEBHOOK_SECRET_KEYS: randomBytes(32).toString('base64') }, ports.wh],
  ];
  for (const [name, env, port] of specs) {
    const stringEnv = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)]));
    const r = await serviceAlone(name, stringEnv, `http://127.0.0.1:${port}/readyz`);
    running.push(r.child);
    worst = Math.max(worst, r.mb);
  }
} finally {
  for (const c of running.reverse()) await stop(c);
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  await admin.end();
  const { connect } = require('nats');
  const nc = await connect({ servers: NATS });
  const jsm = await nc.jetstreamManager();
  for await (const s of jsm.streams.list()) if (s.config.name.startsWith(prefix.toUpperCase() + '_') || s.config.name.startsWith(`KV_${prefix}_`)) await jsm.streams.delete(s.config.name);
  await nc.close();
}
const slowest = Math.max(...results.map((r) => r.startMs));
const aioWorst = Math.max(...results.map((r) => r.tree));
console.log(`\nsummary: all-in-one ready in ≤ ${(slowest / 1000).toFixed(2)} s, idle ≤ ${aioWorst.toFixed(0)} MB; worst service alone ${worst.toFixed(0)} MB`);
const pass = slowest < 15_000 && aioWorst < 400 && worst < 150;
console.log(pass ? 'targets met' : 'TARGETS MISSED');
process.exit(pass ? 0 : 1);
