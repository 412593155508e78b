#!/usr/bin/env node
// The chaos suite (`npm run chaos`, docs/operations.md "Chaos suite"). Each run starts the services as
// separate processes (built `services/*/dist/main.js`, configured by env as the chart does) over a private
// nats-server and a private PostgreSQL cluster this script starts itself, with a local SMTP server, a fake
// SMSC that counts by message id and a webhook receiver that verifies signatures; it pushes recipients
// through an EMAIL → SMS flow, posts some ratings through the real form (/r/<token>), injects one fault,
// and checks: 0 lost steps, 0 lost ratings, 0 lost webhooks, 0 duplicate provider sends outside the
// documented kill -9 window (docs/channels.md "What can still be sent twice"), recovery without help.
//
// Two shapes: `single` (one of each service over one nats-server and one PostgreSQL) and `cluster`
// (three nats-server nodes, a PostgreSQL primary and streaming replica behind a proxy, two replicas of
// each service; see "cluster shape" below and docs/operations.md "Cluster shape").
//
// Env: CHAOS_SHAPE (single, cluster or all; default all), CHAOS_RECIPIENTS
// (per single-shape run, default 2000), CHAOS_FAULTS (comma list, default all), CHAOS_CLUSTER_RECIPIENTS
// (per cluster run, default 600), CHAOS_CLUSTER_FAULTS, CHAOS_KEEP=1 (keep temp dirs), CHAOS_LOG=1
// (service output on failure is always printed).
// Exit code 0 only when every run passed. Every loop is bounded in count and time.
import { spawn, execFileSync } from 'node:child_process';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const require = createRequire(join(ROOT, 'package.json'));
const pg = require('pg');
const { startSmtpSink } = require(join(ROOT, 'packages/testkit/dist/fakes/smtp.js'));
const { startFakeSmsc } = require(join(ROOT, 'packages/testkit/dist/fakes/smsc.js'));
const { untilJetStreamPlaces } = require(join(ROOT, 'packages/testkit/dist/natsCluster.js'));

const RECIPIENTS = Number(process.env.CHAOS_RECIPIENTS ?? 2000);
const ALL_FAULTS = ['kill-scheduler', 'kill-email', 'kill-sms', 'kill-webhooks', 'restart-nats', 'restart-postgres', 'receiver-500'];
const FAULTS = (process.env.CHAOS_FAULTS ?? ALL_FAULTS.join(',')).split(',').filter(Boolean);
/** One flow minute: the SMS step comes 1 flow minute after the email. */
const MINUTE_MS = 1_000;
/** Every 10th recipient rates through the form. */
const RATE_EVERY = 10;
/** A run must settle (every recipient finished, every event delivered) within this long after its fault. */
const SETTLE_TIMEOUT_MS = 150_000;
const SUITE_TIMEOUT_MS = 15 * 60_000;
const ADMIN_TOKEN = `adm_${randomBytes(16).toString('hex')}`;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...a) => console.log(`[chaos ${new Date().toISOString().slice(11, 19)}]`, ...a);

// ---------------------------------------------------------------- cleanup (also on failure)
const cleanups = [];
let cleaning = false;
async function cleanupAll() {
  if (cleaning) return;
  cleaning = true;
  for (const fn of cleanups.reverse()) {
    try {
      await fn();
    } catch (err) {
      console.error('cleanup:', err.message);
    }
  }
}
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => void cleanupAll().then(() => process.exit(130)));
const suiteTimer = setTimeout(() => {
  console.error(`chaos suite exceeded ${SUITE_TIMEOUT_MS / 60000} minutes: aborted`);
  void cleanupAll().then(() => process.exit(1));
}, SUITE_TIMEOUT_MS);
suiteTimer.unref();

async function freePorts(n) {
  const servers = [];
  try {
    for (let i = 0; i < n; i++) {
      const srv = net.createServer();
      await new Promise((ok, fail) => (srv.once('error', fail), srv.listen(0, '127.0.0.1', ok)));
      servers.push(srv);
    }
    return servers.map((s) => s.address().port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((ok) => s.close(ok))));
  }
}

