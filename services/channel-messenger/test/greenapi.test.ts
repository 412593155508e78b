import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { busV1 } from '@rrs/proto';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, testContext, TEST_REDIS_URL, uniqueName, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { Redis } from 'ioredis';
import { collectResults, dueStep, publishStep } from '../../../packages/sender-kit/test/support/steps';
import { createSendRateLimiter, greenApiProvider, startMessengerSender, type MessengerAccount } from '../src';

const Outcome = busV1.StepOutcome;
const TOKEN = 'tok123456789';

interface Call { instance: string; method: string; body: Record<string, unknown>; at: number }

/**
 * A local messenger gateway speaking the GREEN-API HTTP shape: checkAccount and sendMessage under
 * /waInstance{id}/{method}/{token}. Numbers ending in 0000 have no account; special endings give errors.
 */
async function startFakeGateway() {
  const calls: Call[] = [];
  let failures = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const route = /^\/v3\/waInstance(\d+)\/(\w+)\/(\w+)$/.exec(req.url ?? "");
      const json = (status: number, body: unknown, headers: Record<string, string> = {}) => res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
      if (!route || req.method !== 'POST') return json(404, {});
      if (route[3] !== TOKEN) return json(401, { message: 'Unauthorized' });
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
      calls.push({ instance: route[1], method: route[2], body, at: Date.now() });
      if (route[2] === 'checkAccount') {
        const phone = String(body.phoneNumber);
        if (typeof body.phoneNumber !== 'number') return json(400, { message: "Validation failed. Details: 'phoneNumber' must be a number" });
        return json(200, phone.endsWith('0000') ? { exist: false } : { exist: true, chatId: `${phone}@c.us` });
      }
      if (route[2] === 'sendMessage') {
        const chat = String(body.chatId);
        const left = failures.get(chat) ?? 0;
        if (left > 0) {
          failures.set(chat, left - 1);
          return json(429, { message: 'Too Many Requests' }, { 'retry-after': '1' });
        }
        if (chat.startsWith('79990000466')) return json(466, { message: 'Quota exceeded' });
        if (chat.startsWith('79990000400')) return json(400, { message: "Validation failed. Details: 'message' is required" });
        return json(200, { idMessage: `MSG${calls.length}` });
      }
      json(404, {});
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v3`,
    calls,
    failNext(chat: string, count: number) {
      failures = new Map(failures).set(chat, count);
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

describe('channel-messenger against a fake GREEN-API gateway', () => {
  let db: TestDatabase;
  let tb: TestBus;
  let pool: Pool;
  let gw: Awaited<ReturnType<typeof startFakeGateway>>;
  const ctx = testContext('messenger-test');
  let results: busV1.StepResult[];

  beforeAll(async () => {
    db = await createTestDatabase();
    tb = await createTestBus('memory');
    pool = createPool({ url: db.url, schema: 'channel_messenger' });
    gw = await startFakeGateway();
    results = (await collectResults(tb.bus)).results;
    const account = (id: string): MessengerAccount => ({ apiUrl: gw.url, idInstance: id, apiToken: TOKEN, timeoutMs: 2_000, perAccountPerSecond: 30, perChatPerSecond: 1 });
    await startMessengerSender(
      { natsUrl: 'nats://unused', busPrefix: '', databaseUrl: db.url, concurrency: 4, ackWaitMs: 5_000, max: account('1101'), telegram: account('2202'), redisUrl: TEST_REDIS_URL },
      ctx,
      { bus: tb.bus, pool, rateKeyPrefix: uniqueName('rl') },
    );
  });
  afterAll(async () => {
    await ctx.stop();
    await gw.close();
    await tb.cleanup();
    await pool.end();
    await db.drop();
  });

  const resultsOf = (stepId: string) => results.filter((r) => r.stepId === stepId);
  const resultOf = (stepId: string) => waitFor(() => resultsOf(stepId)[0], { what: `result of ${stepId}` });
  const sendsTo = (chat: string) => gw.calls.filter((c) => c.method === 'sendMessage' && c.body.chatId === chat);

  it('sends on MAX through the MAX account: the location on the first line, then the SMS template with the link', async () => {
    const step = dueStep('MAX', { recipient: { name: 'Anna', email: '', phone: '+79991110001' }, template: { subject: '', body: '{{name}}, rate us: {{link}}' } });
    await publishStep(tb.bus, step);
    expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT, channel: 'MAX' });
    const [send] = sendsTo('79991110001@c.us');
    expect(send.instance).toBe('1101');
    expect(send.body.message).toBe(`Acme Dental\nAnna, rate us: ${step.reviewUrl}`);
    expect(gw.calls.find((c) => c.method === 'checkAccount' && c.body.phoneNumber === 79991110001)).toBeDefined();
  });

  it('sends on TELEGRAM through the Telegram account', async () => {
    const step = dueStep('TELEGRAM', { recipient: { name: 'T', email: '', phone: '+79991110002' } });
    await publishStep(tb.bus, step);
    expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT, channel: 'TELEGRAM' });
    expect(sendsTo('79991110002@c.us')[0].instance).toBe('2202');
  });

  it('reports UNREACHABLE not_registered when the number has no account, and sends nothing', async () => {
    const step = dueStep('MAX', { recipient: { name: 'N', email: '', phone: '+79991110000' } });
    await publishStep(tb.bus, step);
    expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_UNREACHABLE, reason: 'not_registered' });
    expect(sendsTo('79991110000@c.us')).toHaveLength(0);
  });

  it('fails permanently on a 400 from sendMessage', async () => {
    const step = dueStep('MAX', { recipient: { name: 'E', email: '', phone: '+79990000400' } });
    await publishStep(tb.bus, step);
    expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_FAILED, reason: 'provider_rejected' });
  });

  it('retries a 429 with Retry-After and then sends once', async () => {
    gw.failNext('79991110429@c.us', 1);
    const step = dueStep('TELEGRAM', { recipient: { name: 'R', email: '', phone: '+79991110429' } });
    await publishStep(tb.bus, step);
    expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT });
    const sends = sendsTo('79991110429@c.us');
    expect(sends).toHaveLength(2);
    expect(sends[1].at - sends[0].at).toBeGreaterThanOrEqual(900);
  });

  it('keeps to about 1 message per second per chat', async () => {
    const first = dueStep('TELEGRAM', { recipient: { name: 'A', email: '', phone: '+79991110777' } });
    const second = dueStep('TELEGRAM', { recipient: { name: 'B', email: '', phone: '+79991110777' } });
    await publishStep(tb.bus, first);
    await publishStep(tb.bus, second);
    await resultOf(first.stepId);
    await resultOf(second.stepId);
    const sends = sendsTo('79991110777@c.us');
    expect(sends).toHaveLength(2);
    expect(Math.abs(sends[1].at - sends[0].at)).toBeGreaterThanOrEqual(500);
  });
});

describe('send-rate buckets shared through Redis', () => {
  it('lets two replicas together take no more than the per-chat rate', async () => {
    const redisA = new Redis(TEST_REDIS_URL);
    const redisB = new Redis(TEST_REDIS_URL);
    const keyPrefix = uniqueName('rl');
    try {
      const replicaA = createSendRateLimiter({ redis: redisA, keyPrefix, perAccountPerSecond: 30, perChatPerSecond: 1, maxWaitMs: 0 });
      const replicaB = createSendRateLimiter({ redis: redisB, keyPrefix, perAccountPerSecond: 30, perChatPerSecond: 1, maxWaitMs: 0 });
      await replicaA.acquire('chat-1');
      await expect(replicaB.acquire('chat-1')).rejects.toMatchObject({ reason: 'rate_limited' });
      await replicaB.acquire('chat-2');
      const tight = createSendRateLimiter({ redis: redisA, keyPrefix: uniqueName('rl'), perAccountPerSecond: 2, perChatPerSecond: 5, maxWaitMs: 0 });
      await tight.acquire('x');
      await tight.acquire('y');
      const err = await tight.acquire('z').catch((e: unknown) => e);
      expect(err).toMatchObject({ reason: 'rate_limited' });
      expect((err as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(0);
    } finally {
      redisA.disconnect();
      redisB.disconnect();
    }
  });
});

describe('the GREEN-API adapter on its own', () => {
  let gw: Awaited<ReturnType<typeof startFakeGateway>>;
  beforeAll(async () => {
    gw = await startFakeGateway();
  });
  afterAll(() => gw.close());

  const noLimit = { acquire: async () => undefined };
  const provider = (token = TOKEN) => greenApiProvider('max', { apiUrl: gw.url, idInstance: '1101', apiToken: token, timeoutMs: 2_000, perAccountPerSecond: 30, perChatPerSecond: 1 }, noLimit);
  const req = (phone: string) => ({ stepId: 's1', phone, text: 'hi', link: '' });

  it('answers not_registered without sending when the number has no account', async () => {
    expect(await provider().send(req('+79990010000'))).toEqual({ kind: 'not_registered' });
    expect(gw.calls.filter((c) => c.method === 'sendMessage')).toHaveLength(0);
  });

  it.each([
    ['a wrong token (401)', TOKEN.replace('1', '9'), '+79990010001', 'RetryableSendError', 'provider_auth_failed'],
    ['a used-up quota (466)', TOKEN, '+79990000466', 'RetryableSendError', 'provider_quota_exceeded'],
    ['a refused message (400)', TOKEN, '+79990000400', 'PermanentSendError', 'provider_rejected'],
  ])('sorts %s', async (_label, token, phone, name, reason) => {
    await expect(provider(token).send(req(phone))).rejects.toMatchObject({ name, reason });
  });
});
