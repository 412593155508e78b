#!/usr/bin/env node
// Lateness (due → dispatched) with 1 000 000 steps scheduled in the future and 1 000 steps/s coming
// due, through the real dispatcher and a no-op sender.
// Phase "timers": steps due exactly 1 ms apart (1 000/s) from a moment a few seconds after they are
// seeded, before the dispatcher starts: it finds the first due time itself and sleeps until it (its
// own timer, msUntilNextDueStep), no notification involved.
// Phase "intake": StartCascade adds 100 recipients every 100 ms (1 000/s), woken by NOTIFY on commit.
// Each step's lateness is measured twice: "claimed" is the round's clock (`dispatched_at`, what
// scheduler_step_lateness_seconds observes), "at the sender" is when the no-op sender received its
// message (the round's claim, publication and delivery included). The target is on "at the sender".
// Usage: npm run build && node bench/lateness.mjs [--future 1000000] [--seconds 10] [--bus jetstream|memory]
// Loopback PostgreSQL and NATS only (one clock for the due times and the receipts). Target: p99 < 100 ms.
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { cpus, loadavg } from 'node:os';
import { adminSql } from './lib/pg-admin.mjs';

const require = createRequire(import.meta.url);
const { createServiceContext, createMemoryBus, connectJetStreamBus, createPool, Notifier } = require('@rrs/runtime');
const { busV1, stepSubjects } = require('@rrs/proto');
const { StepResultPublisher } = require('@rrs/sender-kit');
const { startScheduler, startDispatcher, ConfiguredChannels, SCHEMA, SESSION_SETTINGS, AddressHasher, DEVELOPMENT_PERSON_HASH_KEY } = require('@rrs/cascade-scheduler');
// The bench's starts must not be refused by the recipient budget the scheduler takes with every start.
const LIFTED = { perMinute: 1e9, perDay: 1e12 };
const BENCH_RECIPIENT_QUOTAS = { trial: LIFTED, standard: LIFTED, pro: LIFTED };

const { values } = parseArgs({ options: { future: { type: 'string', default: '1000000' }, seconds: { type: 'string', default: '10' }, bus: { type: 'string', default: 'jetstream' } } });
const FUTURE = Math.min(2_000_000, Math.max(0, Number(values.future)));
const SECONDS = Math.min(60, Math.max(2, Number(values.seconds)));
const RATE = 1000;
const TARGET_P99_MS = 100;
/** From seeding the timers phase to its first due time: the dispatcher starts and settles in between. */
const LEAD_MS = 4000;
const pgUrl = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';
for (const u of [pgUrl, natsUrl]) if (!['127.0.0.1', 'localhost', '::1'].includes(new URL(u).hostname)) throw new Error(`loopback only: ${u}`);
const suffix = randomBytes(4).toString('hex');
const dbName = `rrs_bench_${suffix}`;
const prefix = `bench${suffix}`;
const ORG = '0190e0e0-0000-7000-8000-00000000b002';

const admin = (sql) => adminSql(pgUrl, sql);
const profiles = {
  async getSendingProfile(id) {
    return { organization: { id, name: 'Bench', plan: 'pro', emailConfirmed: true, locale: 'en', timeZone: 'UTC', defaultRegion: 'RU' }, templates: [], channels: [{ channel: 'EMAIL', configured: true }] };
  },
  async getLocation(_o, id) {
    return { id, name: 'Bench cafe', address: '', city: '', reviewLinks: [] };
  },
};

/** Time-ordered ids, as the service's UUIDv7s (random v4 keys would scatter every insert over the indexes). */
const V7 = `(lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || substr(md5(random()::text || i::text), 1, 20))::uuid`;

/**
 * Inserts `n` one-step recipients of a new cascade whose step k is due at `firstDueMs + k * stepMs` (epoch
 * ms). The due times are computed before the insert, not from its clock: a clock read per row would
 * stretch the spacing by the insert's own pace, and one read after it would announce a first due time
 * later than the first step's. No notification: nothing listens yet (the dispatcher starts after).
 */
