#!/usr/bin/env node
// The real send path, measured the way a business sees it: `POST /api/v1/cascades` (`channel: EMAIL` or
// `SMS`, 500 recipients a request, an Idempotency-Key each) through the real gateway, until every step
// has been accepted by the provider and its result applied: scheduler → bus → sender (send log,
// rendering, provider call, result batches) → provider, and the result back into the scheduler.
//
//   --shape all-in-one   packages/all-in-one/dist (one process, in-process bus, the sink providers) on a
//                        fresh database of the local PostgreSQL.
//   --shape distributed  contacts, cascade-scheduler, webhooks, the channel's sender and the gateway, each
//                        `node services/<name>/dist/main.js`, on NATS JetStream (a bench bus prefix),
//                        PostgreSQL and Redis; channel-email against a local SMTP server, channel-sms
//                        against a local fake of the SMSC.ru HTTP API (packages/testkit's fakes, in their
//                        own process: bench/send-providers.mjs).
//   --mode throughput    --recipients N (10 000) posted as fast as --concurrency (4) requests allow.
//   --mode latency       a fixed offered rate: --rate recipients/s (1 000) for --seconds (60), one request
//                        of --per-request recipients every per-request/rate seconds, whatever the answers.
//
// Printed: sends/s end to end (first request sent → last message accepted by the provider); per-message
// latency p50/p95/p99/max (202 answer → provider accepted; matched by the recipient address or phone,
// unique per recipient, that the provider sees; with the sink, read from /dev/messages, which keeps the
// last 1 000, so only in latency mode); CPU µs per message per process (utime + stime from /proc over
// the window first request → last result applied: each Node process, the PostgreSQL backends of the
// bench database, PostgreSQL's own processes and nats-server — these two shared with whoever else uses
// the servers); PostgreSQL requests and round trips per message, counted inside each Node process by
// bench/lib/pg-round-trips.cjs (preloaded; a simple Query or an extended-protocol Sync is a request, a
// round trip is a request sent on an idle connection — pg_stat_statements would need a server restart,
// a proxy would add a hop); peak RSS beside the Helm chart's memory limit. Then, in the same run, the
// no-op dispatch figure of bench/dispatch.mjs (same step count, --noop-bus jetstream by default, its
// pipeline only: BENCH_PROFILE=1) and the ratio.
//
// Usage: npm run build && node bench/send.mjs [--shape all-in-one|distributed] [--channel email|sms]
//   [--mode throughput|latency] [--recipients 10000] [--concurrency 4] [--rate 1000] [--seconds 60]
//   [--per-request 500] [--warmup 500] [--noop-steps N|0] [--noop-bus jetstream|memory] [--max-wait 300]
//   [--env KEY=VALUE …  (extra env for every measured process)]
// Loopback PostgreSQL (TEST_DATABASE_URL), NATS (NATS_URL) and Redis (REDIS_URL) only; bounded: ≤ 200 000
// recipients, rate ≤ 10 000/s for ≤ 300 s, ≤ 900 s waiting for the last message.
// Targets (issue 20): all-in-one + sink ≥ 5 000 sends/s and ≥ 0.5 × no-op; distributed ≥ 2 000 emails/s
// and ≥ 2 000 SMS/s; latency p99 < 1 s at 1 000 recipients/s for 60 s; round trips/message well under 1.
import { fork, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chartMemoryLimits, cpuSnapshot, nowMs, peakRssMb, percentiles, pgCount, processMatchers, readCounter, waitUntil } from './lib/send-measure.mjs';
import { cleanupOnce, seedOrganization, startAllInOneShape, startDistributedShape } from './lib/send-shapes.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const { createTestDatabase, deleteJetStreamPrefix, uniqueName, TEST_NATS_URL, TEST_REDIS_URL } = require('../packages/testkit/dist/index.js');

