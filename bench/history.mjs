#!/usr/bin/env node
// History: do the service's costs grow with its history? (issue 35, docs/operations.md "Data
// lifecycle"). Two databases side by side in one run, each with the real gateway → contacts +
// cascade-scheduler on it (bench/cascade-servers.mjs, no dispatcher): an empty one, and one seeded with
// --recipients finished recipients spread over a year and two weeks (cascades of 3, 3 sent steps each —
// EMAIL, SMS, EMAIL — 20 % rated, and the senders' send logs: one `done` row per sent step in
// channel_email's and channel_sms's send_log, as sender-kit's sendLog.ts leaves it; written with
// INSERT … SELECT generate_series in chunks of 300 000 recipients, one statement each, so memory stays
// bounded; the seed time is printed), then vacuumed and checkpointed (settle(): this machine's
// PostgreSQL runs with autovacuum off, production's with it on). Every figure is taken on both sides
// alternately (a request on one, then on the other, the order swapped each turn), so a change in the
// machine's load falls on both alike: intake (POST /cascades, 100 recipients a request), GET
// /cascades/{id} of a 500-recipient cascade, the console's overview for 30 days (GetOverview, what the
// console's page asks) computed live, then again after rolling the history up (overviewRollup.ts,
// timed), on the seeded one a retention round (the recipients past the default 365 days) and the disk
// per million recipients before and after it; then, with the cascade servers stopped, the real send
// path as bench/send.mjs measures it (its all-in-one shape and sink, bench/lib/send-shapes.mjs and
// send-measure.mjs): an all-in-one on each database (same migrations, same schemas, the history's
// organization and API key, the recipient budget lifted as RECIPIENT_QUOTA_PRO), --send-recipients
// posted with `channel: EMAIL`, 500 a request, 4 at a time, after a warm-up of 500; sends/s = first
// request sent → last message accepted by the sink. A first round on each right after the start (on
// the seeded database the senders then prune the send log rows past SEND_LOG_KEEP_DAYS and the
// scheduler anonymizes past retention), then, once at most 1 000 send log rows past SEND_LOG_KEEP_DAYS
// are left (at most --catch-up-wait seconds) and both databases are vacuumed again, --steady-rounds
// rounds a side, alternating (their means compared). Both databases are dropped at the end, error or
// not. With BENCH_STATEMENTS=<dir> and pg_stat_statements loaded, each round's statements are written
// there (statementStats()); with BENCH_AUTO_EXPLAIN=<ms>, every statement slower than that is logged
// with its plan and buffers in PostgreSQL's log (auto_explain, set on the two databases only).
// Usage: npm run build && flock /tmp/rrs-bench.lock node bench/history.mjs [--recipients 5000000]
//   [--requests 40] [--reads 200] [--send-recipients 10000] [--steady-rounds 3] [--catch-up-wait 3600]
// Targets: intake and sends ≥ 0.9 × empty; GET /cascades/{id} ≤ 1.2 × empty and p99 < 50 ms; overview (rolled up) p95 < 250 ms.
import { statementStats } from './lib/statements.mjs';
import { fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { adminSql } from './lib/pg-admin.mjs';
import { nowMs, readCounter, waitUntil } from './lib/send-measure.mjs';
import { startAllInOneShape } from './lib/send-shapes.mjs';
import { seedHistory } from './lib/history-seed.mjs';

const require = createRequire(import.meta.url);
const pg = require('pg');
const { createGrpcClient, createPool, createServiceContext } = require('@rrs/runtime');
const { schedulerV1 } = require('@rrs/proto');
const { migrate } = require('@rrs/runtime');
const { SEND_LOG_KEEP_DAYS, SENDER_KIT_MIGRATIONS_DIR } = require('@rrs/sender-kit');
const emailSender = require('@rrs/channel-email');
const smsSender = require('@rrs/channel-sms');
const { AddressHasher, DEFAULT_RETENTION_DAYS, DEVELOPMENT_PERSON_HASH_KEY, overviewRollupRound, retentionRound, SESSION_SETTINGS } = require('@rrs/cascade-scheduler');
const here = dirname(fileURLToPath(import.meta.url));

const { values } = parseArgs({ options: { recipients: { type: 'string', default: '5000000' }, requests: { type: 'string', default: '40' }, reads: { type: 'string', default: '200' }, 'send-recipients': { type: 'string', default: '10000' }, 'steady-rounds': { type: 'string', default: '3' }, 'catch-up-wait': { type: 'string', default: '3600' } } });
const RECIPIENTS = Math.max(3, Number(values.recipients));
const REQUESTS = Math.max(1, Number(values.requests));
const READS = Math.max(10, Number(values.reads));
// The send path: as bench/send.mjs's throughput mode (all-in-one, EMAIL, 500 a request, 4 at a time, a warm-up first).
const SEND_RECIPIENTS = Math.min(200_000, Math.max(500, Number(values['send-recipients'])));
const STEADY_ROUNDS = Math.min(10, Math.max(1, Number(values['steady-rounds'])));
const SEND_PER_REQUEST = 500;
const SEND_CONCURRENCY = 4;
const SEND_WARMUP = 500;
const SEND_MAX_WAIT_MS = 600_000;
const CATCH_UP_WAIT_MS = Math.max(0, Number(values['catch-up-wait'])) * 1000;
// Caught up: what is left past the age is what crossed it since the last round (the next is an hour away).
const CAUGHT_UP_ROWS = 1_000;

const pgUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
if (!['127.0.0.1', 'localhost', '::1'].includes(new URL(pgUrl).hostname)) throw new Error('loopback PostgreSQL only');

function percentiles(latencies) {
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))];
  return { p50: pct(0.5), p95: pct(0.95), p99: pct(0.99) };
}