async function seed(pool, n, firstDueMs, stepMs) {
  await pool.query(
    `WITH c AS (INSERT INTO cascades (id, organization_id, location_id, status, recipients_total, active_recipients) VALUES (gen_random_uuid(), $1, 'loc', 'running', $2, $2) RETURNING id),
          g AS (SELECT i, ${V7} AS rid, ${V7} AS rrid FROM generate_series(0, $2 - 1) AS i),
          rr AS (INSERT INTO review_requests (id, organization_id, token, location_id, recipient_id) SELECT rrid, $1, md5(rrid::text), 'loc', rid FROM g),
          r AS (INSERT INTO recipients (id, cascade_id, organization_id, position, email, status, review_request_id) SELECT rid, (SELECT id FROM c), $1, i, 'x' || i || '@example.com', 'running', rrid FROM g)
     INSERT INTO recipient_steps (id, recipient_id, cascade_id, organization_id, step_order, channel, delay_minutes, status, sent_channel, due_at, bulk)
     SELECT ${V7}, rid, (SELECT id FROM c), $1, 1, 'EMAIL', 0, 'scheduled', 'EMAIL', to_timestamp(($4::float8 + i * $3::float8) / 1000), $2::int > 10 FROM g`,
    [ORG, n, stepMs, firstDueMs],
  );
}

function percentiles(ms) {
  if (!ms.length) return { n: 0, p50: NaN, p90: NaN, p99: NaN, max: NaN };
  ms.sort((a, b) => a - b);
  const p = (q) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))];
  return { n: ms.length, p50: p(0.5), p90: p(0.9), p99: p(0.99), max: ms[ms.length - 1] };
}

