import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { connect } from 'nats';
import pg from 'pg';
import { createGrpcClient } from '@rrs/runtime';
import { eventsV1, eventSubject, webhooksV1 } from '@rrs/proto';
import { createTestBus, createTestDatabase, TEST_NATS_URL, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { Receiver } from './support/receiver';

/**
 * The webhooks service as a real process on JetStream, SIGKILLed while deliveries wait for their retry
 * and started again: every delivery is still made, and events published while it was down are too.
 */
const RUNNER = join(__dirname, 'support', 'runFromSource.js');
const MAIN = join(__dirname, '..', 'src', 'main.ts');

interface Child {
  proc: ChildProcess;
  grpcPort: number;
  output: () => string;
}

describe('webhooks service killed during retries', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let sql: pg.Pool;
  const receiver = new Receiver();
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    await tb.bus.ensureStreams();
    await receiver.start();
    sql = new pg.Pool({ connectionString: db.url, options: '-c search_path=webhooks', max: 2 });
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await sql.end();
    await receiver.stop();
    await tb.cleanup();
    await db.drop();
  });

  function start(extraEnv: Record<string, string> = {}): Promise<Child> {
    const proc = spawn(process.execPath, [RUNNER, MAIN], {
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        NATS_URL: TEST_NATS_URL,
        BUS_PREFIX: tb.prefix,
        GRPC_HOST: '127.0.0.1',
        GRPC_PORT: '0',
        OPS_HOST: '127.0.0.1',
        OPS_PORT: '0',
        LOG_LEVEL: 'info',
        WEBHOOK_ALLOW_LOOPBACK_HTTP: 'true',
        WEBHOOK_RETRY_SCHEDULE_MS: '0,3000,200,200,200,200,200,200',
        WEBHOOK_TIMEOUT_MS: '2000',
        WEBHOOK_SECRET_KEYS: Buffer.alloc(32, 3).toString('base64'),
        ...extraEnv,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(proc);
    let out = '';
    proc.stdout!.on('data', (d) => (out += d));
    proc.stderr!.on('data', (d) => (out += d));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`webhooks not started within 30 s:\n${out}`)), 30_000);
      proc.stdout!.on('data', () => {
        const port = /"port":(\d+),"msg":"webhooks gRPC listening"/.exec(out);
        if (port && out.includes('"msg":"started"')) {
          clearTimeout(timer);
          resolve({ proc, grpcPort: Number(port[1]), output: () => out });
        }
      });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`webhooks exited with ${code} before starting:\n${out}`));
      });
    });
  }

  const event = (org: string): eventsV1.Event => ({
    id: randomUUID(),
    type: 'cascade.recipient.finished',
    organizationId: org,
    occurredAt: new Date(),
    payload: { $case: 'cascadeRecipientFinished', cascadeRecipientFinished: { cascadeId: 'c', cascadeExternalId: '', recipient: undefined, rating: 4, feedback: '', reason: 'rated', steps: [], finishedAt: new Date(), reviewRequestId: '', locationId: '' } },
  });
  /**
   * Waits until the NATS server holds no pull request of the `webhooks` consumer, i.e. has dropped those
   * of a killed process. Published before that, a message can be handed to the dead process and stay
   * ack-pending until ack_wait (30 s) passes before it is redelivered — correct, but longer than a test.
   */
  async function noPullWaiting(): Promise<void> {
    const nc = await connect({ servers: TEST_NATS_URL });
    try {
      const jsm = await nc.jetstreamManager();
      await waitFor(async () => (await jsm.consumers.info(`${tb.prefix.toUpperCase()}_EVENTS`, 'webhooks')).num_waiting === 0, { what: "the killed process's pull requests dropped", timeoutMs: 15_000 });
    } finally {
      await nc.close();
    }
  }
  const publish = (e: eventsV1.Event) => tb.bus.publish(eventSubject(e.type), eventsV1.Event.encode(e).finish(), { msgId: e.id });

  it('loses nothing', async () => {
    const org = randomUUID();
    const first = await start();
    const grpc = createGrpcClient(webhooksV1.WebhooksServiceClient, `127.0.0.1:${first.grpcPort}`);
    const { endpoint } = await grpc.client.createEndpoint({ organizationId: org, plan: 'standard', url: receiver.url('/crash'), events: ['cascade.recipient.finished'], description: '' });
    grpc.close();

    let up = false;
    receiver.reply = () => (up ? { status: 200 } : { status: 500 });
    const before = Array.from({ length: 5 }, () => event(org));
    for (const e of before) await publish(e);

    // Every delivery made its first attempt, failed, and now waits for its retry: kill the process there.
    await waitFor(async () => {
      const { rows } = await sql.query(`SELECT count(*)::int AS n FROM deliveries WHERE status = 'pending' AND attempt_count >= 1 AND claim_token IS NULL AND next_attempt_at > now()`);
      return rows[0].n === before.length;
    }, { what: 'first attempts failed', timeoutMs: 15_000 }).catch((err: Error) => {
      throw new Error(`${err.message}; service output:\n${first.output()}`);
    });
    first.proc.kill('SIGKILL');
    await new Promise((r) => first.proc.once('exit', r));
    await noPullWaiting();

    const during = Array.from({ length: 3 }, () => event(org));
    for (const e of during) await publish(e);
    up = true;
    const upAt = Date.now();
    const second = await start();

    const all = [...before, ...during];
    await waitFor(async () => {
      const { rows } = await sql.query(`SELECT count(*)::int AS n FROM deliveries WHERE status = 'delivered' AND endpoint_id = $1`, [endpoint!.id]);
      return rows[0].n === all.length;
    }, { what: 'every delivery made', timeoutMs: 20_000 }).catch(async (err: Error) => {
      const { rows } = await sql.query(`SELECT event_id, status, attempt_count, retry_index, next_attempt_at - now() AS due_in, claim_token IS NOT NULL AS claimed FROM deliveries WHERE endpoint_id = $1`, [endpoint!.id]);
      throw new Error(`${err.message}; deliveries: ${JSON.stringify(rows)}; events published while down: ${JSON.stringify(during.map((e) => e.id))}; service output:\n${second.output()}`);
    });

    const delivered = new Set(receiver.at('/crash').filter((r) => r.at >= upAt).map((r) => r.headers['webhook-id']));
    for (const e of all) expect(delivered.has(e.id)).toBe(true);
    const { rows } = await sql.query(`SELECT count(*)::int AS n, count(DISTINCT event_id)::int AS events FROM deliveries WHERE endpoint_id = $1`, [endpoint!.id]);
    expect(rows[0]).toEqual({ n: all.length, events: all.length });
    const { rows: firstAttempts } = await sql.query(
      `SELECT a.status_code, a.outcome FROM attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.event_id = ANY ($1) AND a.number = 1`,
      [before.map((e) => e.id)],
    );
    expect(firstAttempts).toHaveLength(before.length);
    for (const a of firstAttempts) expect(a).toEqual({ status_code: 500, outcome: 'retry' });

    second.proc.kill('SIGTERM');
    await new Promise((r) => second.proc.once('exit', r));
  });

  it('a delivery whose attempt was in flight when the process died is attempted again once its claim lease ends', async () => {
    const org = randomUUID();
    // Production's lease (4 s, renewed while the attempt runs): the retry comes within 5 s of the kill.
    const env = {};
    const first = await start(env);
    const grpc = createGrpcClient(webhooksV1.WebhooksServiceClient, `127.0.0.1:${first.grpcPort}`);
    const { endpoint } = await grpc.client.createEndpoint({ organizationId: org, plan: 'standard', url: receiver.url('/inflight'), events: ['cascade.recipient.finished'], description: '' });
    grpc.close();
    let answering = false;
    receiver.reply = () => (answering ? { status: 200 } : { hang: true });
    const published = event(org);
    await publish(published);
    await waitFor(() => receiver.at('/inflight').length === 1, { what: 'attempt in flight', timeoutMs: 10_000 });
    first.proc.kill('SIGKILL');
    await new Promise((r) => first.proc.once('exit', r));
    // The lease the dead worker left is at most 4 s ahead: any replica may take the delivery by then.
    const { rows: lease } = await sql.query(`SELECT (EXTRACT(EPOCH FROM next_attempt_at - now()) * 1000)::float8 AS ms FROM deliveries WHERE endpoint_id = $1`, [endpoint!.id]);
    expect(lease[0].ms).toBeLessThanOrEqual(4_000);
    answering = true;
    const second = await start(env);

    await waitFor(async () => {
      const { rows } = await sql.query(`SELECT status FROM deliveries WHERE endpoint_id = $1`, [endpoint!.id]);
      return rows[0]?.status === 'delivered';
    }, { what: 'delivered after the lease', timeoutMs: 15_000 });
    const got = receiver.at('/inflight');
    expect(got).toHaveLength(2);
    expect(got.map((r) => r.headers['webhook-id'])).toEqual([published.id, published.id]);
    // The killed attempt left no record; the retry is attempt 2 of the delivery.
    const { rows } = await sql.query(`SELECT a.number, a.status_code, a.outcome FROM attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.endpoint_id = $1`, [endpoint!.id]);
    expect(rows).toEqual([{ number: 2, status_code: 200, outcome: 'delivered' }]);
    second.proc.kill('SIGTERM');
    await new Promise((r) => second.proc.once('exit', r));
  });
});
