// The two shapes bench/send.mjs measures, started from the built dist/ the way they run in production:
// the all-in-one launcher (one process, in-process bus, sink providers) and every service as its own
// process on NATS JetStream (a bench bus prefix) and PostgreSQL. Each Node process is started with its
// image's NODE_OPTIONS, NODE_ENV=production, and the PostgreSQL round-trip counter preloaded
// (bench/lib/pg-round-trips.cjs), with an IPC channel to read it. Loopback only.
import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePorts } from '../../scripts/smoke-service.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const PRELOAD = join(here, 'pg-round-trips.cjs');
const READY_MS = 60_000;

/** The V8 flags an image runs with (`ENV NODE_OPTIONS=…` in its Dockerfile). */
function imageNodeOptions(dockerfile) {
  try {
    const m = /^ENV NODE_OPTIONS=("?)(.*)\1\s*$/m.exec(readFileSync(dockerfile, 'utf8'));
    return m ? m[2].split(/\s+/).filter(Boolean) : [];
  } catch {
    return [];
  }
}

/**
 * The bench organization (plan pro) sends up to 200 000 recipients in minutes, far over the plan's
 * documented recipient budget (docs/api-conventions.md, "Recipient quotas"): the measured processes
 * get a budget that does not bind, as an operator would set it with RECIPIENT_QUOTA_PRO.
 */
const BENCH_RECIPIENT_QUOTA = { RECIPIENT_QUOTA_PRO: '1000000/100000000' };

/** A Node process of the measured system; its last output is kept for the error message if it dies. */
function startNode(name, script, env, { dockerfile, extraEnv }) {
  // BENCH_EXTRA_FLAGS='--flag …': node/V8 flags added to the image's own, for trying one (V8's size flags
  // are refused in NODE_OPTIONS); BENCH_TEE=<file>: every measured process's output appended there.
  const flags = [...imageNodeOptions(dockerfile), ...(process.env.BENCH_EXTRA_FLAGS ? process.env.BENCH_EXTRA_FLAGS.split(' ') : [])];
  // BENCH_CPU_PROF=<dir>: each measured process writes a V8 CPU profile there when it exits (node
  // refuses --cpu-prof in NODE_OPTIONS, so it cannot come through --env).
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`, `--cpu-prof-name=${name}.cpuprofile`] : [];
  const child = spawn(process.execPath, [...flags, ...profile, '--require', PRELOAD, script], {
    cwd: root,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production', LOG_LEVEL: 'warn', ...env, ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  const keep = (d) => {
    output = (output + d).slice(-8_000);
    if (process.env.BENCH_TEE) appendFileSync(process.env.BENCH_TEE, d);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  return { name, child, pid: child.pid, flags, output: () => output };
}

async function waitReady(proc, url) {
  const deadline = Date.now() + READY_MS;
  while (Date.now() < deadline) {
    if (proc.child.exitCode !== null) throw new Error(`${proc.name} exited with ${proc.child.exitCode}:\n${proc.output()}`);
    try {
      if ((await fetch(url)).status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${proc.name} not ready at ${url} after ${READY_MS / 1000} s:\n${proc.output()}`);
}

/** SIGTERM in reverse start order (the gateway first), SIGKILL after 15 s. */
export async function stopAll(processes) {
  for (const proc of [...processes].reverse()) {
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) continue;
    await new Promise((resolve) => {
      const timer = setTimeout(() => proc.child.kill('SIGKILL'), 15_000);
      proc.child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
      proc.child.kill('SIGTERM');
    });
  }
}

/**
 * The all-in-one launcher (packages/all-in-one/dist/main.js) on the given database: its in-process bus,
 * in-memory rate limits, the sink providers; /metrics on its METRICS_PORT and the dev inbox's
 * /dev/messages on its port. The dev inbox exists only outside production, so this shape runs with
 * NODE_ENV=development (nothing it measures depends on it).
 */