async function until(what, probe, { timeoutMs = 30_000, intervalMs = 200 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (let i = 0; i < 100_000 && Date.now() < deadline; i++) {
    const v = await probe().catch(() => undefined);
    if (v) return v;
    await sleep(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

// ---------------------------------------------------------------- private servers
/** Every child started, so that an interrupted suite kills what is still alive. */
const children = new Set();
cleanups.push(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
});
function startProcess(name, cmd, args, opts = {}) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let out = '';
  const keep = (d) => {
    out += d;
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
  return { name, child, exited, output: () => out, alive: () => child.exitCode === null && child.signalCode === null };
}

async function stopProcess(p, signal = 'SIGTERM', graceMs = 10_000) {
  if (!p || !p.alive()) return;
  p.child.kill(signal);
  const done = await Promise.race([p.exited, sleep(graceMs).then(() => null)]);
  if (!done && p.alive()) {
    p.child.kill('SIGKILL');
    await p.exited;
  }
}

async function startNats(dir, port) {
  const p = startProcess('nats', 'nats-server', ['-js', '-sd', dir, '-p', String(port), '-a', '127.0.0.1']);
  await until('nats-server', () => new Promise((ok) => {
    const s = net.connect(port, '127.0.0.1', () => (s.destroy(), ok(true)));
    s.on('error', () => ok(false));
  }), { timeoutMs: 15_000 });
  return p;
}

/** PostgreSQL refuses to run as root: the cluster belongs to the `postgres` user then. */
function pgBin(name) {
  const versions = readdirSync('/usr/lib/postgresql').sort((a, b) => Number(b) - Number(a));
  return `/usr/lib/postgresql/${versions[0]}/bin/${name}`;
}
const asRoot = process.getuid?.() === 0;
function pgCmd(name, args) {
  return asRoot ? ['runuser', ['-u', 'postgres', '--', pgBin(name), ...args]] : [pgBin(name), args];
}
function pgRun(name, args) {
  const [cmd, a] = pgCmd(name, args);
  execFileSync(cmd, a, { stdio: 'pipe', timeout: 60_000 });
}

async function startPostgresCluster(dir, port, extra = '') {
  if (asRoot) execFileSync('chown', ['-R', 'postgres', dir]);
  pgRun('initdb', ['-D', join(dir, 'data'), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  pgCtl(dir, port, 'start', extra);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  await until('postgres', () => query(url, 'SELECT 1').then(() => true), { timeoutMs: 30_000 });
  return url;
}
function pgCtl(dir, port, action, extra = '') {
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off -c synchronous_commit=off ${extra}`.trim();
  const args = ['-D', join(dir, 'data'), '-l', join(dir, 'pg.log'), '-w', '-t', '60', '-m', 'fast', '-o', opts, action];
  pgRun('pg_ctl', action === 'stop' ? ['-D', join(dir, 'data'), '-w', '-m', 'fast', 'stop'] : args);
}

async function query(url, sql, params) {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  await c.connect();
  try {
    return await c.query(sql, params);
  } finally {
    await c.end();
  }
}

// ---------------------------------------------------------------- webhook receiver
/** Verifies the Standard Webhooks signature; counts finish events per recipient; can answer 500. */
function startReceiver() {
  const state = { secret: null, failing: false, events: new Map(), rated: new Map(), bad: 0, refused: 0, lastAt: 0 };
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      if (state.failing) {
        state.refused++;
        return res.writeHead(500).end();
      }
      if (!verify(state.secret, req.headers, body)) {
        state.bad++;
        return res.writeHead(401).end();
      }
      const event = JSON.parse(body);
      // A rating recorded after the recipient finished comes as cascade.recipient.rated (same payload).
      const byType = event.type === 'cascade.recipient.finished' ? state.events : event.type === 'cascade.recipient.rated' ? state.rated : null;
      if (byType) {
        const id = event.data.recipient.id;
        const list = byType.get(id) ?? [];
        list.push({ webhookId: req.headers['webhook-id'], data: event.data });
        byType.set(id, list);
      }
      state.lastAt = Date.now();
      res.writeHead(204).end();
    });
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok({ state, port: server.address().port, close: () => new Promise((r) => (server.closeAllConnections(), server.close(r))) })));
}
function verify(secret, headers, body) {
  if (!secret) return false;
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sigs = String(headers['webhook-signature'] ?? '').split(' ');
  if (!id || !ts) return false;
  const expected = createHmac('sha256', Buffer.from(secret.replace(/^whsec_/, ''), 'base64')).update(`${id}.${ts}.${body}`).digest();
  return sigs.some((s) => {
    const [v, b64] = s.split(',');
    const got = Buffer.from(b64 ?? '', 'base64');
    return v === 'v1' && got.length === expected.length && timingSafeEqual(got, expected);
  });
}

// ---------------------------------------------------------------- services
const SERVICE_NAMES = ['contacts', 'cascade-scheduler', 'channel-email', 'channel-sms', 'webhooks', 'gateway'];

async function startServices({ databaseUrl, natsUrl, prefix, smtpUrl, smscUrl, runDir }) {
  const names = ['contacts.grpc', 'contacts.ops', 'scheduler.grpc', 'scheduler.ops', 'email.ops', 'sms.ops', 'sms.receipts', 'webhooks.grpc', 'webhooks.ops', 'gateway.http'];
  const picked = await freePorts(names.length);
  const port = Object.fromEntries(names.map((n, i) => [n, picked[i]]));
  const base = { PATH: process.env.PATH, NODE_ENV: 'development', LOG_LEVEL: 'warn', TZ: 'UTC', DATABASE_URL: databaseUrl, NATS_URL: natsUrl, BUS_PREFIX: prefix, GRPC_HOST: '127.0.0.1', OPS_HOST: '127.0.0.1', HOST: '127.0.0.1', DATA_DIR: runDir };
  const gatewayUrl = `http://127.0.0.1:${port['gateway.http']}`;
  const env = {
    contacts: { GRPC_PORT: port['contacts.grpc'], OPS_PORT: port['contacts.ops'] },
    'cascade-scheduler': { GRPC_PORT: port['scheduler.grpc'], OPS_PORT: port['scheduler.ops'], CONTACTS_ADDR: `127.0.0.1:${port['contacts.grpc']}`, PUBLIC_BASE_URL: gatewayUrl, DELAY_MINUTE_MS: MINUTE_MS, RECIPIENT_QUOTA_PRO: '1000000/100000000' },
    'channel-email': { OPS_PORT: port['email.ops'], SMTP_URL: smtpUrl, EMAIL_FROM: 'Reviews <no-reply@chaos.test>' },
    'channel-sms': { OPS_PORT: port['sms.ops'], SMS_RECEIPTS_HOST: '127.0.0.1', SMS_RECEIPTS_PORT: port['sms.receipts'], CONTACTS_ADDR: `127.0.0.1:${port['contacts.grpc']}`, SMSC_URL: smscUrl, SMSC_LOGIN: 'bench', SMSC_PASSWORD: 'secret', SMSC_TIMEOUT_MS: 3_000 },
    webhooks: { GRPC_PORT: port['webhooks.grpc'], OPS_PORT: port['webhooks.ops'], WEBHOOK_SECRET_KEYS: randomBytes(32).toString('base64'), WEBHOOK_ALLOW_LOOPBACK_HTTP: 'true', WEBHOOK_RETRY_SCHEDULE_MS: '0,500,1000,2000,3000,5000,5000,5000,5000,5000,5000,5000,5000,5000,5000,5000,5000,5000,5000,5000', WEBHOOK_TIMEOUT_MS: 3_000 },
    gateway: { PORT: port['gateway.http'], CONTACTS_ADDR: `127.0.0.1:${port['contacts.grpc']}`, SCHEDULER_ADDR: `127.0.0.1:${port['scheduler.grpc']}`, WEBHOOKS_ADDR: `127.0.0.1:${port['webhooks.grpc']}`, PUBLIC_BASE_URL: gatewayUrl, ADMIN_TOKEN, RATE_LIMIT_PRO: 1_000_000, METRICS_PORT: 0 },
  };
  const probes = { contacts: 'contacts.ops', 'cascade-scheduler': 'scheduler.ops', 'channel-email': 'email.ops', 'channel-sms': 'sms.ops', webhooks: 'webhooks.ops', gateway: 'gateway.http' };
  const procs = {};
  const spawnService = (name) => {
    const p = startProcess(name, process.execPath, ['dist/main.js'], { cwd: join(ROOT, 'services', name), env: { ...base, ...Object.fromEntries(Object.entries(env[name]).map(([k, v]) => [k, String(v)])) } });
    procs[name] = p;
    return p;
  };
  const ready = (name) => until(`${name} ready`, async () => {
    if (!procs[name].alive()) throw new Error(`${name} exited:\n${procs[name].output().slice(-3000)}`);
    const path = name === 'gateway' ? '/healthz' : '/readyz';
    const res = await fetch(`http://127.0.0.1:${port[probes[name]]}${path}`);
    return res.status === 200;
  }, { timeoutMs: 60_000 });
  for (const name of SERVICE_NAMES) {
    spawnService(name);
    // Each migrates its own tables; one at a time keeps the start order of the chart's init ordering.
    await ready(name).catch((err) => {
      throw new Error(`${name}: ${err.message}\n${procs[name].output().slice(-3000)}`);
    });
  }
  return { procs, port, gatewayUrl, spawnService, ready, stopAll: async () => Promise.all(Object.values(procs).map((p) => stopProcess(p, 'SIGTERM', 8_000))) };
}

// ---------------------------------------------------------------- API helpers
async function api(base, method, path, token, body) {
  const res = await fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'idempotency-key': randomBytes(8).toString('hex') }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not json */
  }
  return { status: res.status, json, text };
}
async function must(base, method, path, token, body, expected) {
  const r = await api(base, method, path, token, body);
  if (!expected.includes(r.status)) throw new Error(`${method} ${path}: ${r.status} ${r.text.slice(0, 400)}`);
  return r.json;
}

async function seed(gatewayUrl, receiverPort) {
  const org = await must(gatewayUrl, 'POST', '/admin/v1/organizations', ADMIN_TOKEN, { name: 'Chaos Coffee', plan: 'pro', emailConfirmed: true, smsBalance: 1_000_000, timeZone: 'UTC', locale: 'en', defaultRegion: 'RU', sendWindow: null, responseWindowMinutes: 0 }, [201]);
  const organizationId = org.id ?? org.organization?.id;
  for (const channel of ['EMAIL', 'SMS']) await must(gatewayUrl, 'PUT', `/admin/v1/organizations/${organizationId}/channels/${channel}`, ADMIN_TOKEN, { configured: true }, [200]);
  const location = await must(gatewayUrl, 'POST', `/admin/v1/organizations/${organizationId}/locations`, ADMIN_TOKEN, { name: 'Chaos cafe', address: 'a', city: 'c', timeZone: 'UTC' }, [201]);
  const flow = await must(gatewayUrl, 'POST', `/admin/v1/organizations/${organizationId}/flows`, ADMIN_TOKEN, { name: 'Email then SMS', isDefault: true, responseWindowMinutes: 0, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 1 }] }, [201]);
  const key = await must(gatewayUrl, 'POST', `/admin/v1/organizations/${organizationId}/api-keys`, ADMIN_TOKEN, { name: 'chaos' }, [201]);
  const apiKey = key.secret ?? key.key ?? key.apiKey;
  // The catalog is live: wait until both senders announced their channels to the gateway.
  await until('EMAIL and SMS in the channel catalog', async () => {
    const r = await api(gatewayUrl, 'GET', '/api/v1/channels', apiKey);
    const keys = JSON.stringify(r.json);
    return r.status === 200 && keys.includes('EMAIL') && keys.includes('SMS');
  }, { timeoutMs: 30_000 });
  const hook = await must(gatewayUrl, 'POST', '/api/v1/webhooks', apiKey, { url: `http://127.0.0.1:${receiverPort}/hooks`, events: ['cascade.recipient.finished', 'cascade.recipient.rated'], description: 'chaos' }, [201]);
  return { organizationId, locationId: location.id ?? location.location?.id, flowId: flow.id ?? flow.flow?.id, apiKey, secret: hook.secret };
}

// ---------------------------------------------------------------- ratings through the form
async function rateThroughForm(gatewayUrl, token, rating) {
  const page = await fetch(`${gatewayUrl}/r/${token}`, { redirect: 'manual' });
  const html = await page.text();
  const cookies = (page.headers.getSetCookie?.() ?? []).map((c) => c.split(';')[0]).join('; ');
  const csrf = /name="csrf"\s+value="([^"]+)"/.exec(html)?.[1] ?? /value="([^"]+)"\s+name="csrf"/.exec(html)?.[1];
  if (page.status !== 200 || !csrf) return { ok: false, status: page.status };
  const res = await fetch(`${gatewayUrl}/r/${token}/rating`, { method: 'POST', redirect: 'manual', headers: { cookie: cookies, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ rating: String(rating), csrf }).toString() });
  await res.arrayBuffer();
  return { ok: res.status === 303 || res.status === 200, status: res.status };
}

