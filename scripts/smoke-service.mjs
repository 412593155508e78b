#!/usr/bin/env node
// Starts a folder made by scripts/pack-service.mjs the way its image does (`node dist/main.js` inside
// it, NODE_ENV=production), waits until it answers on its ops/HTTP port, sends SIGTERM and checks a clean
// exit. Servers: PostgreSQL at postgres://postgres@127.0.0.1:5432 (trust auth) and NATS at
// nats://127.0.0.1:4222, overridable with SMOKE_PG_URL / SMOKE_NATS_URL. Nothing is left behind: each
// run gets its own database (rrs_smoke_<random>, dropped after) and bus prefix (smoke<random>, whose
// JetStream streams and KV buckets are deleted after).
//
// Usage: node scripts/smoke-service.mjs <outDir> <service-name>
// Prints one line per check; exits 1 when any fails.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import http from 'node:http';
import net from 'node:net';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PG_URL = process.env.SMOKE_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const NATS_URL = process.env.SMOKE_NATS_URL ?? 'nats://127.0.0.1:4222';
const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 15_000;

/**
 * How to probe each service: the port variable (from its src/config.ts) and the path that must answer
 * 200. /readyz where readiness means something without the other services; the gateway's readiness would
 * need a live contacts, so it is held to /healthz. Every service gets the same environment (a fresh
 * database, its own bus prefix, a free port for each port variable any service reads): a variable a
 * service does not read is ignored, and configs still change often.
 */
export const SERVICES = {
  // `also`: paths on the probe's port that must answer 200 too (the console's static files must be in the image).
  gateway: { probe: ['PORT', '/healthz'], also: ['/app/', '/app/app.js'] },
  contacts: { probe: ['OPS_PORT', '/readyz'] },
  'cascade-scheduler': { probe: ['OPS_PORT', '/readyz'] },
  'channel-email': { probe: ['OPS_PORT', '/readyz'] },
  'channel-sms': { probe: ['OPS_PORT', '/readyz'] },
  'channel-messenger': { probe: ['OPS_PORT', '/readyz'] },
  webhooks: { probe: ['OPS_PORT', '/readyz'] },
  connectors: { probe: ['OPS_PORT', '/readyz'] },
  // No NATS_URL: the all-in-one's JetStream mode takes no bus prefix, so it would share streams with
  // whatever else uses this NATS; its in-process bus is the default anyway. External PostgreSQL, as the
  // embedded one would create a system user when run as root.
  'all-in-one': { probe: ['PORT', '/readyz'], noBus: true, also: ['/app/', '/app/app.js'] },
};
const PORT_VARS = ['PORT', 'GRPC_PORT', 'OPS_PORT', 'HOOKS_PORT', 'METRICS_PORT'];

/** Loads a client library from the repo's install, else from the packed folder (which has it when it needs it). */
function load(name, outDir) {
  for (const base of [repoRoot, outDir]) {
    try {
      return createRequire(join(base, 'package.json'))(name);
    } catch {
      /* next */
    }
  }
  throw new Error(`cannot load ${name} from ${repoRoot} or ${outDir}`);
}

/** `n` distinct free loopback ports; all are held until the last is bound, so none repeats. */
export async function freePorts(n) {
  const servers = [];
  try {
    for (let i = 0; i < n; i++) {
      const srv = net.createServer();
      await new Promise((ok, fail) => {
        srv.once('error', fail);
        srv.listen(0, '127.0.0.1', ok);
      });
      servers.push(srv);
    }
    return servers.map((srv) => srv.address().port);
  } finally {
    await Promise.all(servers.map((srv) => new Promise((ok) => srv.close(ok))));
  }
}

