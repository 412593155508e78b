import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'nats';
import { connectJetStreamBus, type Bus, type BusError } from '../src/bus';
import { dec, deleteStreams, enc, NATS_URL, sleep, waitFor } from './busHarness';

/** The JetStream transport where it meets a server that loses its streams, stops answering or restarts. */

/** JetStream only: the bus's streams vanish while it runs (server state lost, or an operator deleted them). */
describe('jetstream bus whose streams were deleted behind its back', () => {
  const prefix = `t${randomBytes(5).toString('hex')}`;
  let bus: Bus | undefined;
  const errors: BusError[] = [];

  beforeAll(async () => {
    bus = await connectJetStreamBus({ url: NATS_URL, prefix, name: 'bus-contract-test', onError: (e) => errors.push(e) });
    await bus.ensureStreams();
  });

  afterAll(async () => {
    await bus?.close();
    await deleteStreams(NATS_URL, prefix);
  });

  test('publishBatch recreates the streams and stores the batch', async () => {
    const b = bus as Bus;
    // The ack subscription exists already, so only the streams are missing.
    await b.publishBatch([{ subject: 'steps.gone', data: enc('before') }]);
    await deleteStreams(NATS_URL, prefix);
    const acks = await b.publishBatch([
      { subject: 'steps.gone', data: enc('1'), options: { msgId: 'g1' } },
      { subject: 'events.gone.x', data: enc('2'), options: { msgId: 'g2' } },
      { subject: 'steps.gone', data: enc('3'), options: { msgId: 'g3' } },
    ]);
    const upper = prefix.toUpperCase();
    expect(acks).toEqual([
      { stream: `${upper}_STEPS`, seq: 1, duplicate: false },
      { stream: `${upper}_EVENTS`, seq: 1, duplicate: false },
      { stream: `${upper}_STEPS`, seq: 2, duplicate: false },
    ]);
    const nc = await connect({ servers: NATS_URL });
    try {
      const jsm = await nc.jetstreamManager();
      expect((await jsm.streams.info(`${upper}_STEPS`)).state.messages).toBe(2);
      expect((await jsm.streams.info(`${upper}_EVENTS`)).state.messages).toBe(1);
    } finally {
      await nc.close();
    }
    expect(errors).toEqual([]);
  });
});

/** Restarting a private server: a `consume()` must survive a short outage. JetStream only. */
describe('jetstream bus across a server restart', () => {
  let server: ChildProcess | undefined;
  let storeDir = '';
  let port = 0;
  let bus: Bus | undefined;
  const errors: BusError[] = [];

  const startServer = async (): Promise<void> => {
    const child = spawn('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', storeDir], { stdio: 'ignore' });
    server = child;
    const exited = new Promise<never>((_, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`nats-server exited with ${code}`)));
    });
    const ready = waitFor('nats-server to accept connections', async () => {
      try {
        const nc = await connect({ servers: `nats://127.0.0.1:${port}` });
        await nc.close();
        return true;
      } catch {
        return false;
      }
    });
    await Promise.race([ready, exited]);
  };

  const stopServer = async (): Promise<void> => {
    const child = server;
    server = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  };

  /** SIGSTOP takes effect thread by thread; a server that still runs a thread could answer what is sent next. */
  const pauseServer = async (): Promise<void> => {
    const pid = server?.pid;
    if (!pid) throw new Error('no server to pause');
    process.kill(pid, 'SIGSTOP');
    await waitFor('every nats-server thread stopped', () => {
      try {
        return readdirSync(`/proc/${pid}/task`).every((tid) => /^\d+ \(.*\) [tT] /.test(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')));
      } catch {
        return false;
      }
    });
  };

  beforeAll(async () => {
    storeDir = mkdtempSync(join(tmpdir(), 'bus-restart-'));
    port = await freePort();
    await startServer();
    bus = await connectJetStreamBus({ url: `nats://127.0.0.1:${port}`, prefix: 'restart', onError: (e) => errors.push(e) });
  });

  afterAll(async () => {
    await bus?.close().catch(() => undefined);
    await stopServer();
    if (storeDir) rmSync(storeDir, { recursive: true, force: true });
  });

  test('consume keeps delivering after the server restarts', async () => {
    const b = bus as Bus;
    const got: string[] = [];
    const sub = await b.consume({ stream: 'STEPS', durable: 'survivor', filterSubject: 'steps.survivor' }, async (m) => {
      got.push(dec(m.data));
      m.ack();
    });
    await b.publish('steps.survivor', enc('before'));
    await waitFor('delivery before restart', () => got.length === 1);
    await stopServer();
    await startServer();
    // The client reconnects on its own; the publish waits for that instead of failing.
    await b.publish('steps.survivor', enc('after'));
    // A pull lost with the old server ends by its expiry (10 s, jetstreamConsume.ts) and is asked again
    // once reconnected: delivery resumes within that plus the reconnect, later on a loaded CI machine.
    await waitFor('delivery after restart', () => got.includes('after'), 40_000);
    expect(got).toEqual(['before', 'after']);
    await sub.drain();
  }, 60_000);

  test('publishBatch fails after the ack timeout while the server does not answer; a retry is answered duplicate', async () => {
    const b = bus as Bus;
    const batch = ['t1', 't2', 't3'].map((id) => ({ subject: 'steps.stalled', data: enc(id), options: { msgId: id } }));
    await pauseServer();
    const startedAt = Date.now();
    try {
      await expect(b.publishBatch(batch)).rejects.toThrow(/3 of 3 messages not acknowledged/);
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(4_900);
    } finally {
      server?.kill('SIGCONT');
    }
    // The server stored the batch once it resumed; its late acks went nowhere.
    const acks = await b.publishBatch(batch);
    expect(acks.map((a) => a.duplicate)).toEqual([true, true, true]);
    expect(errors).toEqual([]);
  });

  test('publishBatch fails at once when the connection drops while acks are outstanding', async () => {
    const b = bus as Bus;
    const batch = [{ subject: 'steps.dropped', data: enc('x'), options: { msgId: 'd1' } }];
    await pauseServer();
    try {
      const publishing = b.publishBatch(batch);
      await sleep(200);
      const killedAt = Date.now();
      await stopServer();
      await expect(publishing).rejects.toThrow(/lost the connection to NATS/);
      expect(Date.now() - killedAt).toBeLessThan(2_000);
    } finally {
      if (server) server.kill('SIGCONT');
      else await startServer();
    }
    // The server died before reading the batch, so the retry stores it.
    expect(await b.publishBatch(batch)).toEqual([{ stream: 'RESTART_STEPS', seq: expect.any(Number), duplicate: false }]);
    expect(errors).toEqual([]);
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const found = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(found));
    });
  });
}
