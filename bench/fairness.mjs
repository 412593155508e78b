#!/usr/bin/env node
// Fair share (issue 30, docs/operations.md "Fair share"): does one organization's bulk send delay another
// organization's order-closed message? Through the real gateway (`POST /api/v1/cascades`, channel EMAIL):
//
//   organization B  one recipient every 200 ms (a shop closing orders), each its own request;
//   organization A  a bulk of N recipients (requests of 500, --concurrency at a time, as fast as answered).
//
// Phases, in one run on one database: B alone (--b-seconds); then at each of --sizes, A alone, A beside B, A alone again (B posting from A's first request until A's last message is accepted).
// --rounds K (≤ 5) repeats A beside B and A alone again K times at each size and prints the median ratio.
// Printed: B's first-message latency (202 answer → provider accepted) p50/p99/max alone and beside A at
// each size, against the bound p99 ≤ 1.25 × alone + 250 ms; A's sends/s (first request → last message
// accepted) alone and beside B, against ≥ 0.9 × alone; CPU µs per A message per process in each phase. The same-run reference is the alone figures.
//
//   --shape all-in-one   packages/all-in-one/dist (in-process bus, the sink provider; B's messages read
//                        from the dev inbox's last 1 000, asked for every 200 ms, or off the email
//                        sender's send log once the inbox no longer has them).
//   --shape distributed  every service its own process on NATS JetStream, channel-email against a local
//                        SMTP server (bench/send-providers.mjs), which reports every accepted message;
//                        channel-email runs in production mode: give it --env DKIM_SIGNED_BY_RELAY=true.
// The provider limited to 500 messages/s: --shape distributed --env PROVIDER_RATE_LIMITS=smtp=500
//   --env REDIS_URL=redis://127.0.0.1:6379 (the senders' shared window; docs/operations.md "Fair share");
//   in the all-in-one shape the sink is the provider: --env PROVIDER_RATE_LIMITS=sink=500 (one process, its
//   own window; the --env values go to the all-in-one's environment).
//
// Usage: npm run build && node bench/fairness.mjs [--shape all-in-one|distributed] [--sizes 20000,100000]
//   [--b-seconds 10] [--concurrency 4] [--max-wait 600] [--vacuum as-autovacuum|phases|off] [--rounds 1] [--warm-b 1000] [--env KEY=VALUE …]
// --warm-b N: after A's warm-up bulk of 1 000, N single-recipient requests of B (--concurrency at a time,
// not measured) warm B's path too (0: B's path measured cold).
// With the server's autovacuum off, `--vacuum as-autovacuum` (default) vacuums the bench's tables as the
// autovacuum launcher would (see below); `--vacuum phases` does that pass before each phase and none during one. B's latency is also split into its stages (due, claimed, the
// sender's send-log row, accepted), with the stages of its slowest 1 % and, for each of those, how many
// of the other organizations' steps were claimed while it waited to be (and in how many claims: none
// means no claim ran, some mean it was passed over or not yet visible) and how many were in flight when
// it came due (dispatched, not yet accepted).
// Loopback PostgreSQL, NATS and Redis only; bounded: sizes ≤ 200 000, B alone ≤ 60 s, ≤ 900 s waiting.
import { fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cpuSnapshot, nowMs, percentiles, pgCount, processMatchers, readCounter, waitUntil } from './lib/send-measure.mjs';
import { statementStats } from './lib/statements.mjs';
import { cleanupOnce, seedOrganization, startAllInOneShape, startDistributedShape } from './lib/send-shapes.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const { createTestDatabase, deleteJetStreamPrefix, uniqueName, TEST_NATS_URL, TEST_REDIS_URL } = require('../packages/testkit/dist/index.js');

