#!/usr/bin/env node
// Dispatch: N steps already due in PostgreSQL → dispatcher (claim SKIP LOCKED, fire-time checks,
// publish to steps.email, one message per step) → bus → a no-op sender (its own process on JetStream;
// reports SENT through the sender kit, in batches on steps.result.batch) → results applied in batches →
// PostgreSQL (step sent, next step scheduled). Beside graphile-worker running N no-op jobs on the same
// PostgreSQL in the same run, and the bus alone.
// Usage: npm run build && node bench/dispatch.mjs [--steps 100000] [--bus jetstream|memory] [--seconds 60]
// The default 100 000 steps measure the steady state, not the first and last batches.
// BENCH_BATCH / BENCH_LOOPS: the dispatcher's batch size (default 1000) and claim loops (default 2).
// BENCH_PROFILE=1: our pipeline only; BENCH_PROFILE_OUT=<file>: CPU profiles of the measured phase.
// Loopback PostgreSQL and NATS only; bounded by --steps (≤ 200 000) and --seconds (≤ 300). Target: ≥ 10 000 steps/s.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { cpus, loadavg } from 'node:os';
import { readFileSync } from 'node:fs';
import { adminSql } from './lib/pg-admin.mjs';
import { cpuByGroup } from './lib/proc-cpu.mjs';

const require = createRequire(import.meta.url);
const here = dirname(fileURLToPath(import.meta.url));
const { createServiceContext, createMemoryBus, connectJetStreamBus, createPool, histogram, Notifier } = require('@rrs/runtime');
const { busV1, stepSubjects } = require('@rrs/proto');
const { startScheduler, startDispatcher, ConfiguredChannels, SCHEMA, SESSION_SETTINGS, AddressHasher, DEVELOPMENT_PERSON_HASH_KEY } = require('@rrs/cascade-scheduler');
// The bench's starts must not be refused by the recipient budget the scheduler takes with every start.
const LIFTED = { perMinute: 1e9, perDay: 1e12 };
const BENCH_RECIPIENT_QUOTAS = { trial: LIFTED, standard: LIFTED, pro: LIFTED };
const { StepResultPublisher } = require('@rrs/sender-kit');
const { run, makeWorkerUtils } = require('graphile-worker');

