import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createReviewRequestClient, retryAfterMs } from '@rrs/client';

/*
 * Retries against a local HTTP server that answers a scripted list of responses: what was asked, how
 * often, and how long apart.
 */

interface Scripted {
  status: number;
  headers?: Record<string, string>;
  body?: unknown;
  /** The connection breaks instead of an answer (what a crashed server or a proxy timeout looks like to fetch). */
  drop?: boolean;
}
interface Received {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
  authorization: string | undefined;
  body: string;
  at: number;
}

const problem = (status: number, code: string): Scripted => ({
  status,
  headers: { 'content-type': 'application/problem+json' },
  body: { type: `https://docs.example/errors/${code}`, title: code, status, code },
});
const accepted: Scripted = { status: 202, headers: { 'content-type': 'application/json' }, body: { id: 'c1', status: 'running', queued: 1, skipped: 0, idempotentReplayed: false } };
const startBody = { locationId: '0190e0e0-2222-7000-8000-000000000002', recipients: [{ name: 'Anna', email: 'anna@example.com' }] };

let server: Server;
let script: Scripted[] = [];
let received: Received[] = [];
let baseUrl: string;

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      received.push({ method: req.method!, path: req.url!, idempotencyKey: req.headers['idempotency-key'] as string | undefined, authorization: req.headers.authorization, body, at: Date.now() });
      const next = script.shift() ?? problem(500, 'script_exhausted');
      if (next.drop) {
        req.socket.destroy();
        return;
      }
      res.writeHead(next.status, next.headers);
      res.end(next.body === undefined ? undefined : JSON.stringify(next.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  script = [];
  received = [];
});

const client = (retry = {}) => createReviewRequestClient({ baseUrl, apiKey: 'rrs_test', retry });

