import { startScheduler, type RunningScheduler } from '@rrs/cascade-scheduler';
import { startContacts, type RunningContacts } from '@rrs/contacts';
import { createPool, type Pool } from '@rrs/runtime';
import { connect, type JetStreamManager, type NatsConnection } from 'nats';
import { createTestBus, createTestDatabase, TEST_NATS_URL, testContext, type TestBus, type TestDatabase } from '@rrs/testkit';
import { startWebhooks } from '@rrs/webhooks';
import { startScriptedSender, type ScriptedSender } from '../../../cascade-scheduler/test/harness';
import { testWebhooksConfig } from '../../../webhooks/test/support/service';
import { startGateway } from '../../src';
import { DEFAULT_RATE_LIMITS } from '../../src/rateLimit';
import { Generator, type Schema } from './schemaFuzz';

/*
 * The security suite's fuzz run (issue 13; docs/security.md, "OWASP API Security Top 10"): requests
 * generated from the OpenAPI document the gateway serves, against the real stack (gateway → contacts,
 * cascade-scheduler, webhooks on PostgreSQL and JetStream, a scripted sender). Every operation gets
 * valid, broken and hostile bodies, parameters, path segments and credentials. It asserts:
 *   - no answer is 5xx;
 *   - a refused request (4xx) changes nothing: every table of every schema (rows and their versions),
 *     the messages published to every JetStream stream of the run (events, steps, results) and the
 *     messages the sender received are the same after it as before it.
 * Bounded and deterministic: FUZZ_REQUESTS requests (default 2 000) from seed FUZZ_SEED (default 13),
 * stopping early only at the time bound. The auth matrix is services/gateway/test/matrix.test.ts.
 */
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 2_000);
const SEED = Number(process.env.FUZZ_SEED ?? 13);
// About 40 s on an idle machine; the bound leaves room for a loaded CI runner.
const TIME_BOUND_MS = 150_000;

interface Operation {
  method: string;
  path: string;
  parameters: Array<{ name: string; in: string; required?: boolean; schema?: Schema }>;
  body?: Schema;
}

interface Sent {
  n: number;
  method: string;
  url: string;
  body?: string;
  status: number;
  answer: string;
}