function tokenOf(raw) {
  // Quoted-printable soft breaks and =3D would hide the link: undo them first.
  const text = raw.toString('utf8').replace(/=\r?\n/g, '').replace(/=3D/gi, '=');
  return /\/r\/([A-Za-z0-9_-]{8,})/.exec(text)?.[1];
}

// ---------------------------------------------------------------- one run
async function runOnce(fault, cluster, shape) {
  const RECIPIENTS = shape.recipients;
  const runDir = mkdtempSync(join(cluster.top, `run-${fault}-`));
  const runCleanups = [];
  const row = { fault, recipients: 0, stepsSent: 0, duplicates: 0, inWindow: 0, lost: 0, lostRatings: 0, lostWebhooks: 0, lateRatings: 0, recovery: null, ok: false, problems: [] };
  const t0 = Date.now();
  let services;
  try {
    const database = `chaos_${fault.replace(/-/g, '_')}_${randomBytes(3).toString('hex')}`;
    await query(cluster.pgUrl, `CREATE DATABASE ${database}`);
    const databaseUrl = cluster.pgUrl.replace(/\/postgres$/, `/${database}`);
    const prefix = `chaos${randomBytes(3).toString('hex')}`;
    const smtp = await startSmtpSink({ keepMessages: true, keepRaw: true });
    runCleanups.push(() => smtp.close());
    const smsc = await startFakeSmsc({ keepMessages: true, duplicateWindowMs: 1 });
    runCleanups.push(() => smsc.close());
    const receiver = await startReceiver();
    runCleanups.push(() => receiver.close());
    services = await shape.startServices({ databaseUrl, natsUrl: cluster.natsUrl, prefix, smtpUrl: smtp.url, smscUrl: smsc.url, runDir, cluster });
    runCleanups.push(() => services.stopAll());
    const s = await seed(services.gatewayUrl, receiver.port);
    receiver.state.secret = s.secret;
    log(`${fault}: services up in ${((Date.now() - t0) / 1000).toFixed(1)} s; starting ${RECIPIENTS} recipients`);

    // Intake: batches of 500, as the API allows.
    const intakeAt = Date.now();
    const cascades = [];
    const recipients = [];
    for (let i = 0; i < RECIPIENTS; i += 500) {
      const batch = [];
      for (let j = i; j < Math.min(RECIPIENTS, i + 500); j++) {
        const r = { name: `R${j}`, email: `r${j}@chaos.test`, phone: `+7916${String(1_000_000 + j).padStart(7, '0')}` };
        batch.push(r);
        recipients.push(r);
      }
      const started = await must(services.gatewayUrl, 'POST', '/api/v1/cascades', s.apiKey, { locationId: s.locationId, flowId: s.flowId, recipients: batch }, [202]);
      cascades.push(started.id);
    }
    row.recipients = recipients.length;

    // Ratings: every RATE_EVERY-th recipient rates once its email arrived, through the form. A rating
    // answered 503 (keep trying) is retried, bounded, as the page itself would.
    const toRate = new Map(recipients.filter((_, i) => i % RATE_EVERY === 0).map((r, i) => [r.email, { rating: (i % 5) + 1, done: false, tries: 0 }]));
    let raterStop = false;
    const rater = (async () => {
      for (let loop = 0; loop < 5_000 && !raterStop; loop++) {
        for (const m of smtp.messages) {
          const want = toRate.get(m.to[0]);
          if (!want || want.done || want.tries >= 60) continue;
          const token = tokenOf(m.raw ?? Buffer.alloc(0));
          if (!token) continue;
          want.tries++;
          const r = await rateThroughForm(services.gatewayUrl, token, want.rating).catch(() => ({ ok: false }));
          if (r.ok) want.done = true;
        }
        if ([...toRate.values()].every((w) => w.done || w.tries >= 60)) break;
        await sleep(300);
      }
    })();

    // The fault, once traffic flows: a third of the emails out.
    await until('a third of the emails sent', () => Promise.resolve(smtp.count >= RECIPIENTS / 3), { timeoutMs: 120_000, intervalMs: 100 });
    const faultStart = Date.now();
    const faultEnd = await shape.injectFault(fault, { services, cluster, receiver });
    const sentAtFaultEnd = smtp.count + smsc.count;
    const hooksAtFaultEnd = receiver.state.events.size;
    const ratedAtFaultEnd = receiver.state.rated.size;
    // A fault that lasts as long as the work (a rolling restart of every service on a loaded machine) can
    // see every recipient's finish event arrive while it is still going on: nothing is left to recover,
    // and no traffic follows it.
    const finishedDuringFault = hooksAtFaultEnd >= recipients.length;
    log(`${fault}: fault ${((faultEnd - faultStart) / 1000).toFixed(1)} s${finishedDuringFault ? '; every recipient finished during it' : ''}`);

    // Recovery: the first provider send or webhook after the fault ended, with no action from here.
    const recovered = finishedDuringFault
      ? Promise.resolve(faultEnd)
      : until('traffic after the fault', () => Promise.resolve(smtp.count + smsc.count > sentAtFaultEnd || receiver.state.events.size > hooksAtFaultEnd || receiver.state.rated.size > ratedAtFaultEnd ? Date.now() : 0), { timeoutMs: SETTLE_TIMEOUT_MS, intervalMs: 100 }).catch(() => null);

    // Settled: every recipient finished in the database (as GET /cascades reports it) and its event received,
    // and every step that reached its provider reported `sent`. The last can come after the recipient
    // finished: a rating cancels a step in flight, and the step's result, held by a killed scheduler until
    // its consumer's ack wait ran out, turns it `sent` later (docs/cascades.md). Never reaching that state
    // within the timeout is what the assertions below report as lost.
    const recipientByEmail = new Map(recipients.map((r) => [r.email, r]));
    const reachedProvider = (state, step) => {
      const r = recipientByEmail.get(state.email);
      if (!r) return false;
      return step.channel === 'EMAIL' ? smtp.timesAccepted(r.email) > 0 : smsc.timesAccepted(r.phone.replace(/^\+/, '')) + smsc.timesAccepted(r.phone) > 0;
    };
    let states = [];
    const settleDeadline = Date.now() + SETTLE_TIMEOUT_MS;
    for (let i = 0; i < 2_000 && Date.now() < settleDeadline; i++) {
      states = [];
      let okRead = true;
      for (const id of cascades) {
        const r = await api(services.gatewayUrl, 'GET', `/api/v1/cascades/${id}`, s.apiKey).catch(() => null);
        if (!r || r.status !== 200) {
          okRead = false;
          break;
        }
        states.push(...r.json.recipients);
      }
      const ratingsDone = [...toRate.values()].every((w) => w.done || w.tries >= 60);
      if (okRead && ratingsDone && states.length === recipients.length && states.every((r) => r.status === 'finished') && states.every((r) => receiver.state.events.has(r.id)) && states.every((r) => r.rating === null || r.finishReason === 'rated' || receiver.state.rated.has(r.id)) && states.every((r) => (r.steps ?? []).every((step) => step.status === 'sent' || !reachedProvider(r, step)))) break;
      await sleep(1_000);
    }
    // End to end: the first request to everything settled (the fault's run against the undisturbed one).
    row.e2e = (Date.now() - intakeAt) / 1000;
    raterStop = true;
    await rater;
    // Longer than the poll above, so traffic that came just before the settle is seen.
    const recoveredAt = await Promise.race([recovered, sleep(250).then(() => null)]);
    row.recovery = recoveredAt ? (recoveredAt - faultEnd) / 1000 : null;
    // Late duplicates would come after the settle: give the senders a short grace to show them.
    await sleep(2_000);

    // ---------------- assertions
    const byEmail = new Map(states.map((r) => [r.email, r]));
    let stepsSent = 0;
    let dupEmail = 0;
    let dupSms = 0;
    let lostSteps = 0;
    for (const r of recipients) {
      const st = byEmail.get(r.email);
      const emailTimes = smtp.timesAccepted(r.email);
      const smsTimes = smsc.timesAccepted(r.phone.replace(/^\+/, '')) + smsc.timesAccepted(r.phone);
      if (emailTimes > 1) dupEmail += emailTimes - 1;
      if (smsTimes > 1) dupSms += smsTimes - 1;
      stepsSent += Math.min(emailTimes, 1) + Math.min(smsTimes, 1);
      if (!st) {
        lostSteps++;
        continue;
      }
      if (st.status !== 'finished') {
        lostSteps++;
        row.problems.push(`recipient ${st.id} still ${st.status}: ${JSON.stringify(st.steps?.map((x) => `${x.channel}:${x.status}`))}`);
        continue;
      }
      // A step reported sent reached its provider; a step that reached its provider is reported sent.
      for (const step of st.steps ?? []) {
        const times = step.channel === 'EMAIL' ? emailTimes : smsTimes;
        if (step.status === 'sent' && times === 0) {
          lostSteps++;
          row.problems.push(`recipient ${st.id}: ${step.channel} reported sent, never reached the provider`);
        }
        if (step.status !== 'sent' && times > 0) {
          lostSteps++;
          row.problems.push(`recipient ${st.id}: ${step.channel} reached the provider but is ${step.status}`);
        }
        if (step.status === 'failed') {
          lostSteps++;
          row.problems.push(`recipient ${st.id}: ${step.channel} failed (${step.reason})`);
        }
      }
    }
    let lostRatings = 0;
    for (const [email, want] of toRate) {
      const st = byEmail.get(email);
      if (want.done && st?.rating !== want.rating) {
        lostRatings++;
        row.problems.push(`rating ${want.rating} of ${email} accepted by the form, recipient has ${st?.rating ?? 'none'}`);
      }
      if (!want.done) row.problems.push(`rating of ${email} never accepted by the form (${want.tries} tries)`);
    }
    let lostWebhooks = 0;
    for (const st of states) {
      const events = receiver.state.events.get(st.id) ?? [];
      const distinct = new Set(events.map((e) => e.webhookId));
      const last = events.at(-1)?.data;
      if (events.length === 0) {
        lostWebhooks++;
        continue;
      }
      if (distinct.size > 1) row.problems.push(`recipient ${st.id}: ${distinct.size} distinct finish events`);
      const late = (receiver.state.rated.get(st.id) ?? []).at(-1)?.data;
      if (late) row.lateRatings++;
      const rating = late?.rating ?? last.rating;
      if (last.reason !== st.finishReason || rating !== st.rating) {
        lostWebhooks++;
        row.problems.push(`recipient ${st.id}: events say ${last.reason}/${rating}${late ? ' (late rating)' : ''}, database ${st.finishReason}/${st.rating}`);
      }
    }
    if (receiver.state.bad) row.problems.push(`${receiver.state.bad} webhook requests with a bad signature`);
    // docs/channels.md "What can still be sent twice": an email is sent again on a resumed send after a
    // sender death (W1), the database down under the sender (W1), or its NATS connection lost (W4);
    // SMS is closed by status.php in every window. Which faults open a window is the shape's list.
    const emailWindow = shape.emailWindow.includes(fault);
    row.inWindow = emailWindow ? dupEmail : 0;
    row.duplicates = dupSms + (emailWindow ? 0 : dupEmail);
    row.stepsSent = stepsSent;
    row.lost = lostSteps;
    row.lostRatings = lostRatings;
    row.lostWebhooks = lostWebhooks;
    const unrated = [...toRate.values()].filter((w) => !w.done).length;
    row.ok = row.lost === 0 && row.lostRatings === 0 && row.lostWebhooks === 0 && row.duplicates === 0 && unrated === 0 && receiver.state.bad === 0 && row.recovery !== null;
    if (!row.ok) {
      log(`${fault}: FAILED — ${row.problems.length} problem(s); first ones:`);
      for (const p of row.problems.slice(0, 15)) log(`   ${p}`);
      for (const [name, p] of Object.entries(services.procs)) {
        const errs = p.output().split('\n').filter((l) => /"level":(50|60)|error/i.test(l)).slice(-5);
        if (errs.length) log(`   ${name} errors (last ${errs.length}):\n     ${errs.map((l) => l.slice(0, 400)).join('\n     ')}`);
      }
    }
  } catch (err) {
    row.problems.push(err.message);
    log(`${fault}: ERROR ${err.stack ?? err.message}`);
  } finally {
    for (const fn of runCleanups.reverse()) await fn().catch((e) => log(`cleanup: ${e.message}`));
    if (!process.env.CHAOS_KEEP) rmSync(runDir, { recursive: true, force: true });
  }
  row.seconds = (Date.now() - t0) / 1000;
  return row;
}