export async function startAllInOneShape({ databaseUrl, adminToken, extraEnv }) {
  const [port, metricsPort] = await freePorts(2);
  const dataDir = mkdtempSync(join(tmpdir(), 'rrs-send-bench-'));
  const base = `http://127.0.0.1:${port}`;
  const proc = startNode(
    'all-in-one',
    'packages/all-in-one/dist/main.js',
    { NODE_ENV: 'development', HOST: '127.0.0.1', PORT: String(port), METRICS_PORT: String(metricsPort), DATABASE_URL: databaseUrl, DATA_DIR: dataDir, ADMIN_TOKEN: adminToken, PUBLIC_BASE_URL: base, ...BENCH_RECIPIENT_QUOTA },
    { dockerfile: join(root, 'packages', 'all-in-one', 'Dockerfile'), extraEnv },
  );
  try {
    await waitReady(proc, `${base}/readyz`);
  } catch (err) {
    await stopAll([proc]);
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    processes: [proc],
    gatewayUrl: base,
    sendsMetricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    resultsMetricsUrl: `http://127.0.0.1:${metricsPort}/metrics`,
    devMessagesUrl: `${base}/dev/messages`,
    async stop() {
      await stopAll([proc]);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * contacts, cascade-scheduler, webhooks, the channel's sender and the gateway, each `node
 * services/<name>/dist/main.js` with its env, on JetStream under `busPrefix`; the sender talks to the
 * given provider (`providerEnv`: SMTP_URL, or SMSC_URL/LOGIN/PASSWORD). The gateway uses Redis under
 * `redisPrefix` for rate limits and its auth cache, as in production.
 */
export async function startDistributedShape({ databaseUrl, natsUrl, busPrefix, redisUrl, redisPrefix, adminToken, channel, providerEnv, extraEnv }) {
  const [contactsGrpc, contactsOps, schedulerGrpc, schedulerOps, webhooksGrpc, webhooksOps, senderOps, gatewayPort, gatewayOps] = await freePorts(9);
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  const bus = { NATS_URL: natsUrl, BUS_PREFIX: busPrefix };
  const sender = channel === 'SMS' ? 'channel-sms' : 'channel-email';
  const specs = [
    ['contacts', { DATABASE_URL: databaseUrl, GRPC_HOST: '127.0.0.1', GRPC_PORT: contactsGrpc, OPS_PORT: contactsOps }, contactsOps],
    ['cascade-scheduler', { ...bus, DATABASE_URL: databaseUrl, GRPC_HOST: '127.0.0.1', GRPC_PORT: schedulerGrpc, OPS_PORT: schedulerOps, CONTACTS_ADDR: `127.0.0.1:${contactsGrpc}`, PUBLIC_BASE_URL: gatewayUrl, ...BENCH_RECIPIENT_QUOTA }, schedulerOps],
    ['webhooks', { ...bus, DATABASE_URL: databaseUrl, GRPC_HOST: '127.0.0.1', GRPC_PORT: webhooksGrpc, OPS_HOST: '127.0.0.1', OPS_PORT: webhooksOps, WEBHOOK_SECRET_KEYS: randomBytes(32).toString('base64') }, webhooksOps],
    [sender, { ...bus, DATABASE_URL: databaseUrl, OPS_HOST: '127.0.0.1', OPS_PORT: senderOps, CONTACTS_ADDR: `127.0.0.1:${contactsGrpc}`, SMS_RECEIPTS_HOST: '127.0.0.1', SMS_RECEIPTS_PORT: 0, EMAIL_FROM: 'Bench Reviews <reviews@bench.example.com>', ...providerEnv }, senderOps],
    ['gateway', { ...bus, HOST: '127.0.0.1', PORT: gatewayPort, CONTACTS_ADDR: `127.0.0.1:${contactsGrpc}`, SCHEDULER_ADDR: `127.0.0.1:${schedulerGrpc}`, WEBHOOKS_ADDR: `127.0.0.1:${webhooksGrpc}`, PUBLIC_BASE_URL: gatewayUrl, ADMIN_TOKEN: adminToken, REDIS_URL: redisUrl, REDIS_KEY_PREFIX: redisPrefix, METRICS_PORT: gatewayOps }, gatewayPort],
  ];
  const processes = [];
  try {
    for (const [name, env, port] of specs) {
      const stringEnv = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)]));
      const proc = startNode(name, `services/${name}/dist/main.js`, stringEnv, { dockerfile: join(root, 'services', name, 'Dockerfile'), extraEnv });
      processes.push(proc);
      await waitReady(proc, `http://127.0.0.1:${port}/readyz`);
    }
  } catch (err) {
    await stopAll(processes);
    throw err;
  }
  return {
    processes,
    gatewayUrl,
    sendsMetricsUrl: `http://127.0.0.1:${senderOps}/metrics`,
    resultsMetricsUrl: `http://127.0.0.1:${schedulerOps}/metrics`,
    devMessagesUrl: null,
    stop: () => stopAll(processes),
  };
}