const { values } = parseArgs({ options: { steps: { type: 'string', default: '100000' }, bus: { type: 'string', default: 'jetstream' }, seconds: { type: 'string', default: '60' } } });
const STEPS = Math.min(200_000, Math.max(500, Math.round(Number(values.steps) / 500) * 500));
const MAX_MS = Math.min(300, Math.max(5, Number(values.seconds))) * 1000;
const pgUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
for (const u of [pgUrl, natsUrl]) if (!['127.0.0.1', 'localhost', '::1'].includes(new URL(u).hostname)) throw new Error(`loopback only: ${u}`);
// Each process runs with the V8 flags its image runs with (NODE_OPTIONS in its Dockerfile): the
// scheduler is this process, so it re-executes itself once with the scheduler's; the no-op sender is
// forked with a sender's.
function imageNodeOptions(service) {
  const m = /^ENV NODE_OPTIONS=("?)(.*)\1\s*$/m.exec(readFileSync(join(here, '..', 'services', service, 'Dockerfile'), 'utf8'));
  return m ? m[2].split(/\s+/).filter(Boolean) : [];
}
const schedulerFlags = imageNodeOptions('cascade-scheduler');
const senderFlags = imageNodeOptions('channel-email');
const isSizeFlag = (a) => a.startsWith('--max-semi-space-size');
if (schedulerFlags.some((f) => !process.execArgv.includes(f))) {
  const { spawnSync } = await import('node:child_process');
  const r = spawnSync(process.execPath, [...schedulerFlags, ...process.execArgv.filter((a) => !isSizeFlag(a)), fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}
const suffix = randomBytes(4).toString('hex');
const dbName = `rrs_bench_${suffix}`;
const prefix = `bench${suffix}`;
const ORG = '0190e0e0-0000-7000-8000-00000000b001';

const admin = (sql) => adminSql(pgUrl, sql);

const profiles = {
  async getSendingProfile(id) {
    return {
      organization: { id, name: 'Bench', plan: 'pro', emailConfirmed: true, locale: 'en', timeZone: 'UTC', defaultRegion: 'RU' },
      templates: [{ channel: 'EMAIL', subject: 'Rate {{location}}', body: 'Hi {{name}}: {{link}}' }],
      channels: [{ channel: 'EMAIL', configured: true }, { channel: 'SMS', configured: true }],
    };
  },
  async getLocation(_org, id) {
    return { id, name: 'Bench cafe', address: '', city: '', reviewLinks: [] };
  },
};


// BENCH_PROFILE_OUT=<file>: a CPU profile of this process over the measured phase only.
async function startProfiler() {
  const { Session } = await import('node:inspector/promises');
  const { writeFileSync } = await import('node:fs');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return {
    async stop(file) {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync(file, JSON.stringify(profile));
      session.disconnect();
    },
  };
}

// Peak resident set of a process (VmHWM, Linux), in MB; '?' elsewhere.
function peakRssMb(pid) {
  try {
    const kb = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb ? Math.round(Number(kb) / 1024) : '?';
  } catch {
    return '?';
  }
}

async function waitUntil(probe, maxMs, what) {
  const deadline = Date.now() + maxMs;
  while (Date.now() < deadline) {
    if (await probe()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out: ${what}`);
}

await admin(`CREATE DATABASE ${dbName}`);
const url = new URL(pgUrl);
url.pathname = `/${dbName}`;
const dbUrl = url.toString();
const ctx = createServiceContext('bench', 'warn');
const bus = values.bus === 'memory' ? createMemoryBus({ prefix }) : await connectJetStreamBus({ url: natsUrl, prefix, name: 'bench-dispatch' });
let ours;
// Results applied by this process's result consumer (each once, after its commit): how the bench sees
// progress without scanning the steps table while it is being measured.
let applied = 0;
let theirs;
try {
  await bus.ensureStreams();
  const scheduler = await startScheduler({ databaseUrl: dbUrl, natsUrl, busPrefix: prefix, grpcHost: '127.0.0.1', grpcPort: 0, minuteMs: 60_000, recipientQuotas: BENCH_RECIPIENT_QUOTAS }, ctx, { bus, profiles, noDispatcher: true, onStepResult: async () => void applied++ });
  // Two-step flow: applying each step's SENT schedules the next one (a day later), as in real cascades.
  const flow = await scheduler.flows.create({ organizationId: ORG, name: 'bench', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'EMAIL', delayMinutes: 1440 }] });
  for (let c = 0; c < STEPS / 500; c++) {
    await scheduler.cascades.start({ organizationId: ORG, locationId: 'loc', name: '', flowId: flow.id, channel: '', externalId: '', recipients: Array.from({ length: 500 }, (_, k) => ({ name: `N${k}`, email: `b${c}.${k}@example.com`, phone: '' })) });
  }
  // The no-op sender answers every step SENT. On JetStream it is its own process, like a real sender
  // service; the in-process bus can only be shared inside this process.
  let sender;
  let senderPid = -1;
  if (bus.kind === 'jetstream') {
    const child = fork(join(here, 'noop-sender.mjs'), [], {
      env: { ...process.env, NATS_URL: natsUrl, BENCH_PREFIX: prefix },
      execArgv: [...senderFlags, ...process.execArgv.filter((a) => !isSizeFlag(a))],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    await new Promise((resolve, reject) => {
      child.once('message', resolve);
      child.once('exit', (code) => reject(new Error(`no-op sender exited with ${code}`)));
    });
    senderPid = child.pid;
    sender = { drain: () => new Promise((resolve) => { child.once('exit', resolve); child.send('stop'); }) };
  } else {
    const results = new StepResultPublisher(bus);
    const lanes = await Promise.all(stepSubjects('EMAIL').map((lane) => bus.consume({ stream: 'STEPS', durable: `bench-noop-${lane.durable}`, filterSubject: lane.subject, concurrency: 1024 }, async (msg) => {
      const s = busV1.StepDue.decode(msg.data);
      await results.publish(s, { outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, parts: 1 });
      msg.ack();
    })));
    sender = { drain: () => Promise.all(lanes.map((lane) => lane.drain())) };
  }
  const pool = createPool({ url: dbUrl, schema: SCHEMA, max: 8, settings: SESSION_SETTINGS });
  const notifier = new Notifier(dbUrl, SCHEMA, ctx.logger);
  const count = async () => (await pool.query(`SELECT count(*)::int AS n FROM recipient_steps WHERE step_order = 1 AND status = 'sent'`)).rows[0].n;
  const groups = { scheduler: (pid) => pid === process.pid, 'no-op sender': (pid) => pid === senderPid, 'nats-server': (_p, comm) => comm === 'nats-server', postgres: (_p, comm) => comm === 'postgres' };
  const cpu0 = cpuByGroup(groups);
  const profiler = process.env.BENCH_PROFILE_OUT ? await startProfiler() : null;
  const t0 = process.hrtime.bigint();
  const dispatcher = await startDispatcher({ pool, bus, notifier, logger: ctx.logger, minuteMs: 60_000, publicBaseUrl: 'http://127.0.0.1', channels: new ConfiguredChannels(profiles), hasher: new AddressHasher(DEVELOPMENT_PERSON_HASH_KEY), batchSize: Number(process.env.BENCH_BATCH ?? 1000), loops: Number(process.env.BENCH_LOOPS ?? 2),
    // As the scheduler wires it: ratings first (one consumer-info request per round), then room for results.
    beforeRound: async () => { await scheduler.ratings.ratingsFirst(); await scheduler.results.whenRoom(); } });
  await notifier.start();
  let dispatchedAt = 0;
  await waitUntil(async () => {
    if (!dispatchedAt && dispatcher.dispatchedCount >= STEPS) dispatchedAt = Number(process.hrtime.bigint() - t0) / 1e9;
    return applied >= STEPS;
  }, MAX_MS, 'all results applied');
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  // What a user would check: every first step is recorded sent, none twice.
  const sent = await count();
  if (sent !== STEPS) throw new Error(`${sent} of ${STEPS} first steps are sent after all results were applied`);
  ours = { seconds, rate: STEPS / seconds, dispatchedAt };
  const cpu1 = cpuByGroup(groups);
  if (profiler) await profiler.stop(process.env.BENCH_PROFILE_OUT);
  if (cpu0 && cpu1) ours.cpu = Object.keys(groups).map((k) => `${k} ${Math.round(((cpu1[k] - cpu0[k]) / STEPS) * 1e6)} µs`).join(', ');
  ours.peakRss = [['scheduler', process.pid], ['no-op sender', senderPid]].map(([k, pid]) => `${k} ${peakRssMb(pid)} MB`).join(', ');
  await dispatcher.stop();
  await notifier.stop();
  await sender.drain();
  await pool.end();

  if (process.env.BENCH_PROFILE === '1') {
    // Profiling the pipeline alone (node --cpu-prof): no baselines, whose work would fill the profile.
    console.log(`scheduler: ${ours.seconds.toFixed(2)} s → ${Math.round(ours.rate)} steps/s (all dispatched at ${ours.dispatchedAt.toFixed(2)} s); CPU per step: ${ours.cpu}; peak RSS: ${ours.peakRss}`);
  } else {
    // graphile-worker, the same number of no-op jobs, same PostgreSQL.
    const utils = await makeWorkerUtils({ connectionString: dbUrl });
    await utils.migrate();
    for (let i = 0; i < STEPS; i += 5000) await utils.addJobs(Array.from({ length: Math.min(5000, STEPS - i) }, (_, k) => ({ identifier: 'noop', payload: { i: i + k } })));
    await utils.release();
    let completed = 0;
    const g0 = process.hrtime.bigint();
    const runner = await run({ connectionString: dbUrl, concurrency: 32, noHandleSignals: true, pollInterval: 100, logger: new (require('graphile-worker').Logger)(() => () => undefined), taskList: { noop: async () => undefined } });
    runner.events.on('job:success', () => {
      completed++;
    });
    await waitUntil(async () => completed >= STEPS, MAX_MS, 'graphile-worker jobs');
    const gSeconds = Number(process.hrtime.bigint() - g0) / 1e9;
    theirs = { seconds: gSeconds, rate: STEPS / gSeconds };
    await runner.stop();

    // The bus alone, same run, same message size: one leg (publishBatch → deliver → ack), as the
    // dispatcher publishes and a sender takes each step, with no PostgreSQL at all. Results travel in
    // batches, so a step costs about one such leg: this bounds the pipeline on this machine whatever
    // the scheduler does.
    const sample = busV1.StepDue.encode({
      stepId: '0190e0e0-0000-7000-8000-000000000000', attemptId: '0190e0e0-0000-7000-8000-000000000000:1', attempt: 1, organizationId: ORG,
      cascadeId: ORG, recipientId: ORG, channel: 'EMAIL', recipient: { name: 'N1', email: 'b0.1@example.com', phone: '' },
      location: { id: 'loc', name: 'Bench cafe', address: '', city: '' }, template: { subject: 'Rate {{location}}', body: 'Hi {{name}}: {{link}}' },
      reviewUrl: 'http://127.0.0.1/r/0123456789012345678901', unsubscribeUrl: 'http://127.0.0.1/u/0123456789012345678901', locale: 'en', dueAt: new Date(), dispatchedAt: new Date(),
    }).finish();
    const rawPublish = async (subject, tag) => {
      const p0 = process.hrtime.bigint();
      for (let i = 0; i < STEPS; i += 1000) {
        await bus.publishBatch(Array.from({ length: Math.min(1000, STEPS - i) }, (_, k) => ({ subject, data: sample, options: { msgId: `${tag}-${i + k}` } })));
      }
      return STEPS / (Number(process.hrtime.bigint() - p0) / 1e9);
    };
    const publishOnly = await rawPublish('steps.rawpub', 'p');
    let acked = 0;
    const r0 = process.hrtime.bigint();
    const rawSub = await bus.consume({ stream: 'STEPS', durable: 'bench-raw', filterSubject: 'steps.rawleg', concurrency: 1024 }, async (msg) => {
      acked++;
      msg.ack();
    });
    await rawPublish('steps.rawleg', 'l');
    await waitUntil(async () => acked >= STEPS, MAX_MS, 'raw leg consumed');
    const leg = STEPS / (Number(process.hrtime.bigint() - r0) / 1e9);
    await rawSub.drain();

    console.log(`dispatch on ${cpus().length} cores (load ${loadavg()[0].toFixed(1)}), ${STEPS} due steps, bus: ${bus.kind}; scheduler ${schedulerFlags.join(' ') || 'default V8 flags'}, sender ${senderFlags.join(' ') || 'default V8 flags'}`);
    console.log(`  scheduler (PG → bus → no-op sender → result → PG): ${ours.seconds.toFixed(2)} s → ${Math.round(ours.rate)} steps/s`);
    if (ours.cpu) console.log(`    CPU per step: ${ours.cpu}; peak RSS: ${ours.peakRss}`);
    console.log(`  graphile-worker, ${STEPS} no-op jobs, same PG      : ${theirs.seconds.toFixed(2)} s → ${Math.round(theirs.rate)} jobs/s`);
    console.log(`  bus alone (${bus.kind}), same run: publish ${Math.round(publishOnly)} msg/s; publish → consume → ack ${Math.round(leg)} msg/s (one leg per step)`);
    console.log(`  ratio ${(ours.rate / theirs.rate).toFixed(2)}   target: ≥ 10000 steps/s → ${ours.rate >= 10000 ? 'MET' : 'NOT MET'}`);
  }
} finally {
  await ctx.lifecycle.shutdown('bench done');
  await bus.close();
  if (bus.kind === 'jetstream') {
    const { connect } = require('nats');
    const nc = await connect({ servers: natsUrl });
    const jsm = await nc.jetstreamManager();
    for await (const s of jsm.streams.list()) if (s.config.name.startsWith(`${prefix.toUpperCase()}_`) || s.config.name.startsWith(`KV_${prefix}_`)) await jsm.streams.delete(s.config.name);
    await nc.close();
  }
  await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
}