const { values } = parseArgs({
  options: {
    shape: { type: 'string', default: 'all-in-one' }, sizes: { type: 'string', default: '20000,100000' }, 'b-seconds': { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '4' }, 'max-wait': { type: 'string', default: '600' }, env: { type: 'string', multiple: true, default: [] },
    vacuum: { type: 'string', default: 'as-autovacuum' }, rounds: { type: 'string', default: '1' }, 'warm-b': { type: 'string', default: '1000' },
  },
});
const bounded = (value, min, max) => Math.min(max, Math.max(min, Math.round(Number(value)) || min));
if (!['all-in-one', 'distributed'].includes(values.shape)) throw new Error('--shape must be all-in-one or distributed');
const SHAPE = values.shape;
const SIZES = values.sizes.split(',').map((s) => Math.round(bounded(s, 500, 200_000) / 500) * 500);
const B_SECONDS = bounded(values['b-seconds'], 2, 60);
const CONCURRENCY = bounded(values.concurrency, 1, 32);
const MAX_WAIT_MS = bounded(values['max-wait'], 10, 900) * 1000;
const ROUNDS = bounded(values.rounds, 1, 5);
const WARM_B = bounded(values['warm-b'], 0, 5000);
const B_EVERY_MS = 200;
const PER_REQUEST = 500;
const extraEnv = Object.fromEntries(values.env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
const pgUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
for (const u of [pgUrl, TEST_NATS_URL, TEST_REDIS_URL]) if (!['127.0.0.1', 'localhost', '::1', '[::1]'].includes(new URL(u).hostname)) throw new Error(`loopback only: ${u}`);

const runId = randomBytes(4).toString('hex');
const say = (line) => process.stderr.write(`[fairness bench] ${line}\n`);
const adminToken = `adm_${randomBytes(16).toString('hex')}`;
const busPrefix = uniqueName('bench');
const redisPrefix = `rrs:${busPrefix}:`;
const db = await createTestDatabase('rrs_bench_');
/** The schemas holding the scheduler's steps and the email sender's send log (read for B's stages). */
let schemas;
const stepsDb = new (require('pg').Pool)({ connectionString: db.url, max: 1 });
let shape;
let providers;
/** Stops every process this run started and removes its database, bus streams and Redis keys; once. */
const cleanup = cleanupOnce({ db, distributed: SHAPE === 'distributed', busPrefix, redisPrefix, redisUrl: TEST_REDIS_URL, deleteJetStreamPrefix, running: () => ({ shape, providers }), say });
process.once('SIGINT', () => cleanup().finally(() => process.exit(130)));

try {
  if (SHAPE === 'distributed') {
    providers = fork(join(here, 'send-providers.mjs'), [], { env: { ...process.env, BENCH_CHANNEL: 'EMAIL' }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const ready = await new Promise((resolve, reject) => {
      providers.once('message', resolve);
      providers.once('exit', (code) => reject(new Error(`providers exited with ${code}`)));
    });
    shape = await startDistributedShape({ databaseUrl: db.url, natsUrl: TEST_NATS_URL, busPrefix, redisUrl: TEST_REDIS_URL, redisPrefix, adminToken, channel: 'EMAIL', providerEnv: ready.env, extraEnv });
  } else {
    shape = await startAllInOneShape({ databaseUrl: db.url, adminToken, extraEnv });
  }
  say(`${SHAPE} up`);
  // CPU per process group through each phase: the shape's processes, this database's PostgreSQL backends
  // (the bench's vacuums included; those that ended in a phase too), the NATS server, the providers' process and this bench.
  const cpuGroups = {
    ...Object.fromEntries(shape.processes.map((proc) => [proc.name, proc.pid])),
    postgres: processMatchers.postgresBackendsWithEndedOf(new URL(db.url).pathname.slice(1)),
    ...(SHAPE === 'distributed' ? { nats: processMatchers.natsServer(Number(new URL(TEST_NATS_URL).port || 4222)) } : {}),
    ...(providers ? { providers: providers.pid } : {}),
    bench: process.pid,
  };
  {
    const { rows } = await stepsDb.query(`SELECT table_schema AS schema, table_name AS name FROM information_schema.tables WHERE table_name IN ('recipient_steps', 'send_log')`);
    const of = (name, prefer) => (rows.find((r) => r.name === name && r.schema.includes(prefer)) ?? rows.find((r) => r.name === name)).schema;
    schemas = { steps: of('recipient_steps', 'sched'), sendLog: of('send_log', 'email') };
  }
  const orgA = await seedOrganization(shape.gatewayUrl, adminToken, { smsBalance: 0 });
  const orgB = await seedOrganization(shape.gatewayUrl, adminToken, { smsBalance: 0 });

  const ask = (message) => new Promise((resolve) => {
    providers.once('message', resolve);
    providers.send(message);
  });
  /** Messages the provider accepted so far, both organizations. */
  const providerCount = async () => (providers ? (await ask('count')).count : readCounter(shape.sendsMetricsUrl, 'sender_sends_total', { channel: 'EMAIL', result: 'sent' }));
  /** B's messages as the provider accepted them: address → first accepted (epoch ms). */
  const bAccepted = new Map();
  /** B's addresses posted and not yet seen accepted. */
  const bPending = new Set();
  const noteB = (to, at) => {
    if (to.startsWith('b') && !bAccepted.has(to)) bAccepted.set(to, at);
    bPending.delete(to);
  };
  // The sink is asked for B's pending addresses only (`?to=`), every 200 ms: its whole list (the last
  // 1 000 messages, bodies and all) every 50 ms cost the all-in-one ~35 ms and the bench ~40 ms of CPU per
  // B message, on the event loop the send path runs on. The latency is the sink's own time of each
  // message (`sentAt`), so how often it is asked moves no figure.
  // The sink keeps its last 1 000 messages: beside a bulk at 3 500 a second a B message may leave it
  // before it is asked for (the poll itself waits on the busy all-in-one). A B message whose step the
  // email sender has finished as sent and that the sink no longer has is read off the send log instead:
  // the sender's 'done' write, right after the sink's acceptance (counted, and printed).
  let fromSendLog = 0;
  const askSink = (addresses) => Promise.all(addresses.map(async (to) => {
    const { messages } = await (await fetch(`${shape.devMessagesUrl}?to=${encodeURIComponent(to)}`)).json();
    for (const m of messages) if (m.channel === 'EMAIL') noteB(m.to, Date.parse(m.sentAt));
  }));
  const pollSink = async () => {
    const asked = [...bPending];
    await askSink(asked);
    const missing = asked.filter((to) => bPending.has(to) && bCascade.has(to));
    if (missing.length === 0) return;
    // By key all the way (a cascade's recipients, a recipient's steps, the send log's step id): this
    // query runs in the measured phases.
    const { rows } = await stepsDb.query(
      `SELECT r.email AS "to", extract(epoch FROM l.updated_at) * 1000 AS at
         FROM unnest($1::uuid[]) AS c(id) JOIN ${schemas.steps}.recipients r ON r.cascade_id = c.id
         JOIN ${schemas.steps}.recipient_steps s ON s.recipient_id = r.id
         JOIN LATERAL (SELECT updated_at, state, outcome FROM ${schemas.sendLog}.send_log WHERE step_id = s.id::text) l ON true
        WHERE l.state = 'done' AND l.outcome = 'STEP_OUTCOME_SENT'`,
      [missing.map((to) => bCascade.get(to))],
    );
    if (rows.length === 0) return;
    // Asked once more after the send log answered: a message the sink still has is read from the sink.
    await askSink(rows.map(({ to }) => to));
    for (const { to, at } of rows) {
      if (!bPending.has(to)) continue;
      fromSendLog++;
      noteB(to, Number(at));
    }
  };
  const readB = async () => {
    if (providers) for (const [to, at] of (await ask('report')).accepted) noteB(to, at);
    else await pollSink();
  };
  let sinkPoller;
  let polling = false;
  if (!providers) {
    sinkPoller = setInterval(() => {
      if (polling) return;
      polling = true;
      pollSink().catch(() => undefined).finally(() => (polling = false));
    }, 200);
  }

  let serial = 0;
  /** One request; a 503 or 429 (a busy backing service on a loaded machine) is asked again with the same Idempotency-Key, up to 5 times. */
  async function post(org, recipients) {
    const key = `fair-${runId}-${serial++}`;
    for (let attempt = 1; ; attempt++) {
      const res = await fetch(`${shape.gatewayUrl}/api/v1/cascades`, {
        method: 'POST',
        headers: { authorization: `Bearer ${org.apiKey}`, 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({ locationId: org.locationId, channel: 'EMAIL', externalId: `fair-${runId}`, recipients }),
      });
      const json = await res.json();
      if ((res.status === 503 || res.status === 429) && attempt < 5) {
        say(`answered ${res.status}; asking again (${attempt})`);
        await new Promise((r) => setTimeout(r, 200 * attempt));
        continue;
      }
      if (res.status !== 202 || json.queued !== recipients.length) throw new Error(`POST /api/v1/cascades answered ${res.status}: ${JSON.stringify(json).slice(0, 300)}`);
      return { at: nowMs(), cascadeId: json.id };
    }
  }

  /** B: one recipient every 200 ms until `until()` is true; resolves with [address, 202 answered at] of each. */
  let bSerial = 0;
  /** B's address → its cascade (one recipient each): the send log is looked up through it, by index. */
  const bCascade = new Map();
  let bAnswered = 0;
  async function runB(until) {
    const answered = [];
    const pending = [];
    const t0 = nowMs();
    for (let i = 0; !until(); i++) {
      const wait = t0 + i * B_EVERY_MS - nowMs();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const to = `b${bSerial++}.${runId}@example.com`;
      bPending.add(to);
      pending.push(post(orgB, [{ name: 'Order', email: to }]).then(({ at, cascadeId }) => {
        bCascade.set(to, cascadeId);
        answered.push([to, at]);
        bAnswered++;
      }));
    }
    await Promise.all(pending);
    return answered;
  }
  async function bLatency(answered) {
    await waitUntil(async () => {
      await readB();
      return answered.every(([to]) => bAccepted.has(to));
    }, MAX_WAIT_MS, `B's ${answered.length} messages accepted`, 100);
    const latency = percentiles(answered.map(([to, at]) => bAccepted.get(to) - at));
    return { ...latency, stages: await bStages(answered) };
  }
  /**
   * Where B's latency goes, per message: 202 answered → due (the step's due time, written at intake) →
   * claimed (the claim's clock, dispatched_at) → the sender's send-log row (its transaction's start) →
   * the provider accepted. The p50 and p99 of each stage, and the stages of the slowest 1 %.
   */
  async function bStages(answered) {
    const { rows } = await stepsDb.query(
      `SELECT DISTINCT ON (r.email) r.email AS "to", extract(epoch FROM s.due_at) * 1000 AS due, extract(epoch FROM s.dispatched_at) * 1000 AS claimed, extract(epoch FROM l.created_at) * 1000 AS received
         FROM ${schemas.steps}.recipients r JOIN ${schemas.steps}.recipient_steps s ON s.recipient_id = r.id
         LEFT JOIN ${schemas.sendLog}.send_log l ON l.step_id = s.id::text
        WHERE r.organization_id = $1 AND r.email = ANY($2::text[]) AND s.dispatched_at IS NOT NULL
        ORDER BY r.email, s.dispatched_at`,
      [orgB.organizationId, answered.map(([to]) => to)],
    );
    const byTo = new Map(rows.map((r) => [r.to, r]));
    const per = answered.map(([to, at]) => {
      const r = byTo.get(to);
      const accepted = bAccepted.get(to);
      return r ? { total: accepted - at, intake: Number(r.due) - at, claim: Number(r.claimed) - Number(r.due), toSender: Number(r.received) - Number(r.claimed), send: accepted - Number(r.received), due: Number(r.due) } : null;
    }).filter(Boolean);
    const stage = (k) => percentiles(per.map((p) => p[k]));
    const tail = per.sort((a, b) => b.total - a.total).slice(0, Math.max(1, Math.ceil(per.length / 100)));
    // Whether a slow one waited for room or was passed over: the other organizations' steps claimed after
    // it was due and before it was (in how many claims), and those dispatched before it was due and still
    // without a result then (sent_at: the result's provider acceptance).
    for (const t of tail) {
      const { rows: [w] } = await stepsDb.query(
        `SELECT count(*) FILTER (WHERE dispatched_at > to_timestamp($2 / 1000.0) AND dispatched_at < to_timestamp($3 / 1000.0))::int AS passed,
                count(DISTINCT dispatched_at) FILTER (WHERE dispatched_at > to_timestamp($2 / 1000.0) AND dispatched_at < to_timestamp($3 / 1000.0))::int AS claims,
                count(*) FILTER (WHERE dispatched_at <= to_timestamp($2 / 1000.0) AND (sent_at IS NULL OR sent_at > to_timestamp($2 / 1000.0)))::int AS in_flight
           FROM ${schemas.steps}.recipient_steps WHERE organization_id <> $1 AND dispatched_at > to_timestamp($2 / 1000.0) - interval '30 seconds'`,
        [orgB.organizationId, t.due, t.due + t.claim],
      );
      Object.assign(t, { passed: w.passed, claims: w.claims, inFlight: w.in_flight });
    }
    return { intake: stage('intake'), claim: stage('claim'), toSender: stage('toSender'), send: stage('send'), tail };
  }
  /** When the provider accepted A's latest message (epoch ms): the SMTP server's report, or the sink's last 1 000. */
  async function lastOfA() {
    const seen = providers ? (await ask('report')).accepted : (await (await fetch(shape.devMessagesUrl)).json()).messages.map((m) => [m.to, Date.parse(m.sentAt)]);
    let last = -Infinity;
    for (const [to, at] of seen) if (to.startsWith('a')) last = Math.max(last, at);
    return last;
  }
  /**
   * A: `n` recipients, PER_REQUEST a request, CONCURRENCY at a time; sends/s from the first request to
   * the provider accepting A's last message (every message counted: A's and B's answered meanwhile).
   */
  let aSerial = 0;
  async function runA(n) {
    const before = await providerCount();
    const bBefore = bAnswered;
    const t0 = nowMs();
    let next = 0;
    const requests = n / PER_REQUEST;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < requests) {
        next++;
        await post(orgA, Array.from({ length: PER_REQUEST }, () => ({ name: 'Customer', email: `a${aSerial++}.${runId}@example.com` })));
      }
    }));
    await waitUntil(async () => (await providerCount()) - before >= n + bAnswered - bBefore, MAX_WAIT_MS, `A's ${n} messages accepted`, 50);
    return n / (((await lastOfA()) - t0) / 1000);
  }

  // A server with autovacuum off (this machine's CI PostgreSQL) measures the dead entries of every step
  // sent piling up in the partial due indexes, which no deployment has: with `--vacuum as-autovacuum`
  // (the default) the bench does what the autovacuum launcher would, on the bench's database only —
  // every autovacuum_naptime, each table past its own thresholds (migration 0031's by-count settings, or
  // the server's defaults) is vacuumed or analyzed, beside the measured processes as autovacuum would be.
  // `--vacuum off` leaves the server as it is.
  // A table's autovacuum limit of one kind (vacuum, vacuum_insert, analyze): its own setting, else the server's.
  const limit = (kind) =>
    `coalesce((o->>'autovacuum_${kind}_threshold')::float8, (d->>'autovacuum_${kind}_threshold')::float8) + coalesce((o->>'autovacuum_${kind}_scale_factor')::float8, (d->>'autovacuum_${kind}_scale_factor')::float8) * tuples`;
  const AUTOVACUUM_DUE = `
    WITH k AS (
      SELECT format('%I.%I', t.schemaname, t.relname) AS name, greatest(c.reltuples, 0) AS tuples, t.n_dead_tup, t.n_ins_since_vacuum, t.n_mod_since_analyze,
             coalesce((SELECT jsonb_object_agg(split_part(x, '=', 1), split_part(x, '=', 2)::float8) FROM unnest(c.reloptions) x WHERE x ~ '^autovacuum_\\w+_(threshold|scale_factor)='), '{}') AS o,
             (SELECT jsonb_object_agg(name, setting::float8) FROM pg_settings WHERE name ~ '^autovacuum_\\w+_(threshold|scale_factor)$') AS d
        FROM pg_stat_user_tables t JOIN pg_class c ON c.oid = t.relid)
    SELECT name, n_dead_tup > ${limit('vacuum')} OR n_ins_since_vacuum > ${limit('vacuum_insert')} AS vacuum, n_mod_since_analyze > ${limit('analyze')} AS analyze FROM k`;
  let vacuums = 0;
  let vacuumer;
  /** Vacuums or analyzes each of the bench's tables past its autovacuum thresholds, as the launcher's pass would. */
  const vacuumDue = async () => {
    const { rows } = await stepsDb.query(AUTOVACUUM_DUE);
    for (const t of rows) {
      if (!t.vacuum && !t.analyze) continue;
      await stepsDb.query(`${t.vacuum ? 'VACUUM' : ''}${t.vacuum && t.analyze ? ' (ANALYZE)' : t.analyze ? 'ANALYZE' : ''} ${t.name}`);
      vacuums++;
    }
  };
  const autovacuumOff = (await stepsDb.query('SHOW autovacuum')).rows[0].autovacuum === 'off';
  if (values.vacuum === 'as-autovacuum' && autovacuumOff) {
    const naptimeS = Number((await stepsDb.query(`SELECT setting FROM pg_settings WHERE name = 'autovacuum_naptime'`)).rows[0].setting);
    let busy = false;
    vacuumer = setInterval(async () => {
      if (busy) return;
      busy = true;
      try {
        await vacuumDue();
      } catch (err) {
        say(`vacuum as autovacuum: ${err.message}`);
      } finally {
        busy = false;
      }
    }, naptimeS * 1000);
    say(`the server's autovacuum is off: vacuuming the bench's tables as autovacuum would, every ${naptimeS} s`);
  }
  // `--vacuum phases`: the same pass before each phase, none during one, so every phase starts from the
  // same state and none has a vacuum the phase it is compared with has not (a 20 000 phase lasts 5–40 s
  // here, the launcher's naptime 60 s: a vacuum lands in some phases and not others).
  const phaseVacuum = values.vacuum === 'phases' && autovacuumOff;
  // BENCH_STATEMENTS=<dir> (pg_stat_statements loaded): each A phase's statements in <dir>/<size>-<phase>.txt.
  const statements = await statementStats(stepsDb);
  const beforePhase = async () => {
    if (phaseVacuum) await vacuumDue();
    await statements.reset();
  };

  // Warm-up: JIT, pools, prepared statements — of both kinds of request. B's path (a request of one
  // recipient, its one-step round, its result) is code A's bulk runs a few times a second at most: measured
  // cold, B alone cost 56–71 ms of CPU a message in the distributed shape, 45–49 once V8 had optimized it
  // (--warm-b 2000), as in a deployment that has served such requests all day. --warm-b 0: cold.
  await runA(1000);
  if (WARM_B > 0) {
    const before = await providerCount();
    let next = 0;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (next < WARM_B) {
        next++;
        await post(orgB, [{ name: 'Order', email: `w${next}.${runId}@example.com` }]);
      }
    }));
    await waitUntil(async () => (await providerCount()) - before >= WARM_B, MAX_WAIT_MS, `B's ${WARM_B} warm-up messages accepted`, 50);
    say(`warmed B's path: ${WARM_B} single-recipient requests`);
  }
  say(`B alone, ${B_SECONDS} s`);
  // The processes' CPU with nothing sent for 5 s (timers, polls, the bench's vacuums): B's figure below is net of it.
  // The PostgreSQL requests and round trips of each measured process (the preloaded counter), the same way.
  const pgCounts = async () => Object.fromEntries(await Promise.all(shape.processes.map(async (proc) => [proc.name, await pgCount(proc.child)])));
  const idle0 = cpuSnapshot(cpuGroups);
  const pgIdle0 = await pgCounts();
  const idleFrom = nowMs();
  await new Promise((r) => setTimeout(r, 5000));
  const idleSeconds = (nowMs() - idleFrom) / 1000;
  const idle1 = cpuSnapshot(cpuGroups);
  const pgIdle1 = await pgCounts();
  const cpuB0 = cpuSnapshot(cpuGroups);
  const pgB0 = await pgCounts();
  const bFrom = nowMs();
  const bEnd = bFrom + B_SECONDS * 1000;
  const bAloneAnswered = await runB(() => nowMs() >= bEnd);
  // Until the last message is accepted and its result round is done (a second after; idle is netted over the whole time).
  await waitUntil(async () => {
    await readB();
    return bAloneAnswered.every(([to]) => bAccepted.has(to));
  }, MAX_WAIT_MS, `B's ${bAloneAnswered.length} messages accepted`, 100);
  await new Promise((r) => setTimeout(r, 1000));
  const cpuB1 = cpuSnapshot(cpuGroups);
  const pgB1 = await pgCounts();
  const bSeconds = (nowMs() - bFrom) / 1000;
  const alone = await bLatency(bAloneAnswered);
  // A alone is measured at each size just before and just after A beside B at that size, the reference
  // being the mean of the two: A's own throughput changes with its backlog (a 100 000 bulk is not a
  // 20 000 one) and with the tables it has already filled (each run adds its steps, and autovacuum comes
  // by), and the machine's load drifts during a run.
  // With --rounds K the pair (A beside B, A alone again) is repeated K times at each size: A alone,
  // beside, alone, beside, alone…, each beside against the mean of the two alone runs around it, and the
  // median of the K ratios printed beside them (one phase of a loaded machine moves a single ratio).
  const beside = [];
  const spent = (from, to) => Object.fromEntries(Object.keys(cpuGroups).map((k) => [k, to[k] - from[k]]));
  for (const n of SIZES) {
    say(`A alone, ${n}`);
    await beforePhase();
    let cpu0 = cpuSnapshot(cpuGroups);
    let aBefore = await runA(n);
    let cpu1 = cpuSnapshot(cpuGroups);
    await statements.dump(`${n}-alone-0`);
    for (let round = 1; round <= ROUNDS; round++) {
      say(`A (${n}) beside B${ROUNDS > 1 ? `, round ${round} of ${ROUNDS}` : ''}`);
      await beforePhase();
      const cpuBeside = cpuSnapshot(cpuGroups);
      let aDone = false;
      const bRun = runB(() => aDone);
      const aRate = await runA(n);
      aDone = true;
      const cpu2 = cpuSnapshot(cpuGroups);
      await statements.dump(`${n}-beside-${round}`);
      const b = await bLatency(await bRun);
      say(`A alone again, ${n}`);
      await beforePhase();
      const cpu3 = cpuSnapshot(cpuGroups);
      const aAfter = await runA(n);
      const cpu4 = cpuSnapshot(cpuGroups);
      await statements.dump(`${n}-alone-${round}`);
      beside.push({ n, round, aAlone: (aBefore + aAfter) / 2, aBefore, aAfter, aRate, b, cpu: { before: spent(cpu0, cpu1), beside: spent(cpuBeside, cpu2), after: spent(cpu3, cpu4) } });
      [aBefore, cpu0, cpu1] = [aAfter, cpu3, cpu4];
    }
  }
  if (sinkPoller) clearInterval(sinkPoller);
  if (vacuumer) clearInterval(vacuumer);

  const [l1] = loadavg();
  const bound = 1.25 * alone.p99 + 250;
  const ms = (p) => `p50 ${p.p50.toFixed(0)} ms, p99 ${p.p99.toFixed(0)} ms, max ${p.max.toFixed(0)} ms (n=${p.n})`;
  const stages = ({ stages: s }) => `      stages p50/p99 ms: answered→due ${s.intake.p50.toFixed(0)}/${s.intake.p99.toFixed(0)}, due→claimed ${s.claim.p50.toFixed(0)}/${s.claim.p99.toFixed(0)}, claimed→sender ${s.toSender.p50.toFixed(0)}/${s.toSender.p99.toFixed(0)}, sender→accepted ${s.send.p50.toFixed(0)}/${s.send.p99.toFixed(0)}\n      slowest 1 %: ${s.tail.map((t) => `[${[t.total, t.intake, t.claim, t.toSender, t.send].map((v) => v.toFixed(0)).join('/')}]`).join(' ')} (total/intake/claim/to sender/send); while each waited to be claimed, others' steps claimed before it: ${s.tail.map((t) => `${t.passed} in ${t.claims} claims (${t.inFlight} in flight when it came due)`).join(', ')}${process.env.BENCH_FAIR_TAIL ? ` due at ${s.tail.map((t) => t.due.toFixed(0)).join(' ')}` : ''}`;
  const lines = [];
  lines.push(`fairness: ${SHAPE}, EMAIL via ${providers ? 'a local SMTP server' : 'the sink provider'}; B one recipient every ${B_EVERY_MS} ms, A requests of ${PER_REQUEST}, ${CONCURRENCY} at a time; warm-up: A 1 000, B ${WARM_B} single-recipient requests${Object.keys(extraEnv).length ? `; env ${JSON.stringify(extraEnv)}` : ''}`);
  if (vacuumer) lines.push(`the server's autovacuum is off: the bench vacuumed its tables as autovacuum would (--vacuum as-autovacuum): ${vacuums} vacuums or analyzes`);
  if (phaseVacuum) lines.push(`the server's autovacuum is off: the bench vacuumed its tables past autovacuum's thresholds before each phase, none during one (--vacuum phases): ${vacuums} vacuums or analyzes`);
  if (fromSendLog) lines.push(`${fromSendLog} of B's messages had left the sink's last 1 000 before the bench asked: their acceptance read off the email sender's send log`);
  lines.push(`machine: ${cpus().length} cores, load average ${l1.toFixed(2)} at the end (shared machine unless stated otherwise), node ${process.version}`);
  lines.push(`  B alone (${B_SECONDS} s)            : ${ms(alone)}`);
  lines.push(stages(alone));
  {
    // What one of B's messages costs the processes on its own: beside A, each adds about this to A's phase.
    const phase = Object.fromEntries(Object.keys(cpuGroups).map((k) => [k, cpuB1[k] - cpuB0[k] - ((idle1[k] - idle0[k]) * bSeconds) / idleSeconds]));
    const n = bAloneAnswered.length;
    const idleTotal = Object.keys(cpuGroups).reduce((a, k) => a + idle1[k] - idle0[k], 0) / idleSeconds;
    lines.push(`      CPU µs per B message alone, net of idle: ${Math.round((Object.values(phase).reduce((a, v) => a + v, 0) * 1e6) / n)} (${Object.entries(phase).map(([k, seconds]) => `${k} ${Math.round((seconds * 1e6) / n)}`).join(', ')}); idle: ${Math.round(idleTotal * 1000)} ms of CPU a second`);
    // And the PostgreSQL requests / round trips of each process a message, net of idle the same way.
    const perB = (kind) => Object.keys(pgB1).filter((k) => pgB1[k] && pgB0[k] && pgIdle0[k] && pgIdle1[k]).map((k) => [k, (pgB1[k][kind] - pgB0[k][kind] - ((pgIdle1[k][kind] - pgIdle0[k][kind]) * bSeconds) / idleSeconds) / n]);
    const fmt = (kind) => { const each = perB(kind); return `${each.reduce((a, [, v]) => a + v, 0).toFixed(1)} (${each.map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')})`; };
    lines.push(`      PostgreSQL requests per B message alone, net of idle: ${fmt('requests')}; round trips ${fmt('roundTrips')}`);
  }
  for (const { n, round, aAlone, aBefore, aAfter, aRate, b, cpu } of beside) {
    if (ROUNDS > 1) lines.push(`  round ${round} of ${ROUNDS} at ${n}:`);
    lines.push(`  B beside A (${n}) : ${ms(b)} → p99 ×${(b.p99 / alone.p99).toFixed(2)} of alone; bound ${bound.toFixed(0)} ms ${b.p99 <= bound ? 'MET' : 'NOT MET'}`);
    lines.push(stages(b));
    lines.push(`  A alone (${n})            : ${Math.round(aAlone)} sends/s (before ${Math.round(aBefore)}, after ${Math.round(aAfter)})`);
    lines.push(`  A beside B (${n}) : ${Math.round(aRate)} sends/s → ×${(aRate / aAlone).toFixed(2)} of A alone (≥ 0.9: ${aRate >= 0.9 * aAlone ? 'MET' : 'NOT MET'})`);
    // Where B's cost lands: CPU a message of A (µs), per process, in each phase (B's own messages included beside B).
    const perMessage = (phase) => Object.entries(phase).map(([k, seconds]) => `${k} ${Math.round((seconds * 1e6) / n)}`).join(', ');
    const total = (phase) => Math.round((Object.values(phase).reduce((a, v) => a + v, 0) * 1e6) / n);
    lines.push(`      CPU µs per A message, alone before: ${total(cpu.before)} (${perMessage(cpu.before)})`);
    lines.push(`      CPU µs per A message, beside B    : ${total(cpu.beside)} (${perMessage(cpu.beside)})`);
    lines.push(`      CPU µs per A message, alone after : ${total(cpu.after)} (${perMessage(cpu.after)})`);
  }
  if (ROUNDS > 1) {
    for (const n of SIZES) {
      const rounds = beside.filter((r) => r.n === n);
      const ratios = rounds.map((r) => r.aRate / r.aAlone).sort((x, y) => x - y);
      const middle = Math.floor(ratios.length / 2);
      const median = ratios.length % 2 ? ratios[middle] : (ratios[middle - 1] + ratios[middle]) / 2;
      const p99s = rounds.map((r) => r.b.p99);
      lines.push(`  over ${ROUNDS} rounds at ${n}: A beside B ×${rounds.map((r) => (r.aRate / r.aAlone).toFixed(2)).join(' / ')} of A alone, median ×${median.toFixed(2)} (≥ 0.9: ${median >= 0.9 ? 'MET' : 'NOT MET'}); B's p99 ${p99s.map((v) => v.toFixed(0)).join(' / ')} ms (bound ${bound.toFixed(0)}: ${p99s.every((v) => v <= bound) ? 'MET in every round' : 'NOT MET in every round'})`);
    }
  }
  console.log(lines.join('\n'));
} finally {
  await stepsDb.end();
  await cleanup();
}