async function timed(n, task) {
  const latencies = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await task(i);
    latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return percentiles(latencies);
}


/** The senders' tables, migrated as the senders migrate them at start, so the seed can write their send logs. */
async function migrateSenders(databaseUrl) {
  const sets = [
    [emailSender.SCHEMA, [{ dir: SENDER_KIT_MIGRATIONS_DIR, component: 'sender-kit' }]],
    [smsSender.SCHEMA, [{ dir: SENDER_KIT_MIGRATIONS_DIR, component: 'sender-kit' }, { dir: smsSender.MIGRATIONS_DIR }]],
  ];
  for (const [schema, migrations] of sets) {
    const pool = createPool({ url: databaseUrl, schema, max: 1 });
    try {
      for (const set of migrations) await migrate(pool, { schema, ...set });
    } finally {
      await pool.end();
    }
  }
}

/**
 * The real send path on this database, as bench/send.mjs measures it (throughput mode, all-in-one, the
 * sink): the all-in-one launcher started on the same database (its migrations find the schemas the
 * cascade servers and the seed wrote), the same organization and API key as the history, SEND_RECIPIENTS
 * posted with `channel: EMAIL`. Sends/s: first request sent → last message accepted by the sink. Steps
 * already due when it starts (the intake measured before, sent by its dispatcher) go out with the warm-up.
 * Two rounds: `first` right after the start, while the senders prune a seeded history's send log rows
 * past SEND_LOG_KEEP_DAYS (a service that never pruned, catching up) and the scheduler anonymizes its
 * recipients past retention; `steady` once no send log row past SEND_LOG_KEEP_DAYS is left (what a
 * service that has been pruning all along has), waited for at most CATCH_UP_WAIT_MS.
 */
/** Send log rows (email + sms) and how many are past SEND_LOG_KEEP_DAYS: counted whole, so only before and after rounds. */
async function sendLogRows(db) {
  return (await db.query(
    `SELECT (SELECT count(*) FROM channel_email.send_log)::int AS email, (SELECT count(*) FROM channel_sms.send_log)::int AS sms,
            (SELECT count(*) FROM channel_email.send_log WHERE created_at < now() - make_interval(days => $1))::int
          + (SELECT count(*) FROM channel_sms.send_log WHERE created_at < now() - make_interval(days => $1))::int AS past_keep`,
    [SEND_LOG_KEEP_DAYS],
  )).rows[0];
}

/** Whether at most CAUGHT_UP_ROWS send log rows are past SEND_LOG_KEEP_DAYS (read off the created_at index, at most that many rows). */
async function caughtUp(db) {
  const { rows: [{ n }] } = await db.query(
    `SELECT (SELECT count(*) FROM (SELECT 1 FROM channel_email.send_log WHERE created_at < now() - make_interval(days => $1) LIMIT $2 + 1) e)
          + (SELECT count(*) FROM (SELECT 1 FROM channel_sms.send_log WHERE created_at < now() - make_interval(days => $1) LIMIT $2 + 1) s) AS n`,
    [SEND_LOG_KEEP_DAYS, CAUGHT_UP_ROWS],
  );
  return Number(n) <= CAUGHT_UP_ROWS;
}