/** Injects the fault; returns when it ended (the process restarted, the server back, the receiver healthy). */
async function injectFault(fault, { services, cluster, receiver }) {
  const killService = async (name) => {
    const p = services.procs[name];
    p.child.kill('SIGKILL');
    await p.exited;
    // Restarted as its Deployment would: at once, same configuration.
    services.spawnService(name);
    await services.ready(name);
    return Date.now();
  };
  switch (fault) {
    case 'kill-scheduler':
      return killService('cascade-scheduler');
    case 'kill-email':
      return killService('channel-email');
    case 'kill-sms': {
      // Wait until SMS steps flow, so the kill lands on held ones.
      await sleep(1_500);
      return killService('channel-sms');
    }
    case 'kill-webhooks':
      return killService('webhooks');
    case 'restart-nats': {
      await stopProcess(cluster.nats, 'SIGTERM', 10_000);
      await sleep(2_000);
      cluster.nats = await startNats(cluster.natsDir, cluster.natsPort);
      return Date.now();
    }
    case 'restart-postgres': {
      pgCtl(cluster.pgDir, cluster.pgPort, 'stop');
      await sleep(3_000);
      pgCtl(cluster.pgDir, cluster.pgPort, 'start');
      return Date.now();
    }
    case 'receiver-500': {
      receiver.state.failing = true;
      await sleep(10_000);
      receiver.state.failing = false;
      return Date.now();
    }
    default:
      throw new Error(`unknown fault ${fault} (known: ${ALL_FAULTS.join(', ')})`);
  }
}

