import http from 'node:http';
import type { AddressInfo } from 'node:net';
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
});