describe('security: schema-driven fuzz of the public API', () => {
  let db: TestDatabase;
  let tb: TestBus;
  const ctx = testContext('security-fuzz');
  let contacts: RunningContacts;
  let scheduler: RunningScheduler;
  let sender: ScriptedSender;
  let sql: Pool;
  let base: string;
  const keys = { main: '', other: '' };
  /** Ids of real objects, so some generated paths reach them. */
  const known: string[] = [];
  let fingerprintQuery = '';
  /** The run's JetStream streams (events, steps, results), read for the messages published to them. */
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  const streams: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    await tb.bus.ensureStreams();
    contacts = await startContacts({ databaseUrl: db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
    // Real flow minutes: only first steps go out during the run, right after the request that queued them.
    scheduler = await startScheduler({ databaseUrl: db.url, busPrefix: tb.prefix, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, publicBaseUrl: 'http://reviews.test' }, ctx, { bus: tb.bus });
    // No name resolves: every webhook URL is refused, so no delivery leaves the machine.
    const webhooks = await startWebhooks({ ...testWebhooksConfig(db.url, tb.prefix), allowLoopbackHttp: false }, ctx, {
      bus: tb.bus,
      resolve: async (host) => {
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
      },
    });
    const unlimited = 1_000_000;
    const gateway = await startGateway(
      {
        host: '127.0.0.1', port: 0, contactsAddress: `127.0.0.1:${contacts.grpcPort}`, schedulerAddress: `127.0.0.1:${scheduler.grpcPort}`, webhooksAddress: `127.0.0.1:${webhooks.grpcPort}`,
        publicBaseUrl: 'http://reviews.test',
        // The request quota would answer most of the run 429 before any handler saw it.
        rateLimits: { ...DEFAULT_RATE_LIMITS, perPlan: { trial: unlimited, standard: unlimited, pro: unlimited } },
      },
      ctx,
      { channelCatalog: { list: () => ['EMAIL', 'SMS'].map((key, i) => ({ key, slug: key.toLowerCase(), label: key, contactField: key === 'EMAIL' ? 'email' : 'phone', capabilities: ['send'], sender: 'scripted', announcedAt: new Date(), providers: [], position: i + 1 })), version: 1 } },
    );
    ctx.health.setReady(true);
    base = `${gateway.url}/api/v1`;
    const directory = contacts.directory;
    const main = await directory.createOrganization({ name: 'Fuzz', plan: 'standard', emailConfirmed: true, smsBalance: 1000, defaultRegion: 'RU', sendWindow: null, cooldownDays: 0 });
    const other = await directory.createOrganization({ name: 'Other', plan: 'standard', emailConfirmed: true });
    keys.main = (await directory.issueApiKey({ organizationId: main.id })).secret;
    keys.other = (await directory.issueApiKey({ organizationId: other.id })).secret;
    for (const channel of ['EMAIL', 'SMS']) await contacts.channels.set({ organizationId: main.id, channel, configured: true });
    const location = await directory.createLocation({ organizationId: main.id, name: 'Main', address: 'a', city: 'c', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'google', url: 'https://g.example/r' }] });
    const flow = await scheduler.flows.create({ organizationId: main.id, name: 'Email then SMS', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 1440 }] });
    sender = await startScriptedSender(tb.bus, ['EMAIL', 'SMS']);
    known.push(location.id, flow.id, main.id, other.id);
    const started = await fetch(`${base}/cascades`, { method: 'POST', headers: { authorization: `Bearer ${keys.main}`, 'content-type': 'application/json' }, body: JSON.stringify({ locationId: location.id, recipients: [{ name: 'Seed', email: 'seed@example.com' }] }) });
    known.push(((await started.json()) as { id: string }).id);
    for (let i = 0; i < 200 && sender.received.length === 0; i++) await new Promise((r) => setTimeout(r, 25));

    nc = await connect({ servers: TEST_NATS_URL });
    jsm = await nc.jetstreamManager();
    for await (const stream of jsm.streams.list()) if (stream.config.name.startsWith(`${tb.prefix.toUpperCase()}_`)) streams.push(stream.config.name);
    expect(streams.length).toBeGreaterThan(0);
    sql = createPool({ url: db.url, schema: 'public', max: 2 });
    const { rows } = await sql.query<{ schema: string; name: string }>(
      `SELECT table_schema AS schema, table_name AS name FROM information_schema.tables
       WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2`,
    );
    expect(rows.length).toBeGreaterThan(20);
    // Rows and their versions (xmin changes on every insert and update; count on every delete), per table.
    fingerprintQuery = rows
      .map((t) => `SELECT '${t.schema}.${t.name}' AS t, count(*) AS n, coalesce(max(xmin::text::bigint), 0) AS v FROM "${t.schema}"."${t.name}"`)
      .join(' UNION ALL ');
  }, 120_000);

  afterAll(async () => {
    await sender?.stop();
    await sql?.end();
    await nc?.close();
    await ctx.stop();
    await tb.cleanup();
    await db.drop();
  });

  /** Everything a request could have changed: each table's rows and versions, the messages published to each stream, the messages sent. */
  async function fingerprint(): Promise<Map<string, string>> {
    const [{ rows }, published] = await Promise.all([
      sql.query<{ t: string; n: string; v: string }>(fingerprintQuery),
      Promise.all(streams.map(async (name) => [`stream ${name}`, String((await jsm.streams.info(name)).state.last_seq)] as const)),
    ]);
    const out = new Map([...rows.map((r) => [r.t, `${r.n}/${r.v}`] as const), ...published]);
    out.set('sender.received', String(sender.received.length));
    return out;
  }
  const changed = (a: Map<string, string>, b: Map<string, string>) => [...a.keys()].filter((k) => a.get(k) !== b.get(k));

  /** Outbox rows due and not yet relayed: events the scheduler committed that are still to reach the EVENTS stream. */
  const unrelayed = async () =>
    Number((await sql.query<{ n: string }>(`SELECT count(*) AS n FROM scheduler.outbox WHERE published_at IS NULL AND available_at <= clock_timestamp()`)).rows[0].n);

  /**
   * After an accepted write: waits until its asynchronous effects (steps sent, results, events) have
   * settled: the outbox has nothing due left to relay, and nothing changes for 150 ms.
   */
  async function settled(): Promise<Map<string, string>> {
    let last = await fingerprint();
    let quiet = 0;
    for (let i = 0; i < 200 && quiet < 3; i++) {
      await new Promise((r) => setTimeout(r, 50));
      const now = await fingerprint();
      quiet = changed(last, now).length === 0 && (await unrelayed()) === 0 ? quiet + 1 : 0;
      last = now;
    }
    if (quiet < 3) throw new Error('the stack never settled after an accepted request');
    return last;
  }

  it(`answers ${REQUESTS} generated requests without a 5xx, and no refused one leaves a trace`, async () => {
    const document = (await (await fetch(`${base}/openapi.json`)).json()) as Schema;
    const gen = new Generator(document, SEED, {
      locationId: [known[0]],
      flowId: [known[1]],
      phone: ['+79160000001', '+79160000002', '+7 916 000-00-03', '+449098790000', '+881631234567'],
      email: ['fuzz1@example.com', 'fuzz2@example.com'],
      contact: ['fuzz3@example.com', '+79160000004'],
    });
    const operations: Operation[] = Object.entries<Schema>(document.paths).flatMap(([path, item]) =>
      Object.entries<Schema>(item)
        .filter(([method]) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
        .map(([method, op]) => ({
          method: method.toUpperCase(),
          path,
          parameters: [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p: Schema) => gen.resolve(p) as Operation['parameters'][number]),
          body: op.requestBody ? gen.resolve(op.requestBody).content?.['application/json']?.schema : undefined,
        })),
    );
    expect(operations.length).toBeGreaterThanOrEqual(15);

    const serverErrors: Sent[] = [];
    const traces: Array<Sent & { changed: string[] }> = [];
    const byStatus = new Map<number, number>();
    const perOperation = new Map<string, number>();
    const started = Date.now();
    let before = await settled();
    let sent = 0;

    for (; sent < REQUESTS && Date.now() - started < TIME_BOUND_MS; sent++) {
      const op = sent < operations.length * 3 ? operations[sent % operations.length] : gen.pick(operations);
      let path = op.path;
      const query = new URLSearchParams();
      const headers: Record<string, string> = {};
      for (const p of op.parameters) {
        if (p.in === 'path') path = path.replace(`{${p.name}}`, gen.pathSegment(known));
        if (p.in === 'query' && (p.required || gen.chance(0.6))) query.set(p.name, String(gen.chance(0.6) ? gen.valid(p.schema) : gen.hostile()).slice(0, 2000));
      }
      const auth = gen.int(0, 24);
      if (auth <= 21) headers.authorization = `Bearer ${keys.main}`;
      else if (auth === 22) headers.authorization = `Bearer ${keys.other}`;
      else if (auth === 23) headers.authorization = `Bearer rrs_${'x'.repeat(36)}`;
      if (gen.chance(0.1)) headers['idempotency-key'] = gen.chance(0.8) ? `fuzz-${gen.uuid()}` : 'k'.repeat(300);
      let body: string | undefined;
      if (op.body || (op.method !== 'GET' && gen.chance(0.05))) {
        const mode = gen.int(0, 19);
        body = mode < 5 ? JSON.stringify(gen.valid(op.body)) : mode < 17 ? JSON.stringify(gen.broken(op.body)) : gen.pick(['{"a":', '[1,2', 'null', '"x"', '{"recipients": [' + '['.repeat(40), '\u0000', '{}'.repeat(3)]);
        headers['content-type'] = gen.chance(0.95) ? 'application/json' : gen.pick(['text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1']);
      }
      const url = `${base}${path}${query.size ? `?${query}` : ''}`;
      const res = await fetch(url, { method: op.method, headers, body, redirect: 'manual', signal: AbortSignal.timeout(15_000) });
      const answer = await res.text();
      const record: Sent = { n: sent, method: op.method, url, body: body?.slice(0, 500), status: res.status, answer: answer.slice(0, 500) };
      byStatus.set(res.status, (byStatus.get(res.status) ?? 0) + 1);
      perOperation.set(`${op.method} ${op.path}`, (perOperation.get(`${op.method} ${op.path}`) ?? 0) + 1);

      if (res.status >= 500) serverErrors.push(record);
      if (res.status >= 400) {
        const after = await fingerprint();
        const diff = changed(before, after);
        if (diff.length > 0) {
          traces.push({ ...record, changed: diff });
          before = await settled();
        }
      } else {
        // Accepted work that goes on after the answer is waited for: a 202, a contact that started its
        // cascade, and any accepted request that wrote something, since a write may queue more (a cancel's
        // finish events sit in the outbox until the relay publishes them to the EVENTS stream; read too
        // early, that publish would be charged to the next request, a refused one).
        const after = await fingerprint();
        before = res.status === 202 || answer.includes('"cascade"') || changed(before, after).length > 0 ? await settled() : after;
      }
    }

    const summary = { sent, seconds: Math.round((Date.now() - started) / 1000), byStatus: Object.fromEntries([...byStatus].sort((a, b) => a[0] - b[0])) };
    if (process.env.FUZZ_VERBOSE) console.log(JSON.stringify({ ...summary, perOperation: Object.fromEntries(perOperation) }));
    expect({ serverErrors: serverErrors.slice(0, 5), count: serverErrors.length, summary }).toEqual({ serverErrors: [], count: 0, summary });
    expect({ traces: traces.slice(0, 5), count: traces.length }).toEqual({ traces: [], count: 0 });
    expect(sent).toBe(REQUESTS);
    // Every operation was tried, and most answers were refusals (the run is mostly hostile input).
    for (const op of operations) expect([`${op.method} ${op.path}`, (perOperation.get(`${op.method} ${op.path}`) ?? 0) >= 10]).toEqual([`${op.method} ${op.path}`, true]);
    const refused = [...byStatus].filter(([status]) => status >= 400).reduce((n, [, c]) => n + c, 0);
    expect(refused / sent).toBeGreaterThan(0.5);
  }, 240_000);
});