/** Milliseconds until `done()` holds (asked every second), or null when it did not within CATCH_UP_WAIT_MS. */
async function catchUp(done, what) {
  const waited = Date.now();
  try {
    await waitUntil(done, CATCH_UP_WAIT_MS, what, 1_000);
    return Date.now() - waited;
  } catch {
    return null;
  }
}

/** Retention rounds (retentionRound, 500 recipients each) on `side` until one finds nothing more: their count and time. */
async function retentionCatchUp(side) {
  const ctx = createServiceContext('bench-history', 'warn');
  const pool = createPool({ url: side.url, schema: 'scheduler', max: 2 });
  const started = Date.now();
  let rounds = 0;
  try {
    while ((await retentionRound({ pool, hasher: new AddressHasher(DEVELOPMENT_PERSON_HASH_KEY), logger: ctx.logger, batchSize: 500 })).more) rounds++;
  } finally {
    await pool.end();
  }
  const { rows } = await side.db.query(
    `SELECT 1 FROM recipients WHERE anonymized_at IS NULL AND finished_at IS NOT NULL AND finished_at < now() - make_interval(days => $1) LIMIT 1`,
    [DEFAULT_RETENTION_DAYS],
  );
  if (rows.length > 0) throw new Error('retention rounds ended with recipients past retention left');
  return { ms: Date.now() - started, rounds: rounds + 1 };
}

/**
 * What PostgreSQL's autovacuum and checkpointer do for a database that grew over a year: the visibility
 * map and statistics after the bulk seed, the space of the rows a catch-up pruning deleted. The test
 * machine's PostgreSQL runs with autovacuum off (its CI configuration), production with it on; so the
 * bench vacuums where autovacuum would have, on both databases alike.
 */
async function settle(db) {
  const t0 = Date.now();
  await db.query('VACUUM (ANALYZE)');
  await db.query('CHECKPOINT');
  return Date.now() - t0;
}

/**
 * The real send path on one database, as bench/send.mjs measures it (throughput mode, all-in-one, the
 * sink): the all-in-one launcher started on the database (its migrations find the schemas the cascade
 * servers and the seed wrote), the same organization and API key as the history, SEND_RECIPIENTS
 * posted with `channel: EMAIL`, 500 a request, SEND_CONCURRENCY at a time. Sends/s: first request
 * sent → last message accepted by the sink.
 */