// ---------------------------------------------------------------- cluster shape
// Production's shape on one host: a three-node nats-server cluster (routes between all, R3 streams), a
// PostgreSQL primary with an async streaming replica behind a TCP proxy (the stable address a `-rw`
// Service or HAProxy gives), two replicas of every service (gRPC callers balance over both, `ipv4:` list
// targets), two gateways behind a round-robin TCP balancer that follows /readyz.
/** `none` is the undisturbed run the others' end-to-end times compare with (a rolling restart: ≤ 1.5 ×). */
const CLUSTER_FAULTS = ['none', 'kill-one-of-each', 'kill-steps-leader', 'rolling-restart', 'postgres-failover'];
const CLUSTER_RECIPIENTS = Number(process.env.CHAOS_CLUSTER_RECIPIENTS ?? 600);
const REPLICAS = 2;
const { connect: natsConnect } = require('nats');

/** A TCP proxy on `port` to the port `pick()` returns per connection; `cutAll` drops every proxied connection. */
function startTcpProxy(port, pick) {
  const open = new Set();
  const server = net.createServer((client) => {
    const target = pick();
    if (!target) return client.destroy();
    const upstream = net.connect(target, '127.0.0.1');
    const pair = { client, upstream, target };
    open.add(pair);
    const end = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  return new Promise((ok) =>
    server.listen(port, '127.0.0.1', () =>
      ok({
        cutAll: () => {
          for (const p of [...open]) (p.client.destroy(), p.upstream.destroy());
        },
        close: () => new Promise((r) => (server.close(r), [...open].forEach((p) => (p.client.destroy(), p.upstream.destroy())))),
      }),
    ),
  );
}

async function startNatsNodes(top) {
  const ports = await freePorts(6);
  const nodes = [0, 1, 2].map((i) => ({ name: `n${i}`, port: ports[i], routePort: ports[3 + i], dir: join(top, `nats-n${i}`), proc: null }));
  const routes = nodes.map((n) => `nats-route://127.0.0.1:${n.routePort}`);
  for (const [i, n] of nodes.entries()) {
    execFileSync('mkdir', ['-p', n.dir]);
    const conf = [`server_name: ${n.name}`, `listen: 127.0.0.1:${n.port}`, `jetstream { store_dir: "${n.dir}" }`, `cluster { name: rrs-chaos, listen: 127.0.0.1:${n.routePort}, routes: [${routes.filter((_, j) => j !== i).join(', ')}] }`].join('\n');
    execFileSync('sh', ['-c', `cat > ${join(n.dir, 'node.conf')}`], { input: conf });
  }
  const start = async (i) => {
    const n = nodes[i];
    n.proc = startProcess(`nats-${n.name}`, 'nats-server', ['-c', join(n.dir, 'node.conf')]);
    await until(`nats ${n.name}`, () => new Promise((ok) => {
      const sock = net.connect(n.port, '127.0.0.1', () => (sock.destroy(), ok(true)));
      sock.on('error', () => ok(false));
    }), { timeoutMs: 15_000 });
  };
  await Promise.all(nodes.map((_, i) => start(i)));
  const url = nodes.map((n) => `nats://127.0.0.1:${n.port}`).join(',');
  // Not only a meta leader: every node reported in, or an R3 stream created now finds no peers.
  await untilJetStreamPlaces(url.split(','), nodes.length);
  return { nodes, url, start, kill: async (i) => (nodes[i].proc.child.kill('SIGKILL'), await nodes[i].proc.exited) };
}

async function startPostgresPair(top) {
  const [proxyPort, primaryPort, replicaPort] = await freePorts(3);
  const primaryDir = join(top, 'pg-primary');
  const replicaDir = join(top, 'pg-replica');
  execFileSync('mkdir', ['-p', primaryDir, replicaDir]);
  // A commit is acknowledged once the standby has it (CloudNativePG's minSyncReplicas: 1, Patroni's
  // synchronous_mode): a failover loses no acknowledged commit. With an asynchronous standby the last
  // commits before the crash can be lost — a step result lost so shows as a sent step 'canceled'.
  const primaryUrl = await startPostgresCluster(primaryDir, primaryPort, `-c synchronous_commit=remote_write -c synchronous_standby_names=walreceiver`);
  if (asRoot) execFileSync('chown', ['-R', 'postgres', replicaDir]);
  // An async streaming replica, as a database operator sets one up: a base backup with its recovery settings.
  pgRun('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', join(replicaDir, 'data'), '-R', '-X', 'stream', '--no-sync']);
  pgCtl(replicaDir, replicaPort, 'start');
  await until('replica streaming', async () => (await query(primaryUrl, `SELECT count(*)::int AS n FROM pg_stat_replication WHERE state = 'streaming'`)).rows[0].n === 1, { timeoutMs: 30_000 });
  const pair = { proxyPort, primaryPort, replicaPort, primaryDir, replicaDir, target: primaryPort, primaryAlive: true };
  pair.proxy = await startTcpProxy(proxyPort, () => pair.target);
  pair.url = `postgres://postgres@127.0.0.1:${proxyPort}/postgres`;
  return pair;
}

async function startClusterServices({ databaseUrl, natsUrl, prefix, smtpUrl, smscUrl, runDir }) {
  const names = [];
  for (let r = 0; r < REPLICAS; r++) names.push(`contacts.grpc${r}`, `contacts.ops${r}`, `scheduler.grpc${r}`, `scheduler.ops${r}`, `email.ops${r}`, `sms.ops${r}`, `sms.receipts${r}`, `webhooks.grpc${r}`, `webhooks.ops${r}`, `gateway.http${r}`);
  names.push('gateway.lb');
  const picked = await freePorts(names.length);
  const port = Object.fromEntries(names.map((n, i) => [n, picked[i]]));
  const list = (key) => `ipv4:${Array.from({ length: REPLICAS }, (_, r) => `127.0.0.1:${port[`${key}${r}`]}`).join(',')}`;
  const gatewayUrl = `http://127.0.0.1:${port['gateway.lb']}`;
  const base = { PATH: process.env.PATH, NODE_ENV: 'development', LOG_LEVEL: 'warn', TZ: 'UTC', DATABASE_URL: databaseUrl, NATS_URL: natsUrl, BUS_STREAM_REPLICAS: 3, BUS_PREFIX: prefix, GRPC_HOST: '127.0.0.1', OPS_HOST: '127.0.0.1', HOST: '127.0.0.1', DATA_DIR: runDir };
  const webhookKeys = randomBytes(32).toString('base64');
  const envOf = (name, r) => ({
    contacts: { GRPC_PORT: port[`contacts.grpc${r}`], OPS_PORT: port[`contacts.ops${r}`] },
    'cascade-scheduler': { GRPC_PORT: port[`scheduler.grpc${r}`], OPS_PORT: port[`scheduler.ops${r}`], CONTACTS_ADDR: list('contacts.grpc'), PUBLIC_BASE_URL: gatewayUrl, DELAY_MINUTE_MS: MINUTE_MS },
    'channel-email': { OPS_PORT: port[`email.ops${r}`], SMTP_URL: smtpUrl, EMAIL_FROM: 'Reviews <no-reply@chaos.test>' },
    'channel-sms': { OPS_PORT: port[`sms.ops${r}`], SMS_RECEIPTS_HOST: '127.0.0.1', SMS_RECEIPTS_PORT: port[`sms.receipts${r}`], CONTACTS_ADDR: list('contacts.grpc'), SMSC_URL: smscUrl, SMSC_LOGIN: 'bench', SMSC_PASSWORD: 'secret', SMSC_TIMEOUT_MS: 3_000 },
    webhooks: { GRPC_PORT: port[`webhooks.grpc${r}`], OPS_PORT: port[`webhooks.ops${r}`], WEBHOOK_SECRET_KEYS: webhookKeys, WEBHOOK_ALLOW_LOOPBACK_HTTP: 'true', WEBHOOK_RETRY_SCHEDULE_MS: '0,500,1000,2000,3000,5000,5000,5000,5000,5000,5000,5000,5000,5000,5000,5000,5000,5000,5000,5000', WEBHOOK_TIMEOUT_MS: 3_000 },
    gateway: { PORT: port[`gateway.http${r}`], CONTACTS_ADDR: list('contacts.grpc'), SCHEDULER_ADDR: list('scheduler.grpc'), WEBHOOKS_ADDR: list('webhooks.grpc'), PUBLIC_BASE_URL: gatewayUrl, ADMIN_TOKEN, RATE_LIMIT_PRO: 1_000_000, RECIPIENT_QUOTA_PRO: '1000000/100000000', METRICS_PORT: 0, SHUTDOWN_DRAIN_MS: 1_000 },
  })[name];
  const probeOf = { contacts: 'contacts.ops', 'cascade-scheduler': 'scheduler.ops', 'channel-email': 'email.ops', 'channel-sms': 'sms.ops', webhooks: 'webhooks.ops', gateway: 'gateway.http' };
  const procs = {};
  const spawnService = (name, r) => {
    const p = startProcess(`${name}#${r}`, process.execPath, ['dist/main.js'], { cwd: join(ROOT, 'services', name), env: { ...base, ...Object.fromEntries(Object.entries(envOf(name, r)).map(([k, v]) => [k, String(v)])) } });
    procs[`${name}#${r}`] = p;
    return p;
  };
  const readyUrl = (name, r) => `http://127.0.0.1:${port[`${probeOf[name]}${r}`]}/readyz`;
  const ready = (name, r) => until(`${name}#${r} ready`, async () => {
    const p = procs[`${name}#${r}`];
    if (!p.alive()) throw new Error(`${name}#${r} exited:\n${p.output().slice(-3000)}`);
    return (await fetch(readyUrl(name, r))).status === 200;
  }, { timeoutMs: 120_000 });
  // The balancer in front of the gateways: round robin over those whose /readyz answered 200 last.
  const gatewayReady = Array.from({ length: REPLICAS }, () => false);
  let next = 0;
  const lb = await startTcpProxy(port['gateway.lb'], () => {
    for (let i = 0; i < REPLICAS; i++) {
      const r = (next + i) % REPLICAS;
      if (gatewayReady[r]) return (next = r + 1), port[`gateway.http${r}`];
    }
    return null;
  });
  let probing = true;
  const prober = (async () => {
    for (let i = 0; i < 100_000 && probing; i++) {
      await Promise.all(gatewayReady.map(async (_, r) => {
        gatewayReady[r] = await fetch(readyUrl('gateway', r), { signal: AbortSignal.timeout(1_000) }).then((res) => res.status === 200, () => false);
      }));
      await sleep(200);
    }
  })();
  // The first replica of each, one at a time (each migrates its tables), then the second ones together.
  for (const name of SERVICE_NAMES) {
    spawnService(name, 0);
    await ready(name, 0).catch((err) => {
      throw new Error(`${name}#0: ${err.message}\n${procs[`${name}#0`].output().slice(-3000)}`);
    });
  }
  await Promise.all(SERVICE_NAMES.map((name) => (spawnService(name, 1), ready(name, 1))));
  await until('both gateways behind the balancer', () => Promise.resolve(gatewayReady.every(Boolean)), { timeoutMs: 10_000 });
  return {
    procs, port, gatewayUrl, prefix, spawnService, ready,
    stopAll: async () => {
      probing = false;
      await prober;
      await lb.close();
      await Promise.all(Object.values(procs).map((p) => stopProcess(p, 'SIGTERM', 8_000)));
    },
  };
}

async function injectClusterFault(fault, { services, cluster }) {
  const restart = async (name, r, signal) => {
    const p = services.procs[`${name}#${r}`];
    if (signal === 'SIGKILL') {
      p.child.kill('SIGKILL');
      await p.exited;
    } else {
      await stopProcess(p, 'SIGTERM', 30_000);
    }
    services.spawnService(name, r);
    await services.ready(name, r);
  };
  switch (fault) {
    case 'none':
      return Date.now();
    case 'kill-one-of-each': {
      // kill -9 of one replica of every service at once; each restarted as its Deployment would.
      await Promise.all(SERVICE_NAMES.map((name) => restart(name, 0, 'SIGKILL')));
      return Date.now();
    }
    case 'kill-steps-leader': {
      const nc = await natsConnect({ servers: cluster.natsUrl.split(',') });
      let leader;
      try {
        leader = (await (await nc.jetstreamManager()).streams.info(`${services.prefix.toUpperCase()}_STEPS`)).cluster?.leader;
      } finally {
        await nc.close();
      }
      const i = cluster.natsNodes.nodes.findIndex((n) => n.name === leader);
      if (i < 0) throw new Error(`STEPS has no leader among the nodes (${leader})`);
      await cluster.natsNodes.kill(i);
      const lostAt = Date.now();
      log(`kill-steps-leader: killed ${leader}; it comes back in 10 s`);
      // The node is lost now (that is the fault); it comes back later, as a StatefulSet pod would.
      cluster.pending = sleep(10_000).then(() => cluster.natsNodes.start(i));
      return lostAt;
    }
    case 'rolling-restart': {
      // Every deployment, one replica at a time: SIGTERM, drain, start, ready; then the next.
      for (const name of SERVICE_NAMES) for (let r = 0; r < REPLICAS; r++) await restart(name, r, 'SIGTERM');
      return Date.now();
    }
    case 'postgres-failover': {
      const pair = cluster.pg;
      // The primary crashes (immediate shutdown: no checkpoint, sessions cut), the replica is promoted,
      // and the stable address switches to it 2 s later; the services reconnect by themselves.
      pgRun('pg_ctl', ['-D', join(pair.primaryDir, 'data'), '-w', '-m', 'immediate', 'stop']);
      pair.proxy.cutAll();
      pair.target = null;
      await sleep(2_000);
      pgRun('pg_ctl', ['-D', join(pair.replicaDir, 'data'), '-w', 'promote']);
      pair.target = pair.replicaPort;
      pair.primaryAlive = false;
      return Date.now();
    }
    default:
      throw new Error(`unknown cluster fault ${fault} (known: ${CLUSTER_FAULTS.join(', ')})`);
  }
}

async function runClusterShape(top, faults) {
  const cluster = { top };
  cluster.natsNodes = await startNatsNodes(top);
  cleanups.push(async () => Promise.all(cluster.natsNodes.nodes.map((n) => stopProcess(n.proc, 'SIGKILL'))));
  cluster.natsUrl = cluster.natsNodes.url;
  cluster.pg = await startPostgresPair(top);
  cleanups.push(async () => {
    await cluster.pg.proxy.close();
    for (const dir of [cluster.pg.primaryDir, cluster.pg.replicaDir]) {
      try {
        pgRun('pg_ctl', ['-D', join(dir, 'data'), '-w', '-m', 'immediate', 'stop']);
      } catch {
        /* already down */
      }
    }
  });
  cluster.pgUrl = cluster.pg.url;
  log(`cluster: nats ${cluster.natsNodes.nodes.map((n) => n.port).join('/')}, PostgreSQL primary ${cluster.pg.primaryPort} + replica ${cluster.pg.replicaPort} behind ${cluster.pg.proxyPort}`);
  const shape = { recipients: CLUSTER_RECIPIENTS, startServices: startClusterServices, injectFault: injectClusterFault, emailWindow: ['kill-one-of-each', 'kill-steps-leader', 'postgres-failover'] };
  const rows = [];
  // The failover last: after it there is no replica left.
  for (const fault of [...faults].sort((a, b) => (a === 'postgres-failover') - (b === 'postgres-failover'))) {
    const row = await runOnce(fault, cluster, shape);
    await cluster.pending;
    rows.push(row);
    log(`cluster ${fault}: ${row.ok ? 'ok' : 'FAIL'} in ${row.seconds.toFixed(0)} s`);
  }
  return rows;
}

// ---------------------------------------------------------------- main
function printRows(title, rows) {
  const header = ['fault', 'recipients', 'steps sent', 'duplicates', 'in-window duplicates', 'lost steps', 'lost ratings', 'lost webhooks', 'late ratings', 'recovery s', 'e2e s', 'run s', 'result'];
  const lines = [header, ...rows.map((r) => [r.fault, r.recipients, r.stepsSent, r.duplicates, r.inWindow, r.lost, r.lostRatings, r.lostWebhooks, r.lateRatings, r.recovery === null ? '—' : r.recovery.toFixed(1), r.e2e === undefined ? '—' : r.e2e.toFixed(1), r.seconds.toFixed(0), r.ok ? 'pass' : 'FAIL'])];
  console.log(`\n${title}\n\n| ` + lines[0].join(' | ') + ' |\n|' + lines[0].map(() => '---').join('|') + '|\n' + lines.slice(1).map((l) => '| ' + l.join(' | ') + ' |').join('\n') + '\n');
}

/** CHAOS_SHAPE: `single` (one of each service, one nats-server, one PostgreSQL), `cluster`, or `all` (both, in sequence; the default). */
const SHAPE = process.env.CHAOS_SHAPE ?? 'all';

async function main() {
  if (!['single', 'cluster', 'all'].includes(SHAPE)) throw new Error(`CHAOS_SHAPE must be single, cluster or all (got ${SHAPE})`);
  const clusterFaults = (process.env.CHAOS_CLUSTER_FAULTS ?? CLUSTER_FAULTS.join(',')).split(',').filter(Boolean);
  for (const f of FAULTS) if (!ALL_FAULTS.includes(f)) throw new Error(`unknown fault ${f} (known: ${ALL_FAULTS.join(', ')})`);
  for (const f of clusterFaults) if (!CLUSTER_FAULTS.includes(f)) throw new Error(`unknown cluster fault ${f} (known: ${CLUSTER_FAULTS.join(', ')})`);
  for (const name of SERVICE_NAMES) if (!existsSync(join(ROOT, 'services', name, 'dist', 'main.js'))) throw new Error(`services/${name}/dist/main.js missing: run npm run build`);
  const top = mkdtempSync(join(tmpdir(), 'rrs-chaos-'));
  chmodSync(top, 0o755);
  cleanups.push(async () => {
    if (!process.env.CHAOS_KEEP) rmSync(top, { recursive: true, force: true });
  });
  let ok = true;
  if (SHAPE !== 'cluster') {
    const [natsPort, pgPort] = await freePorts(2);
    const cluster = { top, natsDir: join(top, 'nats'), natsPort, pgDir: join(top, 'pg'), pgPort };
    execFileSync('mkdir', ['-p', cluster.natsDir, cluster.pgDir]);
    cluster.nats = await startNats(cluster.natsDir, natsPort);
    const stopNats = () => stopProcess(cluster.nats);
    cleanups.push(stopNats);
    cluster.natsUrl = `nats://127.0.0.1:${natsPort}`;
    cluster.pgUrl = await startPostgresCluster(cluster.pgDir, pgPort);
    let pgStopped = false;
    const stopPg = async () => {
      if (pgStopped) return;
      pgStopped = true;
      pgCtl(cluster.pgDir, pgPort, 'stop');
    };
    cleanups.push(stopPg);
    log(`private nats-server on ${natsPort}, PostgreSQL on ${pgPort} (${top})`);
    const shape = { recipients: RECIPIENTS, startServices, injectFault, emailWindow: ['kill-email', 'restart-postgres', 'restart-nats'] };
    const rows = [];
    for (const fault of FAULTS) {
      const row = await runOnce(fault, cluster, shape);
      rows.push(row);
      log(`${fault}: ${row.ok ? 'ok' : 'FAIL'} in ${row.seconds.toFixed(0)} s`);
    }
    printRows('Single shape', rows);
    ok &&= rows.every((r) => r.ok);
    // Its servers are not needed by the cluster shape: free the CPU.
    await stopNats();
    await stopPg();
  }
  if (SHAPE !== 'single') {
    const rows = await runClusterShape(top, clusterFaults);
    printRows('Cluster shape', rows);
    ok &&= rows.every((r) => r.ok);
  }
  return ok;
}

let ok = false;
try {
  ok = await main();
} catch (err) {
  console.error(err.stack ?? err.message);
} finally {
  await cleanupAll();
}
process.exit(ok ? 0 : 1);