const { values } = parseArgs({
  options: {
    shape: { type: 'string', default: 'all-in-one' }, channel: { type: 'string', default: 'email' }, mode: { type: 'string', default: 'throughput' },
    recipients: { type: 'string', default: '10000' }, concurrency: { type: 'string', default: '4' }, rate: { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '60' }, 'per-request': { type: 'string', default: '500' }, warmup: { type: 'string', default: '500' },
    'noop-steps': { type: 'string' }, 'noop-bus': { type: 'string', default: 'jetstream' }, 'max-wait': { type: 'string', default: '300' },
    env: { type: 'string', multiple: true, default: [] },
  },
});
const choose = (name, value, allowed) => {
  if (!allowed.includes(value)) throw new Error(`--${name} must be one of ${allowed.join(', ')}`);
  return value;
};
const bounded = (value, min, max) => Math.min(max, Math.max(min, Math.round(Number(value)) || min));
const SHAPE = choose('shape', values.shape, ['all-in-one', 'distributed']);
const CHANNEL = choose('channel', values.channel.toLowerCase(), ['email', 'sms']).toUpperCase();
const MODE = choose('mode', values.mode, ['throughput', 'latency']);
const PER_REQUEST = bounded(values['per-request'], 1, 500);
const RATE = bounded(values.rate, 1, 10_000);
const SECONDS = bounded(values.seconds, 1, 300);
const RECIPIENTS = Math.min(200_000, MODE === 'latency' ? RATE * SECONDS : bounded(values.recipients, 1, 200_000));
const CONCURRENCY = bounded(values.concurrency, 1, 32);
const WARMUP = bounded(values.warmup, 0, 5_000);
const NOOP_STEPS = values['noop-steps'] === '0' ? 0 : bounded(values['noop-steps'] ?? RECIPIENTS, 500, 200_000);
const NOOP_BUS = choose('noop-bus', values['noop-bus'], ['jetstream', 'memory']);
const MAX_WAIT_MS = bounded(values['max-wait'], 10, 900) * 1000;
const extraEnv = Object.fromEntries(values.env.map((kv) => {
  const at = kv.indexOf('=');
  if (at < 1) throw new Error(`--env takes KEY=VALUE, not ${kv}`);
  return [kv.slice(0, at), kv.slice(at + 1)];
}));
const pgUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
for (const u of [pgUrl, TEST_NATS_URL, TEST_REDIS_URL]) if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(new URL(u).hostname)) throw new Error(`loopback only: ${u}`);

const runId = randomBytes(4).toString('hex');
const say = (line) => process.stderr.write(`[send bench] ${line}\n`);
const seconds = (ms) => `${(ms / 1000).toFixed(2)} s`;
const adminToken = `adm_${randomBytes(16).toString('hex')}`;
const busPrefix = uniqueName('bench');
const redisPrefix = `rrs:${busPrefix}:`;

/** Recipients of one request; `tag` keeps warm-up and measured recipients apart. Phones are E.164, as the sender passes them on. */
function recipientsOf(tag, from, count) {
  return Array.from({ length: count }, (_, k) => {
    const i = from + k;
    return CHANNEL === 'EMAIL' ? { name: `Customer ${i}`, email: `${tag}${i}.${runId}@example.com` } : { name: `Customer ${i}`, phone: `+79${tag === 'w' ? '17' : '16'}${String(1_000_000 + i).padStart(7, '0')}` };
  });
}
const addressOf = (r) => r.email ?? r.phone;

