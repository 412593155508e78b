#!/usr/bin/env node
// History: do the service's costs grow with its history? (issue 35, docs/operations.md "Data
// lifecycle"). Runs the real gateway → contacts + cascade-scheduler (bench/cascade-servers.mjs, no
// dispatcher) twice in the same run: on an empty database, and on one seeded with --recipients
// finished recipients spread over a year and two weeks (cascades of 3, 3 sent steps each — EMAIL, SMS,
// EMAIL — 20 % rated, and the senders' send logs: one `done` row per sent step in channel_email's and
// channel_sms's send_log, as sender-kit's sendLog.ts leaves it; written with INSERT … SELECT
// generate_series in chunks of 300 000 recipients, one statement each, so memory stays bounded; the seed
// time is printed). Measures on each: intake (POST /cascades, 100 recipients a request), GET
// /cascades/{id} of a 500-recipient cascade, the console's overview for 30 days (GetOverview, what the
// console's page asks) computed live, then again after rolling the history up (overviewRollup.ts,
// timed), on the seeded one a retention round (the recipients past the default 365 days) and the disk
// per million recipients before and after it; then, with the cascade servers stopped, the real send
// path as bench/send.mjs measures it (its all-in-one shape and sink, bench/lib/send-shapes.mjs and
// send-measure.mjs): the all-in-one on the same database (same migrations, same schemas, the history's
// organization and API key, the recipient budget lifted as RECIPIENT_QUOTA_PRO), --send-recipients
// posted with `channel: EMAIL`, 500 a request, 4 at a time, after a warm-up of 500; sends/s = first
// request sent → last message accepted by the sink. Two rounds: right after the start (on the seeded
// database the senders then prune the send log rows past SEND_LOG_KEEP_DAYS and the scheduler
// anonymizes past retention), and once no send log row past SEND_LOG_KEEP_DAYS is left (at most
// --catch-up-wait seconds). Each measurement drops its database at its end, error or not.
// Usage: npm run build && flock /tmp/rrs-bench.lock node bench/history.mjs [--recipients 5000000]
//   [--requests 40] [--reads 200] [--send-recipients 5000] [--catch-up-wait 3600]
// Targets: intake and sends ≥ 0.9 × empty; GET /cascades/{id} ≤ 1.2 × empty and p99 < 50 ms; overview (rolled up) p95 < 250 ms.
import { fork } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { adminSql } from './lib/pg-admin.mjs';
import { nowMs, readCounter, waitUntil } from './lib/send-measure.mjs';
import { startAllInOneShape } from './lib/send-shapes.mjs';

const require = createRequire(import.meta.url);
const pg = require('pg');
const { createGrpcClient, createPool, createServiceContext } = require('@rrs/runtime');
const { schedulerV1 } = require('@rrs/proto');
const { migrate } = require('@rrs/runtime');
const { SEND_LOG_KEEP_DAYS, SENDER_KIT_MIGRATIONS_DIR } = require('@rrs/sender-kit');
const emailSender = require('@rrs/channel-email');
const smsSender = require('@rrs/channel-sms');
const { AddressHasher, DEVELOPMENT_PERSON_HASH_KEY, overviewRollupRound, retentionRound, SESSION_SETTINGS } = require('@rrs/cascade-scheduler');
const here = dirname(fileURLToPath(import.meta.url));

const { values } = parseArgs({ options: { recipients: { type: 'string', default: '5000000' }, requests: { type: 'string', default: '40' }, reads: { type: 'string', default: '200' }, 'send-recipients': { type: 'string', default: '5000' }, 'catch-up-wait': { type: 'string', default: '3600' } } });
const RECIPIENTS = Math.max(3, Number(values.recipients));
const REQUESTS = Math.max(1, Number(values.requests));
const READS = Math.max(10, Number(values.reads));
// The send path: as bench/send.mjs's throughput mode (all-in-one, EMAIL, 500 a request, 4 at a time, a warm-up first).
const SEND_RECIPIENTS = Math.min(200_000, Math.max(500, Number(values['send-recipients'])));
const SEND_PER_REQUEST = 500;
const SEND_CONCURRENCY = 4;
const SEND_WARMUP = 500;
const SEND_MAX_WAIT_MS = 600_000;
const CATCH_UP_WAIT_MS = Math.max(0, Number(values['catch-up-wait'])) * 1000;
// Caught up: what is left past the age is what crossed it since the last round (the next is an hour away).
const CAUGHT_UP_ROWS = 1_000;
const CHUNK = 300_000;

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