async function startSender(side) {
  // Steps already due when it starts (the intake measured before) go out with the warm-up: counted
  // before its dispatcher starts (counted after, those it sent meanwhile were counted in a round).
  const { rows: [{ due }] } = await side.db.query(`SELECT count(*)::int AS due FROM scheduler.recipient_steps WHERE status IN ('scheduled', 'dispatched') AND sent_channel = 'EMAIL' AND due_at <= now() + interval '1 minute'`);
  const shape = await startAllInOneShape({ databaseUrl: side.url, adminToken: `adm_${randomBytes(16).toString('hex')}`, extraEnv: {} });
  const sent = () => readCounter(shape.sendsMetricsUrl, 'sender_sends_total', { channel: 'EMAIL', result: 'sent' });
  const applied = () => readCounter(shape.resultsMetricsUrl, 'scheduler_step_results_total', { outcome: 'SENT' });
  const post = async (tag, from, count) => {
    const recipients = Array.from({ length: count }, (_, k) => ({ name: `Customer ${from + k}`, email: `${tag}${from + k}.${side.label}.${randomBytes(3).toString('hex')}@example.com` }));
    const res = await fetch(`${shape.gatewayUrl}/api/v1/cascades`, {
      method: 'POST',
      headers: { authorization: `Bearer ${side.server.key}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
      body: JSON.stringify({ locationId: side.server.locationId, channel: 'EMAIL', externalId: `history-send-${side.label}`, recipients }),
    });
    const json = await res.json();
    if (res.status !== 202 || json.queued !== count) throw new Error(`POST /api/v1/cascades answered ${res.status}: ${JSON.stringify(json).slice(0, 300)}`);
  };
  const statements = await statementStats(side.db);
  let rounds = 0;
  const round = async () => {
    const tag = `r${rounds++}`;
    await statements.reset();
    const sentBefore = await sent();
    const appliedBefore = await applied();
    const t0 = nowMs();
    let next = 0;
    await Promise.all(Array.from({ length: SEND_CONCURRENCY }, async () => {
      while (next * SEND_PER_REQUEST < SEND_RECIPIENTS) {
        const from = next++ * SEND_PER_REQUEST;
        await post(tag, from, Math.min(SEND_PER_REQUEST, SEND_RECIPIENTS - from));
      }
    }));
    await waitUntil(async () => (await sent()) - sentBefore >= SEND_RECIPIENTS, SEND_MAX_WAIT_MS, `${SEND_RECIPIENTS} messages accepted by the sink`, 100);
    // The sink's newest message (/dev/messages lists the newest first) is the last one accepted.
    const { messages } = await (await fetch(shape.devMessagesUrl)).json();
    const lastAccepted = Date.parse(messages.find((m) => m.channel === 'EMAIL').sentAt);
    await waitUntil(async () => (await applied()) - appliedBefore >= SEND_RECIPIENTS, SEND_MAX_WAIT_MS, `${SEND_RECIPIENTS} results applied`, 100);
    await statements.dump(`${side.label}-${tag}`);
    return { sendsPerSecond: SEND_RECIPIENTS / ((lastAccepted - t0) / 1000), endToEndMs: lastAccepted - t0, resultsAppliedMs: nowMs() - t0, sentTwice: (await sent()) - sentBefore - SEND_RECIPIENTS };
  };
  for (let from = 0; from < SEND_WARMUP; from += SEND_PER_REQUEST) await post('w', from, Math.min(SEND_PER_REQUEST, SEND_WARMUP - from));
  await waitUntil(async () => (await applied()) >= due + SEND_WARMUP && (await sent()) >= due + SEND_WARMUP, SEND_MAX_WAIT_MS, `warm-up (${due} due + ${SEND_WARMUP}) sent`);
  return { round, stop: () => shape.stop() };
}

/** A database with the cascade servers (bench/cascade-servers.mjs, no dispatcher) on it. */
async function openSide(label) {
  const dbName = `rrs_bench_history_${randomBytes(4).toString('hex')}`;
  await adminSql(pgUrl, `CREATE DATABASE ${dbName}`);
  // BENCH_AUTO_EXPLAIN=<ms>: every statement slower than that is logged with its plan and buffers
  // (auto_explain, in the server's log), to see which part of a statement grows with the history.
  if (process.env.BENCH_AUTO_EXPLAIN) {
    for (const setting of [`session_preload_libraries = 'auto_explain'`, `auto_explain.log_min_duration = ${Number(process.env.BENCH_AUTO_EXPLAIN)}`, 'auto_explain.log_analyze = on', 'auto_explain.log_buffers = on', 'auto_explain.log_nested_statements = on']) {
      await adminSql(pgUrl, `ALTER DATABASE ${dbName} SET ${setting}`);
    }
  }
  const url = new URL(pgUrl);
  url.pathname = `/${dbName}`;
  const side = { label, dbName, url: url.toString() };
  side.drop = async () => {
    await side.db?.end().catch(() => {});
    await side.stopServers?.();
    await adminSql(pgUrl, `DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
  };
  try {
    await migrateSenders(side.url);
    const child = fork(join(here, 'cascade-servers.mjs'), [], { env: { ...process.env, DATABASE_URL: side.url, BENCH_DISPATCHER: '0', BENCH_OVERVIEW_ROLLUP_INTERVAL_MS: String(86_400_000) }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let stopped;
    side.stopServers = () => (stopped ??= (async () => {
      if (child.exitCode !== null) return;
      child.send('stop');
      await new Promise((resolve) => child.once('exit', resolve));
    })());
    side.server = await new Promise((resolve, reject) => {
      child.once('message', resolve);
      child.once('exit', (code) => reject(new Error(`servers exited ${code}`)));
    });
    side.db = new pg.Client({ connectionString: side.url, options: '-c search_path=scheduler' });
    await side.db.connect();
    side.size = async () => Number((await side.db.query('SELECT pg_database_size(current_database()) AS n')).rows[0].n);
    side.headers = { authorization: `Bearer ${side.server.key}`, 'content-type': 'application/json' };
    side.post = async (recipients, i) => {
      const res = await fetch(`${side.server.base}/api/v1/cascades`, {
        method: 'POST',
        headers: { ...side.headers, 'idempotency-key': randomUUID() },
        body: JSON.stringify({ locationId: side.server.locationId, externalId: `history-${label}-${i}`, recipients: Array.from({ length: recipients }, (_, j) => ({ name: `R ${j}`, email: `h${i}-${j}-${randomBytes(3).toString('hex')}@example.com` })) }),
      });
      if (res.status !== 202 && res.status !== 201) throw new Error(`POST /cascades ${res.status}: ${await res.text()}`);
      return (await res.json()).id;
    };
    return side;
  } catch (err) {
    await side.drop();
    throw err;
  }
}

/** Each task once per side, the sides taking turns first (so a change in the machine's load falls on both alike); milliseconds per side. */
async function alternately(sides, n, task) {
  const times = new Map(sides.map((side) => [side, []]));
  for (let i = 0; i < n; i++) {
    for (const side of i % 2 === 0 ? sides : [...sides].reverse()) {
      const t0 = process.hrtime.bigint();
      await task(side, i);
      times.get(side).push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  }
  return times;
}

/** The console's overview request for the last 30 days (what GET /account/overview asks the scheduler). */
function overviewRequest(side) {
  const day = (ms) => new Date(ms).toISOString().slice(0, 10);
  return { organizationId: side.server.organizationId, fromDay: day(Date.now() - 29 * 86_400_000), toDay: day(Date.now()), timeZone: 'UTC' };
}

/**
 * The overview computed live from the raw rows (only the reference the roll-up is compared with), then
 * the whole history's first roll-up, timed (what the scheduler's rounds keep up to date, overviewRollup.ts).
 */
async function overviewLiveThenRollUp(side) {
  const out = {};
  side.overviewClient = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, side.server.schedulerAddress);
  const request = overviewRequest(side);
  // It grows with the requests in range, so on a long history a few reads, and one past the client's
  // deadline ends the measurement.
  try {
    out.live = await timed(5, () => side.overviewClient.client.getOverview(request));
  } catch (err) {
    if (err?.kind !== 'unavailable') throw err;
    out.live = { timedOut: `over the gRPC deadline (${err.cause?.details ?? err.message})` };
  }
  const ctx = createServiceContext('bench-history', 'warn');
  const pool = createPool({ url: side.url, schema: 'scheduler', max: 2, settings: SESSION_SETTINGS });
  const started = Date.now();
  let rounds = 0;
  try {
    while ((await overviewRollupRound({ pool, logger: ctx.logger, daysPerRound: 400 })).more) rounds++;
  } finally {
    await pool.end();
  }
  out.rollup = { ms: Date.now() - started, rounds: rounds + 1 };
  out.requestsInRange = (await side.db.query(
    `SELECT count(*)::int AS n FROM review_requests WHERE organization_id = $1 AND created_at >= $2::date AND created_at < $3::date + 1`,
    [side.server.organizationId, request.fromDay, request.toDay],
  )).rows[0].n;
  return out;
}

/** The overview once rolled up, read on both sides alternately (the figure against the target). */
async function overviewRolledUp(sides) {
  try {
    const times = await alternately(sides, Math.max(20, READS / 4), (side) => side.overviewClient.client.getOverview(overviewRequest(side)));
    return Object.fromEntries(sides.map((side) => [side.label, percentiles(times.get(side))]));
  } finally {
    for (const side of sides) side.overviewClient?.close();
  }
}

const mean = (values) => values.reduce((sum, value) => sum + value, 0) / values.length;
const empty = await openSide('empty');
let seeded;
const report = { recipients: RECIPIENTS };
try {
  seeded = await openSide('history');
  const sides = [empty, seeded];
  {
    const t0 = Date.now();
    await seedHistory(seeded.db, seeded.server.organizationId, seeded.server.locationId, RECIPIENTS);
    report.seedSeconds = (Date.now() - t0) / 1000;
    report.settleAfterSeedMs = { history: await settle(seeded.db), empty: await settle(empty.db) };
    report.bytesPerMillion = (await seeded.size()) / (RECIPIENTS / 1e6);
  }
  // Intake: REQUESTS requests of 100 recipients on each side, one at a time, the sides alternating;
  // first right after the seed, then once the history past retention (a year and two weeks seeded, 365
  // days kept) is anonymized and both databases are vacuumed (what a service that has been pruning all
  // along has): the second is the figure against the target, as for the sends.
  const intake = async () => {
    const times = await alternately(sides, REQUESTS, (side, i) => side.post(100, i));
    return Object.fromEntries(sides.map((side) => [side.label, (REQUESTS * 100) / (times.get(side).reduce((a, b) => a + b, 0) / 1000)]));
  };
  report.intakeFirst = await intake();
  // The servers' retention loop ran its first round at their start, before the seed, and the next is an
  // hour away: the history past retention is anonymized here by the same rounds, back to back, timed.
  report.retentionCatchUp = await retentionCatchUp(seeded);
  report.settleAfterRetentionMs = { history: await settle(seeded.db), empty: await settle(empty.db) };
  report.intake = await intake();
  // GET /cascades/{id}: a cascade of 500 recipients on each side, read READS times, alternating.
  {
    for (const side of sides) side.big = await side.post(500, 'big');
    const times = await alternately(sides, READS, async (side) => {
      const res = await fetch(`${side.server.base}/api/v1/cascades/${side.big}`, { headers: side.headers });
      if (res.status !== 200) throw new Error(`GET /cascades/{id} ${res.status}`);
      await res.arrayBuffer();
    });
    report.getCascade = Object.fromEntries(sides.map((side) => [side.label, percentiles(times.get(side))]));
  }
  report.overview = { empty: await overviewLiveThenRollUp(empty), history: await overviewLiveThenRollUp(seeded) };
  {
    const rolled = await overviewRolledUp(sides);
    for (const side of sides) report.overview[side.label].rolled = rolled[side.label];
  }
  {
    const ctx = createServiceContext('bench-history', 'warn');
    const pool = createPool({ url: seeded.url, schema: 'scheduler', max: 2 });
    const started = Date.now();
    try {
      const round = await retentionRound({ pool, hasher: new AddressHasher(DEVELOPMENT_PERSON_HASH_KEY), logger: ctx.logger, batchSize: 500 });
      report.retentionRound = { ms: Date.now() - started, counts: round.counts, more: round.more };
    } finally {
      await pool.end();
    }
    report.bytesPerMillionAfterRound = (await seeded.size()) / (RECIPIENTS / 1e6);
  }
  // The send path last, with the cascade servers stopped: the two all-in-ones are the only service processes.
  for (const side of sides) await side.stopServers();
  const senders = new Map();
  try {
    for (const side of sides) senders.set(side, await startSender(side));
    report.sendLogAtStart = await sendLogRows(seeded.db);
    // First: right after the start; on the seeded side the senders prune a year of send log rows past
    // SEND_LOG_KEEP_DAYS (a service that never pruned, catching up) and the scheduler anonymizes its
    // recipients past retention, meanwhile.
    report.sendsFirst = {};
    for (const side of sides) report.sendsFirst[side.label] = await senders.get(side).round();
    report.sendLogAfterFirst = await sendLogRows(seeded.db);
    // Then steady: once no send log row past SEND_LOG_KEEP_DAYS is left and the deleted rows' space is
    // vacuumed (what a service that has been pruning all along has), STEADY_ROUNDS rounds a side, alternating.
    report.catchUpMs = await catchUp(() => caughtUp(seeded.db), "the senders' pruning caught up");
    report.settleAfterCatchUpMs = { history: await settle(seeded.db), empty: await settle(empty.db) };
    report.sendsSteady = { empty: [], history: [] };
    for (let i = 0; i < STEADY_ROUNDS; i++) {
      for (const side of i % 2 === 0 ? sides : [...sides].reverse()) report.sendsSteady[side.label].push(await senders.get(side).round());
    }
    report.sendLogAfter = await sendLogRows(seeded.db);
  } finally {
    for (const sender of senders.values()) await sender.stop();
  }
} finally {
  await seeded?.drop();
  await empty.drop();
}

const all = [report.sendsFirst.empty, report.sendsFirst.history, ...report.sendsSteady.empty, ...report.sendsSteady.history];
if (all.some((round) => round.sentTwice > 0)) process.exitCode = 1;
const ratio = (a, b) => (a / b).toFixed(2);
const liveP95 = (figure) => (figure.timedOut ? figure.timedOut : `${figure.p95.toFixed(1)} ms`);
const [oh, oe] = [report.overview.history, report.overview.empty];
const [gh, ge] = [report.getCascade.history, report.getCascade.empty];
const steady = Object.fromEntries(Object.entries(report.sendsSteady).map(([label, rounds]) => [label, mean(rounds.map((round) => round.sendsPerSecond))]));
console.log(JSON.stringify(report, null, 2));
console.log(`history of ${RECIPIENTS} finished recipients (seeded in ${report.seedSeconds} s, ${(report.bytesPerMillion / 2 ** 30).toFixed(2)} GiB per million; vacuumed in ${report.settleAfterSeedMs.history} ms), each figure against an empty database measured alternately in the same run:`);
console.log(`  intake right after the seed (the history past retention not yet anonymized): ${Math.round(report.intakeFirst.history)} vs ${Math.round(report.intakeFirst.empty)} recipients/s: ${ratio(report.intakeFirst.history, report.intakeFirst.empty)} × empty`);
console.log(`    the history past retention anonymized in ${report.retentionCatchUp.rounds} rounds, ${(report.retentionCatchUp.ms / 1000).toFixed(1)} s; vacuumed in ${report.settleAfterRetentionMs.history} ms`);
console.log(`  intake then: ${Math.round(report.intake.history)} vs ${Math.round(report.intake.empty)} recipients/s: ${ratio(report.intake.history, report.intake.empty)} × empty (target ≥ 0.9)`);
console.log(`  GET /cascades/{id} p50 ${gh.p50.toFixed(1)} vs ${ge.p50.toFixed(1)} ms: ${ratio(gh.p50, ge.p50)} × empty (target ≤ 1.2); p99 ${gh.p99.toFixed(1)} vs ${ge.p99.toFixed(1)} ms (target < 50)`);
console.log(`  overview 30 days (${oh.requestsInRange} requests in range) p95, live from the raw rows: ${liveP95(oh.live)} vs ${liveP95(oe.live)}`);
console.log(`  overview 30 days, rolled up, alternating: p50 ${oh.rolled.p50.toFixed(1)} vs ${oe.rolled.p50.toFixed(1)} ms, p95 ${oh.rolled.p95.toFixed(1)} vs ${oe.rolled.p95.toFixed(1)} ms (target < 250; ${ratio(oh.rolled.p95, oe.rolled.p95)} × empty); the first roll-up of the whole history ${oh.rollup.ms} ms`);
const atStart = report.sendLogAtStart;
console.log(`  sends, the real path (all-in-one, EMAIL, the sink; ${SEND_RECIPIENTS} recipients a round; send log rows at start ${atStart.email} + ${atStart.sms}, ${atStart.past_keep} past ${SEND_LOG_KEEP_DAYS} days):`);
console.log(`  sends on the first start (the senders prune, the scheduler anonymizes past retention, meanwhile): ${Math.round(report.sendsFirst.history.sendsPerSecond)} vs ${Math.round(report.sendsFirst.empty.sendsPerSecond)} sends/s: ${ratio(report.sendsFirst.history.sendsPerSecond, report.sendsFirst.empty.sendsPerSecond)} × empty`);
console.log(`    senders' pruning caught up ${report.catchUpMs === null ? `NOT within ${CATCH_UP_WAIT_MS / 1000} s` : `${(report.catchUpMs / 1000).toFixed(1)} s after that round`}; vacuumed in ${report.settleAfterCatchUpMs.history} ms`);
console.log(`  sends then, ${STEADY_ROUNDS} rounds a side alternating: ${Math.round(steady.history)} vs ${Math.round(steady.empty)} sends/s mean: ${ratio(steady.history, steady.empty)} × empty (target ≥ 0.9); rounds ${report.sendsSteady.history.map((r) => Math.round(r.sendsPerSecond)).join(', ')} vs ${report.sendsSteady.empty.map((r) => Math.round(r.sendsPerSecond)).join(', ')}; sent twice ${all.reduce((sum, round) => sum + round.sentTwice, 0)}; send log rows (email + sms) ${report.sendLogAfter.email} + ${report.sendLogAfter.sms} after them`);
console.log(`  retention round ${report.retentionRound.ms} ms: ${JSON.stringify(report.retentionRound.counts)}; disk per million ${(report.bytesPerMillionAfterRound / 2 ** 30).toFixed(2)} GiB after it`);