await admin(`CREATE DATABASE ${dbName}`);
const url = new URL(pgUrl);
url.pathname = `/${dbName}`;
const dbUrl = url.toString();
const ctx = createServiceContext('bench', 'warn');
const bus = values.bus === 'memory' ? createMemoryBus({ prefix }) : await connectJetStreamBus({ url: natsUrl, prefix, name: 'bench-lateness' });
try {
  await bus.ensureStreams();
  const scheduler = await startScheduler({ databaseUrl: dbUrl, natsUrl, busPrefix: prefix, grpcHost: '127.0.0.1', grpcPort: 0, minuteMs: 60_000, recipientQuotas: BENCH_RECIPIENT_QUOTAS }, ctx, { bus, profiles, noDispatcher: true });
  const pool = createPool({ url: dbUrl, schema: SCHEMA, max: 8 });
  const t = Date.now();
  const inThirtyDays = Date.now() + 30 * 86_400_000;
  for (let done = 0; done < FUTURE; done += 100_000) await seed(pool, Math.min(100_000, FUTURE - done), inThirtyDays + done, 1);
  // A million rows written a moment ago: vacuum/analyze and checkpoint now, so the measurement is not
  // of autovacuum and checkpoint I/O catching up with the seed.
  await pool.query('VACUUM (ANALYZE) recipient_steps, recipients, review_requests, cascades');
  await pool.query('CHECKPOINT');
  const seeded = ((Date.now() - t) / 1000).toFixed(1);

  // What the no-op sender received: per step, when, and how late after its due time (the message's).
  const received = new Map();
  let duplicates = 0;
  const results = new StepResultPublisher(bus);
  // Both of the channel's subjects, bulk and small requests', as a real sender reads them.
  const lanes = await Promise.all(stepSubjects('EMAIL').map((lane) => bus.consume({ stream: 'STEPS', durable: `bench-noop-${lane.durable}`, filterSubject: lane.subject, concurrency: 512 }, async (msg) => {
    const at = Date.now();
    const s = busV1.StepDue.decode(msg.data);
    if (received.has(s.stepId)) duplicates++;
    else received.set(s.stepId, { cascadeId: s.cascadeId, ms: at - s.dueAt.getTime() });
    await results.publish(s, { outcome: busV1.StepOutcome.STEP_OUTCOME_SENT, parts: 1 });
    msg.ack();
  })));
  const sender = { drain: () => Promise.all(lanes.map((lane) => lane.drain())) };

  // Phase "timers": RATE steps/s, the first due LEAD_MS from now, seeded before the dispatcher starts.
  const timersN = RATE * SECONDS;
  const firstDue = Date.now() + LEAD_MS;
  await seed(pool, timersN, firstDue, 1000 / RATE);
  const dpool = createPool({ url: dbUrl, schema: SCHEMA, max: 8, settings: SESSION_SETTINGS });
  const notifier = new Notifier(dbUrl, SCHEMA, ctx.logger);
  const dispatcher = await startDispatcher({ pool: dpool, bus, notifier, logger: ctx.logger, minuteMs: 60_000, publicBaseUrl: 'http://127.0.0.1', channels: new ConfiguredChannels(profiles), hasher: new AddressHasher(DEVELOPMENT_PERSON_HASH_KEY) });
  await notifier.start();
  const settledBeforeDue = firstDue - Date.now();
  await new Promise((r) => setTimeout(r, firstDue + SECONDS * 1000 + 3000 - Date.now()));
  const timers = (await pool.query(`SELECT extract(epoch FROM dispatched_at - due_at) * 1000 AS ms FROM recipient_steps WHERE dispatched_at IS NOT NULL`)).rows.map((r) => Number(r.ms));

  // Phase "intake": 100 recipients every 100 ms through StartCascade; each step is due at commit.
  const flow = await scheduler.flows.create({ organizationId: ORG, name: 'one', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] });
  const ids = [];
  const started = Date.now();
  for (let i = 0; i < SECONDS * 10; i++) {
    const at = started + i * 100;
    if (at > Date.now()) await new Promise((r) => setTimeout(r, at - Date.now()));
    const { result } = await scheduler.cascades.start({ organizationId: ORG, locationId: 'loc', name: '', flowId: flow.id, channel: '', externalId: '', recipients: Array.from({ length: 100 }, (_, k) => ({ name: '', email: `i${i}.${k}@example.com`, phone: '' })) });
    ids.push(result.id);
  }
  await new Promise((r) => setTimeout(r, 2000));
  const intake = (await pool.query(`SELECT extract(epoch FROM dispatched_at - due_at) * 1000 AS ms FROM recipient_steps WHERE cascade_id = ANY($1::uuid[]) AND dispatched_at IS NOT NULL`, [ids])).rows.map((r) => Number(r.ms));
  const future = (await pool.query(`SELECT count(*)::int AS n FROM recipient_steps WHERE status = 'scheduled'`)).rows[0].n;
  const intakeIds = new Set(ids);
  const timersAtSender = [];
  const intakeAtSender = [];
  for (const { cascadeId, ms } of received.values()) (intakeIds.has(cascadeId) ? intakeAtSender : timersAtSender).push(ms);

  await dispatcher.stop();
  await notifier.stop();
  await sender.drain();
  await dpool.end();
  await pool.end();
  const fmt = (x) => `n=${x.n} (of ${x.expected}) p50 ${x.p50.toFixed(1)} ms, p90 ${x.p90.toFixed(1)} ms, p99 ${x.p99.toFixed(1)} ms, max ${x.max.toFixed(1)} ms`;
  const phases = [
    { name: 'timers (own timer)', claimed: percentiles(timers), atSender: percentiles(timersAtSender), expected: timersN },
    { name: 'intake (NOTIFY)   ', claimed: percentiles(intake), atSender: percentiles(intakeAtSender), expected: SECONDS * 1000 },
  ];
  console.log(`lateness on ${cpus().length} cores (load ${loadavg()[0].toFixed(1)}), bus: ${bus.kind}; ${FUTURE} steps scheduled in the future (seeded in ${seeded} s; ${future} still scheduled at the end), ${RATE} steps/s coming due for ${SECONDS} s; the dispatcher started ${(settledBeforeDue / 1000).toFixed(1)} s before the first due time`);
  for (const { name, claimed, atSender, expected } of phases) {
    console.log(`  ${name} claimed  : ${fmt({ ...claimed, expected })}`);
    console.log(`  ${name} at sender: ${fmt({ ...atSender, expected })}`);
  }
  const met = duplicates === 0 && phases.every(({ claimed, atSender, expected }) => atSender.p99 < TARGET_P99_MS && claimed.n === expected && atSender.n === expected);
  console.log(`  received twice: ${duplicates}; target p99 < ${TARGET_P99_MS} ms at the sender, every step once → ${met ? 'MET' : 'NOT MET'}`);
} finally {
  await ctx.lifecycle.shutdown('bench done');
  await bus.close();
  if (bus.kind === 'jetstream') {
    const { connect } = require('nats');
    const nc = await connect({ servers: natsUrl });
    const jsm = await nc.jetstreamManager();
    for await (const s of jsm.streams.list()) if (s.config.name.startsWith(`${prefix.toUpperCase()}_`)) await jsm.streams.delete(s.config.name);
    await nc.close();
  }
  await admin(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
}
