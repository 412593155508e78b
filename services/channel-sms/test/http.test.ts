import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { answerJson, ProviderHttp } from '../src/http';

/** ProviderHttp against a real local HTTP server: what it sends, and how each failure is sorted. */
describe('ProviderHttp', () => {
  let server: http.Server;
  let base: string;
  let handler: (req: http.IncomingMessage, body: string, res: http.ServerResponse) => void;
  const connections = new Set<unknown>();
  let connectionsSeen = 0;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => handler(req, Buffer.concat(chunks).toString('utf8'), res));
    });
    server.on('connection', (socket) => {
      connectionsSeen++;
      connections.add(socket);
      socket.on('close', () => connections.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const client = (timeoutMs = 2_000, url = base) => new ProviderHttp(url, { provider: 'smsc', timeoutMs });

  it('posts the form under the base path and reads the whole answer; calls reuse a kept-alive connection', async () => {
    const seen: Array<{ method?: string; url?: string; type?: string; body: string }> = [];
    handler = (req, body, res) => {
      seen.push({ method: req.method, url: req.url, type: req.headers['content-type'], body });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"s-1","cnt":1}');
    };
    const provider = client(2_000, `${base}/api/`);
    const before = connectionsSeen;
    const first = await provider.postForm('/sys/send.php', new URLSearchParams({ phones: '+79161234567', mes: 'Привет & hi' }));
    const second = await provider.postForm('/sys/send.php', new URLSearchParams({ phones: '+79161234568', mes: 'again' }));
    expect(first).toEqual({ status: 200, body: '{"id":"s-1","cnt":1}' });
    expect(answerJson(second, 'smsc')).toEqual({ id: 's-1', cnt: 1 });
    expect(seen[0]).toEqual({ method: 'POST', url: '/api/sys/send.php', type: 'application/x-www-form-urlencoded', body: 'phones=%2B79161234567&mes=%D0%9F%D1%80%D0%B8%D0%B2%D0%B5%D1%82+%26+hi' });
    for (let i = 0; i < 8; i++) await provider.postForm('/sys/send.php', new URLSearchParams({ phones: '+79161234569', mes: `n${i}` }));
    // Kept alive: ten calls, not ten connections (undici may open a second one for a call made in the
    // same turn as the previous answer, before it marks the first connection free).
    expect(connectionsSeen - before).toBeLessThanOrEqual(2);
    await provider.close();
  });

  it('keeps at most maxConnections requests out at once; the others wait their turn', async () => {
    let open = 0;
    let most = 0;
    const held: http.ServerResponse[] = [];
    // Each request is held until three are open at once, so the pool is seen full whatever the machine's
    // speed; the answers then wait 50 ms more, time enough for a fourth request to arrive if the pool let
    // one out.
    handler = (_req, _body, res) => {
      open++;
      most = Math.max(most, open);
      held.push(res);
      if (held.length < 3) return;
      const batch = held.splice(0);
      setTimeout(() => {
        for (const answer of batch) {
          open--;
          answer.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        }
      }, 50);
    };
    const provider = new ProviderHttp(base, { provider: 'smsc', timeoutMs: 5_000, maxConnections: 3 });
    const answers = await Promise.all(Array.from({ length: 12 }, (_v, i) => provider.postForm('/x', new URLSearchParams({ i: String(i) }))));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(most).toBe(3);
    await provider.close();
  });

  it("hands a freed connection to a small request's call (ahead) before the calls that waited longer", async () => {
    const seen: string[] = [];
    handler = (_req, body, res) => {
      seen.push(new URLSearchParams(body).get('i')!);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    };
    const provider = new ProviderHttp(base, { provider: 'smsc', timeoutMs: 5_000, maxConnections: 1 });
    const post = (i: string, ahead = false) => provider.postForm('/x', new URLSearchParams({ i }), undefined, ahead);
    // Made in one turn: the first takes the one connection, the others queue in the order called.
    await Promise.all([post('first'), post('bulk1'), post('bulk2'), post('order', true), post('bulk3'), post('order2', true)]);
    expect(seen).toEqual(['first', 'order', 'order2', 'bulk1', 'bulk2', 'bulk3']);
    await provider.close();
  });

  it('returns a 4xx answer for the adapter to read; an answer that is not JSON is a retryable bad response', async () => {
    handler = (_req, _body, res) => res.writeHead(404, { 'content-type': 'text/plain' }).end('not here');
    const provider = client();
    const answer = await provider.postForm('/sys/status.php', new URLSearchParams());
    expect(answer).toEqual({ status: 404, body: 'not here' });
    expect(() => answerJson(answer, 'smsc')).toThrow(expect.objectContaining({ name: 'RetryableSendError', reason: 'provider_bad_response' }));
    await provider.close();
  });

  it('sorts 429 with its Retry-After as rate limited (the provider refused), a 503 as unavailable and maybe delivered', async () => {
    const provider = client();
    handler = (_req, _body, res) => res.writeHead(429, { 'retry-after': '7' }).end();
    await expect(provider.postForm('/x', new URLSearchParams())).rejects.toMatchObject({ name: 'RetryableSendError', reason: 'provider_rate_limited', retryAfterMs: 7_000, maybeDelivered: false });
    handler = (_req, _body, res) => res.writeHead(503, { 'retry-after': '2' }).end('busy');
    await expect(provider.postForm('/x', new URLSearchParams())).rejects.toMatchObject({ reason: 'provider_unavailable', retryAfterMs: 2_000, maybeDelivered: true });
    await provider.close();
  });

  it('sorts a refused connection as unreachable and not delivered (nothing reached the provider)', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const provider = client(2_000, `http://127.0.0.1:${port}`);
    await expect(provider.postForm('/x', new URLSearchParams())).rejects.toMatchObject({ reason: 'provider_unreachable', maybeDelivered: false });
    await provider.close();
  });

  it('sorts a connection lost after the request went out as unreachable and maybe delivered', async () => {
    handler = (req) => req.socket.destroy();
    const provider = client();
    await expect(provider.postForm('/x', new URLSearchParams())).rejects.toMatchObject({ reason: 'provider_unreachable', maybeDelivered: true });
    await provider.close();
  });

  it('sorts no headers in time, and a body that stops, as a timeout, maybe delivered', async () => {
    const provider = client(200);
    handler = () => undefined;
    await expect(provider.postForm('/x', new URLSearchParams())).rejects.toMatchObject({ reason: 'provider_timeout', maybeDelivered: true });
    handler = (_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"id":');
    };
    await expect(provider.postForm('/x', new URLSearchParams())).rejects.toMatchObject({ reason: 'provider_timeout', maybeDelivered: true });
    await provider.close();
  });
});