const db = await createTestDatabase('rrs_bench_');
let shape;
let providers;
/** Stops every process this run started and removes its database, bus streams and Redis keys; once. */
const cleanup = cleanupOnce({ db, distributed: SHAPE === 'distributed', busPrefix, redisPrefix, redisUrl: TEST_REDIS_URL, deleteJetStreamPrefix, running: () => ({ shape, providers }), say });
process.once('SIGINT', () => {
  say('interrupted: cleaning up');
  cleanup().finally(() => process.exit(130));
});
try {
  if (SHAPE === 'distributed') {
    providers = fork(join(here, 'send-providers.mjs'), [], { env: { ...process.env, BENCH_CHANNEL: CHANNEL }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const ready = await new Promise((resolve, reject) => {
      providers.once('message', resolve);
      providers.once('exit', (code) => reject(new Error(`providers exited with ${code}`)));
    });
    say(`providers listening: ${JSON.stringify(ready.env)}`);
    shape = await startDistributedShape({ databaseUrl: db.url, natsUrl: TEST_NATS_URL, busPrefix, redisUrl: TEST_REDIS_URL, redisPrefix, adminToken, channel: CHANNEL, providerEnv: ready.env, extraEnv });
  } else {
    shape = await startAllInOneShape({ databaseUrl: db.url, adminToken, extraEnv });
  }
  say(`${SHAPE} up: ${shape.processes.map((p) => `${p.name} (pid ${p.pid}${p.flags.length ? ` ${p.flags.join(' ')}` : ''})`).join(', ')}`);
  const seed = await seedOrganization(shape.gatewayUrl, adminToken, { smsBalance: RECIPIENTS + WARMUP + 1_000 });

  /** Messages the provider accepted so far (all of this run, warm-up included). */
  const ask = (message) => new Promise((resolve) => {
    providers.once('message', resolve);
    providers.send(message);
  });
  const providerCount = async () => (providers ? (await ask('count')).count : readCounter(shape.sendsMetricsUrl, 'sender_sends_total', { channel: CHANNEL, result: 'sent' }));
  const resultsApplied = () => readCounter(shape.resultsMetricsUrl, 'scheduler_step_results_total', { outcome: 'SENT' });
  const accepted = new Map();
  const cascades = [];
  async function post(tag, index, recipients, body) {
    const res = await fetch(`${shape.gatewayUrl}/api/v1/cascades`, { method: 'POST', headers: { authorization: `Bearer ${seed.apiKey}`, 'content-type': 'application/json', 'idempotency-key': `bench-${runId}-${tag}${index}` }, body });
    const json = await res.json();
    const at = nowMs();
    if (res.status !== 202 || json.queued !== recipients.length) throw new Error(`POST /api/v1/cascades answered ${res.status}: ${JSON.stringify(json).slice(0, 300)}`);
    if (tag === 'r') {
      for (const r of recipients) accepted.set(addressOf(r), at);
      cascades.push(json.id);
    }
    return at;
  }
  const bodyOf = (recipients) => JSON.stringify({ locationId: seed.locationId, channel: CHANNEL, externalId: `bench-${runId}`, recipients });

  // Warm-up: JIT, connection pools, prepared statements; measured counters start after it.
  if (WARMUP > 0) {
    for (let from = 0; from < WARMUP; from += PER_REQUEST) {
      const recipients = recipientsOf('w', from, Math.min(PER_REQUEST, WARMUP - from));
      await post('w', from, recipients, bodyOf(recipients));
    }
    await waitUntil(async () => (await resultsApplied()) >= WARMUP && (await providerCount()) >= WARMUP, MAX_WAIT_MS, 'warm-up sent');
  }

  const requests = [];
  for (let from = 0; from < RECIPIENTS; from += PER_REQUEST) {
    const recipients = recipientsOf('r', from, Math.min(PER_REQUEST, RECIPIENTS - from));
    requests.push({ recipients, body: bodyOf(recipients) });
  }
  const sinkTimes = new Map();
  const pollSink = async () => {
    const { messages } = await (await fetch(shape.devMessagesUrl)).json();
    for (const m of messages) if (m.channel === CHANNEL && !sinkTimes.has(m.stepId)) sinkTimes.set(m.stepId, [m.to, Date.parse(m.sentAt)]);
    return messages;
  };
  const node = shape.processes;
  const groups = {
    ...Object.fromEntries(node.map((p) => [p.name, p.pid])),
    'postgres backends (bench db)': processMatchers.postgresBackendsOf(db.name),
    'postgres server (shared)': processMatchers.postgresServer,
    ...(SHAPE === 'distributed' ? { 'nats-server (shared)': processMatchers.natsServer(new URL(TEST_NATS_URL).port || '4222') } : {}),
    ...(providers ? { [`fake ${CHANNEL === 'EMAIL' ? 'SMTP server' : 'SMSC API'}`]: providers.pid } : {}),
    'bench client': process.pid,
  };
  const sentBefore = await providerCount();
  const appliedBefore = await resultsApplied();
  const pg0 = await Promise.all(node.map((p) => pgCount(p.child)));
  const cpu0 = cpuSnapshot(groups);
  say(`measuring: ${RECIPIENTS} recipients, ${MODE}${MODE === 'latency' ? ` at ${RATE}/s for ${SECONDS} s` : `, ${CONCURRENCY} requests at a time`}`);
  const t0 = nowMs();
  let lastAnswer = 0;
  const everyMs = (PER_REQUEST / RATE) * 1000;
  let offerLateMs = 0;
  let sinkPoller;
  // Often enough that at most ~250 messages arrive between two reads of the sink's last 1 000.
  if (MODE === 'latency' && shape.devMessagesUrl) sinkPoller = setInterval(() => pollSink().catch(() => undefined), Math.min(200, Math.max(20, 250_000 / RATE)));
  if (MODE === 'throughput') {
    let next = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < requests.length) {
        const i = next++;
        lastAnswer = Math.max(lastAnswer, await post('r', i, requests[i].recipients, requests[i].body));
      }
    }));
  } else {
    const inFlight = [];
    for (let i = 0; i < requests.length; i++) {
      const wait = t0 + i * everyMs - nowMs();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      offerLateMs = Math.max(offerLateMs, nowMs() - (t0 + i * everyMs));
      inFlight.push(post('r', i, requests[i].recipients, requests[i].body).then((at) => (lastAnswer = Math.max(lastAnswer, at))));
    }
    await Promise.all(inFlight);
  }
  await waitUntil(async () => (await providerCount()) - sentBefore >= RECIPIENTS, MAX_WAIT_MS, `${RECIPIENTS} messages accepted by the provider`, 100);
  const providerDoneSeen = nowMs();
  await waitUntil(async () => (await resultsApplied()) - appliedBefore >= RECIPIENTS, MAX_WAIT_MS, `${RECIPIENTS} results applied`, 100);
  const t1 = nowMs();
  const cpu1 = cpuSnapshot(groups);
  const pg1 = await Promise.all(node.map((p) => pgCount(p.child)));
  if (sinkPoller) clearInterval(sinkPoller);

  // When each measured recipient's message was accepted by the provider.
  let times;
  if (providers) {
    times = (await ask('report')).accepted;
  } else {
    const newest = await pollSink();
    times = [...sinkTimes.values()];
    if (MODE === 'throughput') times = newest.filter((m) => m.channel === CHANNEL).slice(0, 1).map((m) => [m.to, Date.parse(m.sentAt)]);
  }
  const perRecipient = new Map();
  for (const [to, at] of times) {
    if (!accepted.has(to)) continue;
    const seen = perRecipient.get(to);
    perRecipient.set(to, { first: Math.min(seen?.first ?? Infinity, at), times: (seen?.times ?? 0) + 1 });
  }
  let lastAccepted = -Infinity;
  for (const v of perRecipient.values()) lastAccepted = Math.max(lastAccepted, v.first);
  const sentTwice = providers ? [...perRecipient.values()].filter((v) => v.times > 1).length : Math.max(0, (await providerCount()) - sentBefore - RECIPIENTS);
  const latencies = MODE === 'latency' || providers ? [...perRecipient].map(([to, v]) => v.first - accepted.get(to)) : [];
  const latency = percentiles(latencies);

  // What a user would check: every step of every measured cascade is sent.
  let notSent = 0;
  for (const id of cascades) {
    const res = await fetch(`${shape.gatewayUrl}/api/v1/cascades/${id}`, { headers: { authorization: `Bearer ${seed.apiKey}` } });
    const { counts } = await res.json();
    notSent += counts.queued - counts.stepsSent;
  }
  const peak = Object.fromEntries(node.map((p) => [p.name, peakRssMb(p.pid)]));
  await shape.stop();
  const windowMs = t1 - t0;
  const endToEndMs = lastAccepted - t0;
  const rate = RECIPIENTS / (endToEndMs / 1000);

  const limits = chartMemoryLimits();
  const cpuUs = (name) => ((cpu1[name] - cpu0[name]) / RECIPIENTS) * 1e6;
  const pad = (s, n) => String(s).padEnd(n);
  const num = (v, n, digits = 0) => (v === null || v === undefined ? '–' : v.toFixed(digits)).padStart(n);
  const [l1, l5, l15] = loadavg();
  const lines = [];
  lines.push(`send path: ${SHAPE}, ${CHANNEL} via ${providers ? (CHANNEL === 'EMAIL' ? 'a local SMTP server' : 'a local fake of the SMSC.ru API') : 'the sink provider'}; ${MODE}: ${RECIPIENTS} recipients in ${requests.length} requests of ≤ ${PER_REQUEST}${MODE === 'latency' ? `, offered at ${RATE}/s: one request every ${everyMs.toFixed(0)} ms, each sent at most ${offerLateMs.toFixed(0)} ms late` : `, ${CONCURRENCY} at a time`}; warm-up ${WARMUP}`);
  lines.push(`machine: ${cpus().length} cores, load average ${l1.toFixed(2)} ${l5.toFixed(2)} ${l15.toFixed(2)} at the end (shared machine unless stated otherwise), node ${process.version}`);
  lines.push(`  end to end (first request sent → last message accepted by the provider): ${seconds(endToEndMs)} → ${Math.round(rate)} sends/s`);
  lines.push(`    all requests answered 202 after ${seconds(lastAnswer - t0)}; provider count reached ${RECIPIENTS} by ${seconds(providerDoneSeen - t0)} (seen by polling); results applied by ${seconds(windowMs)}`);
  if (latency) lines.push(`  latency, 202 answer → provider accepted (n=${latency.n}${latency.n < RECIPIENTS ? `, ${RECIPIENTS - latency.n} unmatched` : ''}): p50 ${latency.p50.toFixed(0)} ms, p95 ${latency.p95.toFixed(0)} ms, p99 ${latency.p99.toFixed(0)} ms, max ${latency.max.toFixed(0)} ms${MODE === 'throughput' ? ' (a burst, not a fixed rate: see --mode latency)' : ''}`);
  else lines.push('  latency: the sink keeps only its last 1 000 messages; measured in --mode latency');
  lines.push(`  checks: ${notSent === 0 ? 'every step of every cascade is sent' : `${notSent} steps NOT sent`}; sent twice: ${sentTwice}`);
  lines.push(`  per message, over the ${seconds(windowMs)} window (CPU of ${Object.keys(groups).length} process groups; PG counted inside each Node process):`);
  lines.push(`    ${pad('process', 30)} ${'CPU µs'.padStart(8)} ${'PG round trips'.padStart(15)} ${'PG requests'.padStart(12)}   peak RSS (chart limit)`);
  let systemUs = 0;
  let roundTrips = 0;
  let requestsPg = 0;
  for (const name of Object.keys(groups)) {
    const i = node.findIndex((p) => p.name === name);
    const pg = i >= 0 && pg0[i] && pg1[i] ? { rt: (pg1[i].roundTrips - pg0[i].roundTrips) / RECIPIENTS, rq: (pg1[i].requests - pg0[i].requests) / RECIPIENTS } : null;
    if (pg) {
      roundTrips += pg.rt;
      requestsPg += pg.rq;
    }
    const inSystem = !name.startsWith('fake ') && name !== 'bench client';
    if (inSystem) systemUs += cpuUs(name);
    const mem = i >= 0 ? `${peak[name] ?? '?'} MB${limits[name] ? ` (${limits[name]} MB)` : ''}` : '';
    lines.push(`    ${pad(name, 30)} ${num(cpuUs(name), 8)} ${num(pg?.rt, 15, 3)} ${num(pg?.rq, 12, 3)}   ${mem}`);
  }
  lines.push(`    ${pad('total, the service side', 30)} ${num(systemUs, 8)} ${num(roundTrips, 15, 3)} ${num(requestsPg, 12, 3)}   (without the fake provider and the bench client)`);
  // 1 M messages a day is 11.6 messages/s on average.
  lines.push(`    → ${((systemUs * RECIPIENTS) / 1e6 / (windowMs / 1000)).toFixed(2)} cores busy during the window; 1 M messages a day at an even rate: ${(systemUs / 86_400).toFixed(3)} cores`);
  console.log(lines.join('\n'));

  let noop = null;
  if (NOOP_STEPS > 0) {
    say(`no-op dispatch, same run: node bench/dispatch.mjs --steps ${NOOP_STEPS} --bus ${NOOP_BUS} (BENCH_PROFILE=1: its pipeline only)`);
    const r = spawnSync(process.execPath, [join(here, 'dispatch.mjs'), '--steps', String(NOOP_STEPS), '--bus', NOOP_BUS], { env: { ...process.env, BENCH_PROFILE: '1' }, encoding: 'utf8', timeout: 900_000 });
    const m = /→ (\d+) steps\/s/.exec(r.stdout ?? '');
    if (!m) throw new Error(`bench/dispatch.mjs gave no figure (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
    noop = Number(m[1]);
    console.log(`  no-op dispatch, same run (bench/dispatch.mjs --steps ${NOOP_STEPS} --bus ${NOOP_BUS}): ${noop} steps/s → real path / no-op = ${(rate / noop).toFixed(2)}`);
  }
  const targets = [];
  if (MODE === 'throughput' && SHAPE === 'all-in-one') targets.push([`≥ 5 000 sends/s`, rate >= 5_000], ...(noop ? [[`≥ 0.5 × no-op`, rate >= 0.5 * noop]] : []));
  if (MODE === 'throughput' && SHAPE === 'distributed') targets.push([`≥ 2 000 ${CHANNEL === 'EMAIL' ? 'emails' : 'SMS'}/s`, rate >= 2_000]);
  if (MODE === 'latency' && latency) targets.push([`p99 < 1 s${RATE >= 1_000 && SECONDS >= 60 ? '' : ' (the target is at ≥ 1 000/s for 60 s)'}`, latency.p99 < 1_000]);
  targets.push([`PG round trips/message well under 1 (${roundTrips.toFixed(2)}; met below 0.5)`, roundTrips < 0.5]);
  console.log(`  targets (issue 20): ${targets.map(([what, met]) => `${what} ${met ? 'MET' : 'NOT MET'}`).join('; ')}`);
  if (notSent > 0 || sentTwice > 0) process.exitCode = 1;
} finally {
  await cleanup();
}