describe('retries', () => {
  it('429 with Retry-After: 1, then 202: one retry a second later, with the same Idempotency-Key and body', async () => {
    script = [{ ...problem(429, 'rate_limited'), headers: { 'content-type': 'application/problem+json', 'retry-after': '1' } }, accepted];
    const { data, error, response } = await client().POST('/cascades', { body: startBody });
    expect(error).toBeUndefined();
    expect(response.status).toBe(202);
    expect(data).toMatchObject({ id: 'c1', queued: 1 });
    expect(received).toHaveLength(2);
    expect(received[1].at - received[0].at).toBeGreaterThanOrEqual(950);
    expect(received[0].idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    expect(received[1].idempotencyKey).toBe(received[0].idempotencyKey);
    expect(received.map((r) => [r.method, r.path, JSON.parse(r.body), r.authorization])).toEqual([
      ['POST', '/api/v1/cascades', startBody, 'Bearer rrs_test'],
      ['POST', '/api/v1/cascades', startBody, 'Bearer rrs_test'],
    ]);
  });

  it.each([400, 401, 403, 404, 409, 422])('%i: no retry, the problem is returned', async (status) => {
    script = [{ ...problem(status, 'refused'), headers: { 'content-type': 'application/problem+json', 'retry-after': '0' } }, accepted];
    const { data, error, response } = await client({ baseDelayMs: 1 }).POST('/cascades', { body: startBody });
    expect(data).toBeUndefined();
    expect(response.status).toBe(status);
    expect(error).toMatchObject({ status, code: 'refused' });
    expect(received).toHaveLength(1);
  });

  it.each([500, 502, 504])('%i on a POST (it carries an Idempotency-Key): retried with the same key and body, and the second answer is returned', async (status) => {
    script = [problem(status, 'internal'), accepted];
    const { data, response } = await client({ baseDelayMs: 10 }).POST('/cascades', { body: startBody });
    expect([response.status, data]).toEqual([202, expect.objectContaining({ id: 'c1' })]);
    expect(received).toHaveLength(2);
    expect(received[1].idempotencyKey).toBe(received[0].idempotencyKey);
    expect(received[1].body).toBe(received[0].body);
  });

  it('a broken connection on a POST: retried with the same key; on a GET too; but not on a PATCH, which carries no key', async () => {
    script = [{ status: 0, drop: true }, accepted];
    const { response } = await client({ baseDelayMs: 10 }).POST('/cascades', { body: startBody, params: { header: { 'Idempotency-Key': 'deal-7-won' } } });
    expect(response.status).toBe(202);
    expect(received.map((r) => r.idempotencyKey)).toEqual(['deal-7-won', 'deal-7-won']);

    received = [];
    script = [{ status: 0, drop: true }, { status: 200, headers: { 'content-type': 'application/json' }, body: { ok: true } }];
    expect((await client({ baseDelayMs: 10 }).GET('/ping')).response.status).toBe(200);
    expect(received).toHaveLength(2);

    received = [];
    script = [{ status: 0, drop: true }, { status: 200, headers: { 'content-type': 'application/json' }, body: {} }];
    await expect(client({ baseDelayMs: 10 }).PATCH('/webhooks/{id}', { params: { path: { id: 'w1' } }, body: { disabled: true } })).rejects.toThrow();
    expect(received).toHaveLength(1);
  });

  it('500 on a PATCH (no Idempotency-Key): not retried, the problem is returned', async () => {
    script = [problem(500, 'internal'), { status: 200, headers: { 'content-type': 'application/json' }, body: {} }];
    const { error, response } = await client({ baseDelayMs: 10 }).PATCH('/webhooks/{id}', { params: { path: { id: 'w1' } }, body: { disabled: true } });
    expect([response.status, (error as { code: string }).code]).toEqual([500, 'internal']);
    expect(received).toHaveLength(1);
  });

  it('409 idempotency_key_in_use (the first attempt still running): retried after its Retry-After; another 409 is returned at once', async () => {
    script = [{ ...problem(409, 'idempotency_key_in_use'), headers: { 'content-type': 'application/problem+json', 'retry-after': '1' } }, accepted];
    const { response } = await client().POST('/cascades', { body: startBody });
    expect(response.status).toBe(202);
    expect(received).toHaveLength(2);
    expect(received[1].at - received[0].at).toBeGreaterThanOrEqual(950);

    received = [];
    script = [problem(409, 'idempotency_key_reused'), accepted];
    const reused = await client().POST('/cascades', { body: startBody });
    expect([reused.response.status, (reused.error as { code: string }).code]).toEqual([409, 'idempotency_key_reused']);
    expect(received).toHaveLength(1);
  });

  it('a connection that keeps breaking: the retries run out and the network error is thrown', async () => {
    script = Array.from({ length: 3 }, () => ({ status: 0, drop: true }));
    await expect(client({ retries: 2, baseDelayMs: 5 }).POST('/cascades', { body: startBody })).rejects.toThrow();
    expect(received).toHaveLength(3);
  });

  it('503 on every attempt: the retries run out and the last problem comes back with its code', async () => {
    script = Array.from({ length: 4 }, () => problem(503, 'dependency_unavailable'));
    const { error, response } = await client({ retries: 3, baseDelayMs: 20 }).GET('/ping');
    expect(response.status).toBe(503);
    expect(error).toMatchObject({ status: 503, code: 'dependency_unavailable' });
    expect(received).toHaveLength(4);
    // Without Retry-After: 20, 40, 80 ms apart.
    const gaps = received.slice(1).map((r, i) => r.at - received[i].at);
    expect(gaps[2]).toBeGreaterThanOrEqual(75);
    expect(script).toHaveLength(0);
  });

  it('a Retry-After longer than maxDelayMs is not waited for', async () => {
    script = [{ ...problem(429, 'rate_limited'), headers: { 'content-type': 'application/problem+json', 'retry-after': '3600' } }, accepted];
    const started = Date.now();
    const { error, response } = await client({ maxDelayMs: 5000 }).POST('/cascades', { body: startBody });
    expect(response.status).toBe(429);
    expect(error).toMatchObject({ code: 'rate_limited' });
    expect(received).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('retries: 0 turns them off', async () => {
    script = [problem(503, 'dependency_unavailable'), accepted];
    const { response } = await client({ retries: 0 }).GET('/ping');
    expect(response.status).toBe(503);
    expect(received).toHaveLength(1);
  });
});

describe('Idempotency-Key', () => {
  it('the caller\'s key is sent as given; each call without one gets a new key; GETs get none', async () => {
    script = [accepted, accepted, accepted, { status: 200, headers: { 'content-type': 'application/json' }, body: { ok: true } }];
    const api = client();
    await api.POST('/cascades', { body: startBody, params: { header: { 'Idempotency-Key': 'crm-deal-1042-won' } } });
    await api.POST('/cascades', { body: startBody });
    await api.POST('/cascades', { body: startBody });
    await api.GET('/ping');
    expect(received[0].idempotencyKey).toBe('crm-deal-1042-won');
    expect(received[1].idempotencyKey).not.toBe(received[2].idempotencyKey);
    expect(received[3].idempotencyKey).toBeUndefined();
  });

  it('a key generator of the caller\'s is used', async () => {
    script = [accepted];
    await createReviewRequestClient({ baseUrl, apiKey: 'rrs_test', idempotencyKey: () => 'order-77' }).POST('/cascades', { body: startBody });
    expect(received[0].idempotencyKey).toBe('order-77');
  });
});

describe('retryAfterMs', () => {
  it('reads delay-seconds and HTTP dates, and nothing else', () => {
    const now = Date.parse('2026-05-01T12:00:00Z');
    expect(retryAfterMs('2', now)).toBe(2000);
    expect(retryAfterMs('Fri, 01 May 2026 12:00:05 GMT', now)).toBe(5000);
    expect(retryAfterMs('Fri, 01 May 2026 11:00:00 GMT', now)).toBe(0);
    expect(retryAfterMs('soon', now)).toBeUndefined();
    expect(retryAfterMs('-1', now)).toBeUndefined();
    expect(retryAfterMs(null, now)).toBeUndefined();
  });
});