function get(port, path) {
  return new Promise((resolveGet) => {
    const req = http.get({ host: '127.0.0.1', port, path, timeout: 2_000 }, (res) => {
      res.resume();
      res.on('end', () => resolveGet(res.statusCode));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolveGet(0));
  });
}

async function withPg(pg, fn) {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Node would resolve a missing dependency from any ancestor's node_modules and hide it. */
function leakyAncestor(outDir) {
  let dir = dirname(outDir);
  for (;;) {
    if (existsSync(join(dir, 'node_modules'))) return join(dir, 'node_modules');
    const up = dirname(dir);
    if (up === dir) return null;
    dir = up;
  }
}

export async function smokeService(outDirArg, service, { log = console.log } = {}) {
  const outDir = resolve(outDirArg);
  const spec = SERVICES[service];
  const say = (ok, msg) => log(`${ok ? 'ok  ' : 'FAIL'} ${service}: ${msg}`);
  const result = { service, ok: false, readyMs: null, exitCode: null, stopMs: null };
  if (!spec) {
    say(false, `unknown service (known: ${Object.keys(SERVICES).join(', ')})`);
    return result;
  }
  if (!existsSync(join(outDir, 'dist', 'main.js'))) {
    say(false, `${outDir}/dist/main.js is missing (pack it first)`);
    return result;
  }
  const leak = leakyAncestor(outDir);
  if (leak) {
    say(false, `${leak} is visible to the packed folder, so a missing dependency would go unnoticed; pack outside it`);
    return result;
  }
  say(true, `isolated: no node_modules above ${outDir}`);

  const suffix = randomBytes(5).toString('hex');
  const env = { PATH: process.env.PATH, NODE_ENV: 'production', LOG_LEVEL: process.env.SMOKE_LOG_LEVEL ?? 'info', TZ: 'UTC' };
  const picked = await freePorts(PORT_VARS.length + 1);
  const ports = Object.fromEntries(PORT_VARS.map((name, i) => [name, picked[i]]));
  for (const name of PORT_VARS) env[name] = String(ports[name]);
  // Loopback only, and peers that are never there: the gateway's clients connect lazily.
  const nobody = picked[PORT_VARS.length];
  // Kept out of outDir, which may be shipped after the smoke run.
  const dataDir = mkdtempSync(join(tmpdir(), 'rrs-smoke-data-'));
  Object.assign(env, { HOST: '127.0.0.1', GRPC_HOST: '127.0.0.1', OPS_HOST: '127.0.0.1', HOOKS_HOST: '127.0.0.1', CONTACTS_ADDR: `127.0.0.1:${nobody}`, SCHEDULER_ADDR: `127.0.0.1:${nobody}`, DATA_DIR: dataDir });
  // Fresh credential keys (connectors and webhooks require them); nothing is sealed with it beyond this run's database.
  env.CONNECTOR_SECRET_KEYS = randomBytes(32).toString('base64');
  env.WEBHOOK_SECRET_KEYS = randomBytes(32).toString('base64');
  // In production an admin token is never generated: the all-in-one refuses to start without one.
  env.ADMIN_TOKEN = `adm_smoke_${randomBytes(16).toString('hex')}`;
  // A production sender without a provider refuses to start: the smoke start names the sink, as a staging does
  // (docs/channels.md "The sink and production"); no message leaves the machine.
  Object.assign(env, { EMAIL_PROVIDERS: 'sink', SMS_PROVIDERS: 'sink', MESSENGER_SINK: 'max,telegram' });

  const cleanups = [() => rmSync(dataDir, { recursive: true, force: true })];
  let child;
  const output = [];
  try {
    const pg = load('pg', outDir);
    const database = `rrs_smoke_${suffix}`;
    await withPg(pg, (c) => c.query(`CREATE DATABASE ${database}`));
    cleanups.push(async () => {
      await withPg(pg, async (c) => {
        // The service closed its pool on SIGTERM, unless it failed; no straggler may block the DROP.
        await c.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [database]);
        await c.query(`DROP DATABASE IF EXISTS ${database}`);
      });
      say(true, `database ${database} dropped`);
    });
    const url = new URL(PG_URL);
    url.pathname = `/${database}`;
    env.DATABASE_URL = url.toString();
    say(true, `database ${database} created`);
    if (!spec.noBus) {
      const prefix = `smoke${suffix}`;
      env.NATS_URL = NATS_URL;
      env.BUS_PREFIX = prefix;
      cleanups.push(async () => {
        const { connect } = load('nats', outDir);
        const nc = await connect({ servers: NATS_URL, timeout: 3_000 });
        try {
          const jsm = await nc.jetstreamManager();
          const doomed = [];
          // Stream names the runtime derives from BUS_PREFIX: PREFIX_<STREAM> and KV_<prefix>_<bucket>.
          for await (const s of jsm.streams.list()) {
            const n = s.config.name;
            if (n.startsWith(`${prefix.toUpperCase()}_`) || n.startsWith(`KV_${prefix}_`)) doomed.push(n);
          }
          for (const n of doomed) await jsm.streams.delete(n);
          say(true, `bus prefix ${prefix}: ${doomed.length} stream(s) deleted`);
        } finally {
          await nc.close();
        }
      });
      say(true, `bus prefix ${prefix} on ${NATS_URL}`);
    }

    const started = Date.now();
    child = spawn(process.execPath, ['dist/main.js'], { cwd: outDir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (chunk) => {
      output.push(chunk.toString());
      if (output.length > 200) output.shift();
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal, at: Date.now() })));
    let early = null;
    void exited.then((e) => (early = e));

    const [portVar, path] = spec.probe;
    let status = 0;
    while (Date.now() - started < READY_TIMEOUT_MS && !early) {
      status = await get(ports[portVar], path);
      if (status === 200) break;
      await sleep(100);
    }
    if (status !== 200) {
      say(false, early ? `exited with code ${early.code ?? early.signal} before answering ${path}` : `GET ${path} on ${portVar} answered ${status || 'nothing'} for ${READY_TIMEOUT_MS} ms`);
      return result;
    }
    result.readyMs = Date.now() - started;
    say(true, `GET ${path} on ${portVar}=${ports[portVar]} answered 200 after ${result.readyMs} ms`);
    for (const extra of spec.also ?? []) {
      const extraStatus = await get(ports[portVar], extra);
      if (extraStatus !== 200) {
        say(false, `GET ${extra} on ${portVar} answered ${extraStatus || 'nothing'}`);
        return result;
      }
      say(true, `GET ${extra} answered 200`);
    }

    const termAt = Date.now();
    child.kill('SIGTERM');
    const exit = await Promise.race([exited, sleep(STOP_TIMEOUT_MS).then(() => null)]);
    if (!exit) {
      child.kill('SIGKILL');
      await exited;
      say(false, `still running ${STOP_TIMEOUT_MS} ms after SIGTERM (killed)`);
      return result;
    }
    result.exitCode = exit.code;
    result.stopMs = exit.at - termAt;
    if (exit.code !== 0) {
      say(false, `SIGTERM: exited with ${exit.code ?? exit.signal} after ${result.stopMs} ms`);
      return result;
    }
    say(true, `SIGTERM: exited with code 0 after ${result.stopMs} ms`);
    result.ok = true;
    return result;
  } catch (err) {
    say(false, err.message);
    return result;
  } finally {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
    }
    if (!result.ok && output.length) log(`---- ${service} output (tail) ----\n${output.join('').split('\n').slice(-40).join('\n')}\n----`);
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch (err) {
        result.ok = false;
        say(false, `cleanup: ${err.message}`);
      }
    }
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const [outDir, service] = process.argv.slice(2);
  if (!outDir || !service) {
    console.error('usage: node scripts/smoke-service.mjs <outDir> <service-name>');
    process.exit(2);
  }
  const r = await smokeService(outDir, service);
  process.exit(r.ok ? 0 : 1);
}
