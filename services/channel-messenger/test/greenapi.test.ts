import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { busV1 } from '@rrs/proto';
import { createPool, type Pool } from '@rrs/runtime';
import { createTestBus, createTestDatabase, testContext, TEST_REDIS_URL, uniqueName, waitFor, type TestBus, type TestDatabase } from '@rrs/testkit';
import { Redis } from 'ioredis';
import { collectResults, dueStep, publishStep } from '../../../packages/sender-kit/test/support/steps';
import { createSendRateLimiter, greenApiProvider, renderMessengerText, startMessengerSender, type MessengerAccount } from '../src';

const Outcome = busV1.StepOutcome;
const TOKEN = 'tok123456789';

interface Call { instance: string; method: string; body: Record<string, unknown>; at: number }
interface Outgoing { idMessage: string; chatId: string; textMessage: string }

/**
 * A local messenger gateway speaking the GREEN-API HTTP shape under /waInstance{id}/{method}/{token}:
 * checkAccount and sendMessage (POST), showMessagesQueue and lastOutgoingMessages (GET). Numbers ending in
 * 0000 have no account; special endings give errors. Like GREEN-API, sendMessage takes no client id and
 * never deduplicates; what it took shows in the journal (or, while `queueing`, in the send queue).
 */
async function startFakeGateway() {
  const calls: Call[] = [];
  const journal = new Map<string, Outgoing[]>();
  const queue = new Map<string, Outgoing[]>();
  const unanswered = new Set<string>();
  let failures = new Map<string, number>();
  let taken = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://gateway');
      const route = /^\/v3\/waInstance(\d+)\/(\w+)\/(\w+)$/.exec(url.pathname);
      const json = (status: number, body: unknown, headers: Record<string, string> = {}) => res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
      if (!route) return json(404, {});
      if (route[3] !== TOKEN) return json(401, { message: 'Unauthorized' });
      const [, instance, method] = route;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
      calls.push({ instance, method, body: method === 'lastOutgoingMessages' ? { minutes: url.searchParams.get('minutes') } : body, at: Date.now() });
      if (req.method === 'GET' && method === 'showMessagesQueue') {
        return json(200, (queue.get(instance) ?? []).map((m) => ({ messageID: m.idMessage, type: 'sendMessage', body: { chatId: m.chatId, message: m.textMessage } })));
      }
      if (req.method === 'GET' && method === 'lastOutgoingMessages') {
        return json(200, (journal.get(instance) ?? []).map((m) => ({ type: 'outgoing', idMessage: m.idMessage, timestamp: Math.floor(Date.now() / 1000), statusMessage: 'delivered', typeMessage: 'textMessage', chatId: m.chatId, textMessage: m.textMessage, sendByApi: true })));
      }
      if (req.method !== 'POST') return json(404, {});
      if (method === 'checkAccount') {
        const phone = String(body.phoneNumber);
        if (typeof body.phoneNumber !== 'number') return json(400, { message: "Validation failed. Details: 'phoneNumber' must be a number" });
        return json(200, phone.endsWith('0000') ? { exist: false } : { exist: true, chatId: `${phone}@c.us` });
      }
      if (method === 'sendMessage') {
        const chat = String(body.chatId);
        const left = failures.get(chat) ?? 0;
        if (left > 0) {
          failures.set(chat, left - 1);
          return json(429, { message: 'Too Many Requests' }, { 'retry-after': '1' });
        }
        if (chat.startsWith('79990000466')) return json(466, { message: 'Quota exceeded' });
        if (chat.startsWith('79990000400')) return json(400, { message: "Validation failed. Details: 'message' is required" });
        const message = { idMessage: `MSG${++taken}`, chatId: chat, textMessage: String(body.message) };
        journal.set(instance, [...(journal.get(instance) ?? []), message]);
        // Taken, but the answer is lost on the way back: the caller times out.
        if (unanswered.delete(chat)) return;
        return json(200, { idMessage: message.idMessage });
      }
      json(404, {});
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v3`,
    calls,
    /** A message the account sent earlier (journal) or holds in its send queue. */
    preload(instance: string, where: 'journal' | 'queue', message: Outgoing) {
      const list = where === 'journal' ? journal : queue;
      list.set(instance, [...(list.get(instance) ?? []), message]);
    },
    /** Messages the gateway took for this chat: more than one means it was sent twice. */
    takenFor: (instance: string, chat: string) => (journal.get(instance) ?? []).filter((m) => m.chatId === chat && !m.idMessage.startsWith('EARLY')),
    takeWithoutAnswer(chat: string) {
      unanswered.add(chat);
    },
    failNext(chat: string, count: number) {
      failures = new Map(failures).set(chat, count);
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((r) => server.close(() => r()));
    },
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
      { databaseUrl: db.url, concurrency: 4, ackWaitMs: 5_000, max: account('1101'), telegram: account('2202'), redisUrl: TEST_REDIS_URL },
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

  describe('the at-least-once windows (docs/channels.md)', () => {
    const killedMidSend = (stepId: string, attemptId: string) =>
      pool.query(`INSERT INTO send_log (step_id, attempt_id, channel, organization_id, state, lease_until) VALUES ($1, $2, 'MAX', 'org-1', 'sending', now() - interval '1 second')`, [stepId, attemptId]);
    const lookups = () => gw.calls.filter((c) => c.method === 'showMessagesQueue' || c.method === 'lastOutgoingMessages').length;

    it.each([
      ['sent (in the outgoing journal)', 'journal', '+79991110031'],
      ['still in the send queue', 'queue', '+79991110032'],
    ] as const)('a send resumed after the sender died once the gateway took it (%s) is not sent again', async (_label, where, phone) => {
      const step = dueStep('MAX', { recipient: { name: 'J', email: '', phone } });
      const chat = `${phone.slice(1)}@c.us`;
      gw.preload('1101', where, { idMessage: `EARLY-${step.stepId}`, chatId: chat, textMessage: renderMessengerText(step) });
      await killedMidSend(step.stepId, step.attemptId);
      const lookupsBefore = lookups();
      await publishStep(tb.bus, step);
      expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT, providerMessageId: `EARLY-${step.stepId}` });
      expect(lookups()).toBeGreaterThan(lookupsBefore);
      expect(sendsTo(chat)).toHaveLength(0);
    });

    it('a resumed send the gateway has no trace of is sent, once', async () => {
      const phone = '+79991110033';
      const step = dueStep('MAX', { recipient: { name: 'J', email: '', phone } });
      // Another message to the same chat with other text is not this step's.
      gw.preload('1101', 'journal', { idMessage: 'EARLY-other', chatId: `${phone.slice(1)}@c.us`, textMessage: 'another text' });
      await killedMidSend(step.stepId, step.attemptId);
      await publishStep(tb.bus, step);
      expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT });
      expect(gw.takenFor('1101', `${phone.slice(1)}@c.us`)).toHaveLength(1);
    });

    it('a sendMessage whose answer was lost is found in the journal on the next try, not sent again', async () => {
      const phone = '+79991110034';
      const chat = `${phone.slice(1)}@c.us`;
      gw.takeWithoutAnswer(chat);
      const step = dueStep('MAX', { recipient: { name: 'L', email: '', phone } });
      await publishStep(tb.bus, step);
      expect(await resultOf(step.stepId)).toMatchObject({ outcome: Outcome.STEP_OUTCOME_SENT });
      expect(sendsTo(chat)).toHaveLength(1);
      expect(gw.takenFor('1101', chat)).toHaveLength(1);
      expect(resultsOf(step.stepId)[0].providerMessageId).toBe(gw.takenFor('1101', chat)[0].idMessage);
    });
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
