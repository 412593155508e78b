import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { busV1 } from '@rrs/proto';
import { createTestBus, createTestDatabase, TEST_NATS_URL, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { collectResults, dueStep, publishStep } from './support/steps';

const ACK_WAIT_MS = 2_000;
const STEPS = 20;

/**
 * A provider that honours Idempotency-Key (a repeat of a key it already took is answered, not sent
 * again). While `holding`, it takes messages but never answers: a sender killed then has sends whose
 * outcome it never learnt.
 */
async function startProvider() {
  const requests: Array<{ key: string; resumed: boolean }> = [];
  const delivered = new Map<string, number>();
  const held: http.ServerResponse[] = [];
  let holding = false;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const key = String(req.headers['idempotency-key']);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { resumed: boolean };
      requests.push({ key, resumed: body.resumed });
      if (!delivered.has(key)) delivered.set(key, delivered.size + 1);
      const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ id: `p${delivered.get(key)}` }));
      if (holding) held.push(res);
      else answer();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/send`,
    requests,
    delivered,
    hold(on: boolean) {
      holding = on;
    },
    close: () => {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function startSenderProcess(env: Record<string, string>): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-r', join(__dirname, 'support', 'register.js'), join(__dirname, 'support', 'killableSender.ts')], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stderr!.on('data', (d) => (out += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sender not ready in 20 s: ${out}`)), 20_000);
    child.stdout!.on('data', (data: Buffer) => {
      if (String(data).includes('ready')) {
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`sender exited with ${code}: ${out}`));
    });
  });
}

describe('a sender killed mid-flight', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let provider: Awaited<ReturnType<typeof startProvider>>;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('jetstream');
    await tb.bus.ensureStreams();
    provider = await startProvider();
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await provider.close();
    await tb.cleanup();
    await db.drop();
  });

  it('loses nothing and sends nothing twice after a SIGKILL and a restart', async () => {
    const { results, sub } = await collectResults(tb.bus);
    const env = { NATS_URL: TEST_NATS_URL, BUS_PREFIX: tb.prefix, DATABASE_URL: db.url, PROVIDER_URL: provider.url, ACK_WAIT_MS: String(ACK_WAIT_MS) };
    const first = await startSenderProcess(env);
    children.push(first);

    const steps = Array.from({ length: STEPS }, (_, i) => dueStep('KILL', { recipient: { name: `r${i}`, email: '', phone: `+7916000${String(i).padStart(4, '0')}` } }));
    // Half the steps are sent and recorded; then the provider takes messages without answering, so the
    // process dies with sends the provider has but the sender never recorded.
    for (const s of steps.slice(0, 8)) await publishStep(tb.bus, s);
    await waitFor(() => results.length === 8, { what: 'first 8 results' });
    provider.hold(true);
    for (const s of steps.slice(8)) await publishStep(tb.bus, s);
    await waitFor(() => provider.requests.length >= 12, { what: 'sends in flight' });
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    const inFlightAtKill = provider.requests.slice(8).map((r) => r.key);
    expect(inFlightAtKill.length).toBeGreaterThanOrEqual(4);

    provider.hold(false);
    children.push(await startSenderProcess(env));
    await waitFor(() => new Set(results.map((r) => r.stepId)).size === STEPS, { timeoutMs: 20_000, what: 'a result for every step' });
    await sub.drain();

    // Nothing lost: every step has exactly one outcome, SENT, with the provider's id.
    for (const step of steps) {
      const mine = results.filter((r) => r.stepId === step.stepId);
      expect(mine.map((r) => r.outcome)).toEqual([busV1.StepOutcome.STEP_OUTCOME_SENT]);
      expect(mine[0].providerMessageId).toMatch(/^p\d+$/);
    }
    // Nothing sent twice: the provider delivered each step once.
    expect(provider.delivered.size).toBe(STEPS);
    expect([...provider.delivered.keys()].sort()).toEqual(steps.map((s) => s.stepId).sort());
    // Steps recorded before the kill were never offered to the provider again; those in flight at the
    // kill were offered again only with their own idempotency key, marked as resumed.
    for (const s of steps.slice(0, 8)) expect(provider.requests.filter((r) => r.key === s.stepId)).toHaveLength(1);
    for (const key of inFlightAtKill) {
      const offers = provider.requests.filter((r) => r.key === key);
      expect(offers.map((o) => o.resumed)).toEqual([false, true]);
    }
    expect(provider.requests.length).toBe(STEPS + inFlightAtKill.length);
  });
});
