import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '@rrs/testkit';
import { stopHttpServer } from '../src/service';

/** SIGTERM must not wait for keep-alive connections to time out, nor cut a request in flight. */
describe('stopping the gateway HTTP server', () => {
  it('finishes a request in flight, closes keep-alive connections, and returns well before their idle timeout', async () => {
    const server = http.createServer((req, res) => {
      const delay = req.url === '/slow' ? 300 : 0;
      setTimeout(() => res.end('done'), delay);
    });
    server.keepAliveTimeout = 65_000;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const agent = new http.Agent({ keepAlive: true });
    const get = (path: string) =>
      new Promise<{ status: number; body: string; connection: string | undefined }>((resolve, reject) => {
        http.get(`${base}${path}`, { agent }, (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body, connection: res.headers.connection }));
        }).on('error', reject);
      });

    expect((await get('/fast')).status).toBe(200); // leaves an idle keep-alive connection open
    const inFlight = get('/slow');
    await new Promise((r) => setTimeout(r, 50));
    const started = Date.now();
    await stopHttpServer(server, 5_000);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(await inFlight).toMatchObject({ status: 200, body: 'done' });
    agent.destroy();
  });

  it('cuts connections still busy after the grace period', async () => {
    const server = http.createServer(() => undefined); // never answers
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as AddressInfo).port;
    const failed = new Promise((resolve) => http.get(`http://127.0.0.1:${port}/hang`, () => undefined).on('error', resolve));
    await new Promise((r) => setTimeout(r, 50));
    const started = Date.now();
    await stopHttpServer(server, 300);
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(Date.now() - started).toBeLessThan(2_000);
    await failed;
  });

  it('under a steady stream of keep-alive requests through a balancer that follows readiness late: every request answered, none reset', async () => {
    // Two replicas behind a balancer that routes to A until it has seen A unready, 150 ms late (a probe period).
    const LB_LAG_MS = 150;
    const replicas = ['a', 'b'].map((name) => {
      const server = http.createServer((req, res) => {
        let body = '';
        req.on('data', (d) => (body += d));
        req.on('end', () => setTimeout(() => res.end(`${name}:${body}`), 5 + Math.random() * 20));
      });
      server.keepAliveTimeout = 65_000;
      return { name, server, unreadyAt: null as number | null, port: 0 };
    });
    for (const r of replicas) {
      await new Promise<void>((ok) => r.server.listen(0, '127.0.0.1', () => ok()));
      r.port = (r.server.address() as AddressInfo).port;
    }
    const [a, b] = replicas;
    const routed = () => (a.unreadyAt === null || Date.now() - a.unreadyAt < LB_LAG_MS ? a : b);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const errors: string[] = [];
    const answered: Array<{ by: string; connection: string | undefined }> = [];
    let sending = true;
    const post = (n: number) =>
      new Promise<void>((resolve) => {
        const to = routed();
        const req = http.request({ host: '127.0.0.1', port: to.port, method: 'POST', path: '/r', agent }, (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => {
            if (res.statusCode !== 200 || body !== `${to.name}:${n}`) errors.push(`#${n}: ${res.statusCode} ${body}`);
            answered.push({ by: to.name, connection: res.headers.connection });
            resolve();
          });
        });
        req.on('error', (err) => {
          errors.push(`#${n} to ${to.name}: ${err.message}`);
          resolve();
        });
        req.end(String(n));
      });
    let next = 0;
    const clients = Array.from({ length: 6 }, async () => {
      while (sending) await post(next++);
    });
    const answeredBy = (name: string) => answered.filter((x) => x.by === name).length;
    await waitFor(() => answeredBy('a') > 20 || undefined, { what: 'A answering the stream', intervalMs: 10 });
    // SIGTERM on A: unready first, then the HTTP server's stop with a drain longer than the balancer's lag.
    a.unreadyAt = Date.now();
    await stopHttpServer(a.server, 5_000, 400);
    // The stream goes on until B has answered its share (a loaded machine answers fewer in a given time).
    await waitFor(() => answeredBy('b') > 20 || undefined, { what: 'B answering once A stopped', intervalMs: 10 });
    sending = false;
    await Promise.all(clients);
    agent.destroy();
    await new Promise<void>((ok) => b.server.close(() => ok()));
    expect(errors).toEqual([]);
    expect(answered.filter((x) => x.by === 'a').length).toBeGreaterThan(10);
    expect(answered.filter((x) => x.by === 'b').length).toBeGreaterThan(10);
    // A told its keep-alive clients to reconnect while it drained.
    expect(answered.some((x) => x.by === 'a' && x.connection === 'close')).toBe(true);
  });
});
