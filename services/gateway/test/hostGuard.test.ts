import { connect } from 'node:net';
import { testContext } from '@rrs/testkit';
import { startGateway } from '../src';
import { isLoopbackName } from '../src/http/hostGuard';

/**
 * DNS rebinding (issue 29): the gateway answers only to the host of PUBLIC_BASE_URL and to loopback
 * names; the probes answer to any Host, since the kubelet calls them by the pod's address.
 */
describe('the gateway and the Host header', () => {
  const ctx = testContext('gateway-host');
  let port = 0;

  beforeAll(async () => {
    // No service behind it is needed: these requests end before any gRPC call.
    const gateway = await startGateway({ host: '127.0.0.1', port: 0, contactsAddress: '127.0.0.1:1', schedulerAddress: '127.0.0.1:1', publicBaseUrl: 'https://reviews.example.com' }, ctx);
    port = gateway.port;
    ctx.health.setReady(true);
  });
  afterAll(async () => {
    await ctx.stop();
  });

  /** One request written by hand, so the Host header (or its absence) is exactly what a browser or a probe would send. */
  const raw = (head: string, to = port): Promise<{ status: number; body: string }> =>
    new Promise((resolve, reject) => {
      const socket = connect(to, '127.0.0.1', () => socket.write(`${head}\r\nConnection: close\r\n\r\n`));
      let answer = '';
      socket.on('data', (chunk) => (answer += chunk));
      socket.on('error', reject);
      socket.on('close', () => resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1] ?? 0), body: answer.slice(answer.indexOf('\r\n\r\n') + 4) }));
    });

  it.each(['reviews.example.com', 'REVIEWS.example.com:443', 'localhost:8080', '127.0.0.1', '[::1]:8080', 'app.localhost'])('serves the Host %s', async (host) => {
    const res = await raw(`GET /api/v1/ping HTTP/1.1\r\nHost: ${host}`);
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body)).toMatchObject({ code: 'missing_api_key' });
  });

  it.each(['attacker.example', 'attacker.example:8080', 'reviews.example.com.attacker.example', '10.0.0.5', '192.168.1.10:8080'])(
    'answers 421 misdirected_request to the Host %s, on every path, before routing',
    async (host) => {
      for (const target of ['/api/v1/ping', '/account/v1/session', '/r/AbCdEf0123456789GhIjKl', '/app/', '/nowhere']) {
        const res = await raw(`GET ${target} HTTP/1.1\r\nHost: ${host}`);
        expect([target, res.status]).toEqual([target, 421]);
        expect(JSON.parse(res.body)).toMatchObject({ status: 421, code: 'misdirected_request', title: 'Misdirected Request' });
      }
    },
  );

  it('judges each request by its own Host, alternating, and ignores X-Forwarded-Host without TRUST_PROXY', async () => {
    const statuses: number[] = [];
    for (const head of [
      'Host: attacker.example',
      'Host: localhost:8080',
      'Host: attacker.example',
      'Host: REVIEWS.example.com',
      'Host: reviews.example.com\r\nX-Forwarded-Host: attacker.example',
      'Host: attacker.example\r\nX-Forwarded-Host: reviews.example.com',
    ]) {
      statuses.push((await raw(`GET /api/v1/ping HTTP/1.1\r\n${head}`)).status);
    }
    expect(statuses).toEqual([421, 401, 421, 401, 401, 421]);
  });

  it('behind a trusted proxy (TRUST_PROXY), judges X-Forwarded-Host instead of the Host', async () => {
    const behindProxy = await startGateway({ host: '127.0.0.1', port: 0, contactsAddress: '127.0.0.1:1', schedulerAddress: '127.0.0.1:1', publicBaseUrl: 'https://reviews.example.com', trustProxy: 1 }, ctx);
    const statuses: number[] = [];
    for (const head of ['Host: 10.0.0.5\r\nX-Forwarded-Host: reviews.example.com', 'Host: localhost\r\nX-Forwarded-Host: attacker.example', 'Host: localhost']) {
      statuses.push((await raw(`GET /api/v1/ping HTTP/1.1\r\n${head}`, behindProxy.port)).status);
    }
    expect(statuses).toEqual([401, 421, 401]);
  });

  it('answers 421 to a request without a Host (HTTP/1.0)', async () => {
    expect((await raw('GET /api/v1/ping HTTP/1.0')).status).toBe(421);
  });

  it('answers the probes whatever the Host', async () => {
    expect((await raw('GET /healthz HTTP/1.1\r\nHost: 10.244.1.17:8080')).status).toBe(200);
    expect((await raw('GET /readyz HTTP/1.1\r\nHost: 10.244.1.17:8080')).status).toBe(200);
  });

  it('takes localhost, its subdomains, 127.0.0.0/8 and ::1 as loopback, nothing else', () => {
    for (const name of ['localhost', 'a.localhost', '127.0.0.1', '127.1.2.3', '[::1]']) expect([name, isLoopbackName(name)]).toEqual([name, true]);
    for (const name of ['localhost.example', 'mylocalhost', '128.0.0.1', '0.0.0.0', '10.0.0.1', '[::2]', '']) expect([name, isLoopbackName(name)]).toEqual([name, false]);
  });
});
