import { connect, type Socket } from 'node:net';
import { ConfigError } from '@rrs/runtime';
import { testContext } from '@rrs/testkit';
import { buildConfig, startGateway } from '../src';

/** What a slow or greedy client gets from the gateway's HTTP server. */
describe('the gateway against slow and many connections', () => {
  const ctx = testContext('gateway-connections');
  let port = 0;

  beforeAll(async () => {
    // No service behind it is needed: these requests never reach a route.
    const gateway = await startGateway(
      { host: '127.0.0.1', port: 0, contactsAddress: '127.0.0.1:1', schedulerAddress: '127.0.0.1:1', publicBaseUrl: 'http://localhost', http: { requestTimeoutMs: 1_500, headersTimeoutMs: 1_000, maxConnections: 3 } },
      ctx,
    );
    port = gateway.port;
  });
  afterAll(async () => {
    await ctx.stop();
  });

  const open = (): Promise<Socket> =>
    new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => resolve(socket));
      socket.on('error', reject);
    });
  /** What the server sent before it closed the socket, and how long that took. */
  const untilClosed = (socket: Socket): Promise<{ answer: string; ms: number }> =>
    new Promise((resolve) => {
      const started = Date.now();
      let answer = '';
      socket.on('data', (chunk) => (answer += chunk));
      socket.on('close', () => resolve({ answer, ms: Date.now() - started }));
    });

  it('answers 408 and closes a client whose headers never finish (no connection held for minutes)', async () => {
    const socket = await open();
    socket.write('GET /api/v1/ping HTTP/1.1\r\nHost: localhost\r\n');
    const { answer } = await untilClosed(socket);
    expect(answer).toMatch(/^HTTP\/1\.1 408/);
  });

  it('answers 408 and closes a client whose body trickles in slower than the request timeout', async () => {
    const socket = await open();
    socket.write('POST /api/v1/cascades HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"a":');
    const timer = setInterval(() => socket.writable && socket.write(' '), 200);
    const { answer } = await untilClosed(socket);
    clearInterval(timer);
    expect(answer).toMatch(/^HTTP\/1\.1 (408|401)/);
  });

  it('closes connections beyond its cap at once', async () => {
    const held = [await open(), await open(), await open()];
    const extra = await open();
    const closed = await untilClosed(extra);
    expect(closed.answer).toBe('');
    for (const socket of held) socket.destroy();
  });

  it('reads TRUST_PROXY as false, a hop count or addresses, and refuses true naming the variable', () => {
    const base = { PUBLIC_BASE_URL: 'https://reviews.example.com' };
    expect(buildConfig(base).trustProxy).toBe(false);
    expect(buildConfig({ ...base, TRUST_PROXY: '1' }).trustProxy).toBe(1);
    expect(buildConfig({ ...base, TRUST_PROXY: 'loopback, 10.0.0.0/8' }).trustProxy).toEqual(['loopback', '10.0.0.0/8']);
    expect(() => buildConfig({ ...base, TRUST_PROXY: 'true' })).toThrow(ConfigError);
    expect(() => buildConfig({ ...base, TRUST_PROXY: 'true' })).toThrow(/TRUST_PROXY/);
    expect(buildConfig(base).http).toEqual({ requestTimeoutMs: 30_000, headersTimeoutMs: 10_000, maxConnections: 4_096 });
  });
});