/** The finished history of one year and two weeks for `organizationId`: cascades of 3 recipients, 3 sent steps each, 20 % rated. */
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
         INSERT INTO recipients (id, cascade_id, organization_id, position, name, email, phone, status, finish_reason, finished_at, review_request_id, rating)
         SELECT gen_random_uuid(), c.id, $1::uuid, p, 'Seeded Person', 'seed' || md5(c.id::text || p) || '@example.com', '+7900' || lpad((abs(hashtext(c.id::text || p)) % 10000000)::text, 7, '0'),
                'finished', CASE WHEN random() < 0.2 THEN 'rated' ELSE 'exhausted' END, c.created_at + interval '2 days', gen_random_uuid(), NULL
           FROM c, generate_series(0, 2) p RETURNING id, cascade_id, review_request_id, finish_reason, finished_at, phone),
       rr AS (
         INSERT INTO review_requests (id, organization_id, token, location_id, recipient_id, status, rated_at, created_at)
         SELECT r.review_request_id, $1::uuid, replace(r.review_request_id::text, '-', ''), $2, r.id, CASE WHEN r.finish_reason = 'rated' THEN 'rated' ELSE 'created' END,
                CASE WHEN r.finish_reason = 'rated' THEN r.finished_at END, r.finished_at - interval '2 days' FROM r RETURNING id, rated_at),
       ra AS (
         INSERT INTO ratings (review_request_id, organization_id, rating, created_at)
         SELECT id, $1::uuid, 1 + (abs(hashtext(id::text)) % 5), rated_at FROM rr WHERE rated_at IS NOT NULL RETURNING 1),
       st AS (
         INSERT INTO recipient_steps (id, recipient_id, cascade_id, organization_id, step_order, channel, delay_minutes, status, sent_channel, attempt, sent_at, delivered_at)
         SELECT gen_random_uuid(), r.id, r.cascade_id, $1::uuid, s, CASE WHEN s = 1 THEN 'SMS' ELSE 'EMAIL' END, s * 60, 'sent', CASE WHEN s = 1 THEN 'SMS' ELSE 'EMAIL' END, 1,
                r.finished_at - interval '2 days' + s * interval '1 hour', r.finished_at - interval '2 days' + s * interval '1 hour'
           FROM r, generate_series(0, 2) s RETURNING id, recipient_id, sent_channel, sent_at),
       -- The senders' send logs, one row per sent step, as sendLog.ts leaves it: claimed at the send
       -- (created_at), done with the provider's message id; the SMS sender also keeps the number and parts.
       em AS (
         INSERT INTO channel_email.send_log (step_id, attempt_id, channel, organization_id, state, lease_until, attempts, outcome, provider_message_id, parts, provider, created_at, updated_at)
         SELECT st.id::text, st.id || ':1', 'EMAIL', $1, 'done', st.sent_at + interval '1 minute', 1, 'STEP_OUTCOME_SENT', '<' || st.id || '@bench.example.com>', 0, 'smtp', st.sent_at, st.sent_at
           FROM st WHERE st.sent_channel = 'EMAIL' RETURNING 1)
       INSERT INTO channel_sms.send_log (step_id, attempt_id, channel, organization_id, state, lease_until, attempts, outcome, provider_message_id, parts, provider, address, created_at, updated_at)
       SELECT st.id::text, st.id || ':1', 'SMS', $1, 'done', st.sent_at + interval '1 minute', 1, 'STEP_OUTCOME_SENT', (abs(hashtext(st.id::text)) % 1000000000)::text || '-' || r.phone, 1, 'smsc', r.phone, st.sent_at, st.sent_at
         FROM st JOIN r ON r.id = st.recipient_id WHERE st.sent_channel = 'SMS'`,
      [organizationId, locationId, from, to, cascades],
    );
    process.stdout.write(`  seeded ${Math.min(total, (to + 1) * 3)} / ${total} recipients\r`);
  }
  // Feed positions are not needed by anything measured; the counters table starts after them.
  await db.query('ANALYZE');
  process.stdout.write('\n');
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
async function measureSends(databaseUrl, db, server, label) {
  const { rows: [{ due }] } = await db.query(`SELECT count(*)::int AS due FROM scheduler.recipient_steps WHERE status IN ('scheduled', 'dispatched') AND sent_channel = 'EMAIL' AND due_at <= now() + interval '1 minute'`);
  const sendLogRows = async () => (await db.query(
    `SELECT (SELECT count(*) FROM channel_email.send_log)::int AS email, (SELECT count(*) FROM channel_sms.send_log)::int AS sms,
            (SELECT count(*) FROM channel_email.send_log WHERE created_at < now() - make_interval(days => $1))::int
          + (SELECT count(*) FROM channel_sms.send_log WHERE created_at < now() - make_interval(days => $1))::int AS past_keep`,
    [SEND_LOG_KEEP_DAYS],
  )).rows[0];
  const out = { recipients: SEND_RECIPIENTS, dueAtStart: due, sendLogAtStart: await sendLogRows() };
  const shape = await startAllInOneShape({ databaseUrl, adminToken: `adm_${randomBytes(16).toString('hex')}`, extraEnv: {} });
  try {
    const sent = () => readCounter(shape.sendsMetricsUrl, 'sender_sends_total', { channel: 'EMAIL', result: 'sent' });
    const applied = () => readCounter(shape.resultsMetricsUrl, 'scheduler_step_results_total', { outcome: 'SENT' });
    const post = async (tag, from, count) => {
      const recipients = Array.from({ length: count }, (_, k) => ({ name: `Customer ${from + k}`, email: `${tag}${from + k}.${label}.${randomBytes(3).toString('hex')}@example.com` }));
      const res = await fetch(`${shape.gatewayUrl}/api/v1/cascades`, {
        method: 'POST',
        headers: { authorization: `Bearer ${server.key}`, 'content-type': 'application/json', 'idempotency-key': randomUUID() },
        body: JSON.stringify({ locationId: server.locationId, channel: 'EMAIL', externalId: `history-send-${label}`, recipients }),
      });
      const json = await res.json();
      if (res.status !== 202 || json.queued !== count) throw new Error(`POST /api/v1/cascades answered ${res.status}: ${JSON.stringify(json).slice(0, 300)}`);
    };
    const round = async (tag) => {
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
      return { sendsPerSecond: SEND_RECIPIENTS / ((lastAccepted - t0) / 1000), endToEndMs: lastAccepted - t0, resultsAppliedMs: nowMs() - t0, sentTwice: (await sent()) - sentBefore - SEND_RECIPIENTS };
    };
    for (let from = 0; from < SEND_WARMUP; from += SEND_PER_REQUEST) await post('w', from, Math.min(SEND_PER_REQUEST, SEND_WARMUP - from));
    await waitUntil(async () => (await applied()) >= due + SEND_WARMUP && (await sent()) >= due + SEND_WARMUP, SEND_MAX_WAIT_MS, `warm-up (${due} due + ${SEND_WARMUP}) sent`);
    out.first = await round('f');
    out.first.sendLog = await sendLogRows();
    const waited = Date.now();
    try {
      await waitUntil(async () => (await sendLogRows()).past_keep <= CAUGHT_UP_ROWS, CATCH_UP_WAIT_MS, 'the senders\' pruning caught up', 1_000);
      out.catchUpMs = Date.now() - waited;
    } catch {
      out.catchUpMs = null;
    }
    out.steady = await round('s');
    out.steady.sendLog = await sendLogRows();
    return out;
  } finally {
    await shape.stop();
  }
}

async function measure(label, withHistory) {
  const dbName = `rrs_bench_history_${randomBytes(4).toString('hex')}`;
  await adminSql(pgUrl, `CREATE DATABASE ${dbName}`);
  const url = new URL(pgUrl);
  url.pathname = `/${dbName}`;
  await migrateSenders(url.toString());
  const child = fork(join(here, 'cascade-servers.mjs'), [], { env: { ...process.env, DATABASE_URL: url.toString(), BENCH_DISPATCHER: '0', BENCH_OVERVIEW_ROLLUP_INTERVAL_MS: String(86_400_000) }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const server = await new Promise((resolve, reject) => {
    child.once('message', resolve);
    child.once('exit', (code) => reject(new Error(`servers exited ${code}`)));
  });
  let stopped;
  const stopServers = () => (stopped ??= (async () => {
    if (child.exitCode !== null) return;
    child.send('stop');
    await new Promise((resolve) => child.once('exit', resolve));
  })());
  const db = new pg.Client({ connectionString: url.toString(), options: '-c search_path=scheduler' });
  await db.connect();
  const out = { label };
  try {
    const size = async () => Number((await db.query('SELECT pg_database_size(current_database()) AS n')).rows[0].n);
    if (withHistory) {
      const t0 = Date.now();
      await seed(db, server.organizationId, server.locationId, RECIPIENTS);
      out.seedSeconds = (Date.now() - t0) / 1000;
      out.bytesPerMillion = (await size()) / (RECIPIENTS / 1e6);
    }
    const headers = { authorization: `Bearer ${server.key}`, 'content-type': 'application/json' };
    const post = async (recipients, i) => {
      const res = await fetch(`${server.base}/api/v1/cascades`, {
        method: 'POST',
        headers: { ...headers, 'idempotency-key': randomUUID() },
        body: JSON.stringify({ locationId: server.locationId, externalId: `history-${label}-${i}`, recipients: Array.from({ length: recipients }, (_, j) => ({ name: `R ${j}`, email: `h${i}-${j}-${randomBytes(3).toString('hex')}@example.com` })) }),
      });
      if (res.status !== 202 && res.status !== 201) throw new Error(`POST /cascades ${res.status}: ${await res.text()}`);
      return (await res.json()).id;
    };
    // Intake: REQUESTS requests of 100 recipients, one at a time.
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < REQUESTS; i++) await post(100, i);
    out.intakeRecipientsPerSecond = (REQUESTS * 100) / (Number(process.hrtime.bigint() - t0) / 1e9);
    // GET /cascades/{id}: a cascade of 500 recipients.
    const big = await post(500, 'big');
    out.getCascade = await timed(READS, async () => {
      const res = await fetch(`${server.base}/api/v1/cascades/${big}`, { headers });
      if (res.status !== 200) throw new Error(`GET /cascades/{id} ${res.status}`);
      await res.arrayBuffer();
    });
    // The console's overview of the last 30 days (what GET /account/overview asks the scheduler).
    const grpc = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, server.schedulerAddress);
    const day = (ms) => new Date(ms).toISOString().slice(0, 10);
    const request = { organizationId: server.organizationId, fromDay: day(Date.now() - 29 * 86_400_000), toDay: day(Date.now()), timeZone: 'UTC' };
    // Live from the raw rows: only the reference the roll-up is compared with. It grows with the requests in
    // range, so on a long history a few reads, and one past the client's deadline ends the measurement.
    try {
      out.overview30 = await timed(5, () => grpc.client.getOverview(request));
    } catch (err) {
      if (err?.kind !== 'unavailable') throw err;
      out.overview30 = { timedOut: `over the gRPC deadline (${err.cause?.details ?? err.message})` };
    }
    // Then rolled up (what the scheduler's rounds keep up to date, overviewRollup.ts): the whole
    // history's first roll-up, timed, and the overview again.
    {
      const ctx = createServiceContext('bench-history', 'warn');
      const pool = createPool({ url: url.toString(), schema: 'scheduler', max: 2, settings: SESSION_SETTINGS });
      const started = Date.now();
      let rounds = 0;
      while ((await overviewRollupRound({ pool, logger: ctx.logger, daysPerRound: 400 })).more) rounds++;
      out.rollup = { ms: Date.now() - started, rounds: rounds + 1 };
      await pool.end();
      out.overview30Rolled = await timed(Math.max(10, READS / 4), () => grpc.client.getOverview(request));
    }
    out.overview30RequestsInRange = (await db.query(
      `SELECT count(*)::int AS n FROM review_requests WHERE organization_id = $1 AND created_at >= $2::date AND created_at < $3::date + 1`,
      [server.organizationId, request.fromDay, request.toDay],
    )).rows[0].n;
    grpc.close();
    if (withHistory) {
      const ctx = createServiceContext('bench-history', 'warn');
      const pool = createPool({ url: url.toString(), schema: 'scheduler', max: 2 });
      const started = Date.now();
      const round = await retentionRound({ pool, hasher: new AddressHasher(DEVELOPMENT_PERSON_HASH_KEY), logger: ctx.logger, batchSize: 500 });
      out.retentionRound = { ms: Date.now() - started, counts: round.counts, more: round.more };
      await pool.end();
      out.bytesPerMillionAfterRound = (await size()) / (RECIPIENTS / 1e6);
    }
    // The send path last, with the cascade servers stopped: the all-in-one is the only service process running.
    await stopServers();
    out.sends = await measureSends(url.toString(), db, server, label);
  } finally {
    await db.end();
    await stopServers();
    await adminSql(pgUrl, `DROP DATABASE IF EXISTS ${dbName}`);
  }
  return out;
}

const empty = await measure('empty', false);
const seeded = await measure('history', true);
if ([empty, seeded].some((run) => run.sends.first.sentTwice > 0 || run.sends.steady.sentTwice > 0)) process.exitCode = 1;
const ratio = (a, b) => (a / b).toFixed(2);
const liveP95 = (figure) => (figure.timedOut ? figure.timedOut : `${figure.p95.toFixed(1)} ms`);
console.log(JSON.stringify({ recipients: RECIPIENTS, empty, seeded }, null, 2));
console.log(`history of ${RECIPIENTS} finished recipients (seeded in ${seeded.seedSeconds} s, ${(seeded.bytesPerMillion / 2 ** 30).toFixed(2)} GiB per million):`);
console.log(`  intake ${Math.round(seeded.intakeRecipientsPerSecond)} vs ${Math.round(empty.intakeRecipientsPerSecond)} recipients/s: ${ratio(seeded.intakeRecipientsPerSecond, empty.intakeRecipientsPerSecond)} × empty (target ≥ 0.9)`);
console.log(`  GET /cascades/{id} p50 ${seeded.getCascade.p50.toFixed(1)} vs ${empty.getCascade.p50.toFixed(1)} ms: ${ratio(seeded.getCascade.p50, empty.getCascade.p50)} × empty (target ≤ 1.2), p99 ${seeded.getCascade.p99.toFixed(1)} ms (target < 50)`);
console.log(`  overview 30 days (${seeded.overview30RequestsInRange} requests in range) p95, live from the raw rows: ${liveP95(seeded.overview30)} vs ${liveP95(empty.overview30)}`);
console.log(`  overview 30 days p95, rolled up: ${seeded.overview30Rolled.p95.toFixed(1)} vs ${empty.overview30Rolled.p95.toFixed(1)} ms (target < 250); the first roll-up of the whole history ${seeded.rollup.ms} ms`);
const sendsLine = (which, what) => {
  const [h, e] = [seeded.sends[which], empty.sends[which]];
  return `  sends ${what}: ${Math.round(h.sendsPerSecond)} vs ${Math.round(e.sendsPerSecond)} sends/s: ${ratio(h.sendsPerSecond, e.sendsPerSecond)} × empty (target ≥ 0.9); sent twice ${h.sentTwice} / ${e.sentTwice}; send log rows (email + sms) ${h.sendLog.email} + ${h.sendLog.sms} after it`;
};
const atStart = seeded.sends.sendLogAtStart;
console.log(`  sends, the real path (all-in-one, EMAIL, the sink; ${seeded.sends.recipients} recipients a round; send log rows at start ${atStart.email} + ${atStart.sms}, ${atStart.past_keep} past ${SEND_LOG_KEEP_DAYS} days):`);
console.log(sendsLine('first', 'on the first start (the senders prune, the scheduler anonymizes past retention, meanwhile)'));
console.log(`    senders' pruning caught up ${seeded.sends.catchUpMs === null ? `NOT within ${CATCH_UP_WAIT_MS / 1000} s` : `${(seeded.sends.catchUpMs / 1000).toFixed(1)} s after that round`}`);
console.log(sendsLine('steady', 'then'));
console.log(`  retention round ${seeded.retentionRound.ms} ms: ${JSON.stringify(seeded.retentionRound.counts)}; disk per million ${(seeded.bytesPerMillionAfterRound / 2 ** 30).toFixed(2)} GiB after it`);