async function admin(base, token, method, path, body) {
  const res = await fetch(`${base}/admin/v1${path}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const json = await res.json();
  if (res.status >= 300) throw new Error(`admin ${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/**
 * The benchmark's organization, made through the account admin API as an operator would: the pro
 * plan, a confirmed email, `smsBalance` parts, one location, EMAIL and SMS configured with their own
 * templates, and an API key.
 */
export async function seedOrganization(base, adminToken, { smsBalance }) {
  const { organization } = await admin(base, adminToken, 'POST', '/organizations', { name: 'Bench Coffee', plan: 'pro', emailConfirmed: true, smsBalance, timeZone: 'UTC', locale: 'en', defaultRegion: 'RU', sendWindow: null });
  const org = `/organizations/${organization.id}`;
  const { location } = await admin(base, adminToken, 'POST', `${org}/locations`, { name: 'Bench Coffee on Main', address: 'Main st. 1', city: 'Moscow', reviewLinks: [{ provider: 'google', url: 'https://maps.google.com/?cid=1' }] });
  for (const channel of ['EMAIL', 'SMS']) await admin(base, adminToken, 'PUT', `${org}/channels/${channel}`, { configured: true });
  await admin(base, adminToken, 'PUT', `${org}/templates/EMAIL`, { subject: 'How was {{location}}?', body: 'Hello {{name}}, thank you for visiting {{location}}. Rate your visit: {{link}}' });
  await admin(base, adminToken, 'PUT', `${org}/templates/SMS`, { body: 'Bench Coffee: rate your visit {{link}}' });
  const { secret } = await admin(base, adminToken, 'POST', `${org}/api-keys`, { name: 'bench' });
  return { organizationId: organization.id, apiKey: secret, locationId: location.id };
}

/**
 * The end of a bench run, whichever comes first (its end, an error, SIGINT), done once: stops the shape
 * and the fake providers `running()` names, drops the database, and in the distributed shape removes the
 * run's bus streams and Redis keys.
 */
export function cleanupOnce({ db, distributed, busPrefix, redisPrefix, redisUrl, deleteJetStreamPrefix, running, say }) {
  let cleaned;
  return () =>
    (cleaned ??= (async () => {
      const { shape, providers } = running();
      if (shape) await shape.stop().catch((err) => say(`stopping: ${err.message}`));
      if (providers?.connected) {
        providers.send('stop');
        await new Promise((r) => providers.once('exit', r));
      }
      await db.drop();
      if (distributed) {
        await deleteJetStreamPrefix(busPrefix);
        const Redis = createRequire(import.meta.url)('ioredis');
        const redis = new Redis(redisUrl, { lazyConnect: true });
        await redis.connect();
        for await (const keys of redis.scanStream({ match: `${redisPrefix}*`, count: 500 })) if (keys.length) await redis.del(...keys);
        await redis.quit();
      }
    })());
}
