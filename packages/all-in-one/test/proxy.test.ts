import { mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '@rrs/runtime';
import { createTestDatabase, testContext, type TestDatabase } from '@rrs/testkit';
import { buildConfig } from '../src/config';
import { startAllInOne, type DevelopmentAllInOne } from '../src/launcher';

// The test gives a DATABASE_URL, so embedded PostgreSQL (an ES module jest cannot load) is never started.
jest.mock('../src/embeddedPostgres', () => ({
  startEmbeddedPostgres: () => Promise.reject(new Error('embedded PostgreSQL is not used in this test')),
}));

const TOKEN = 'adm_supplied_token_0123456789';
const PUBLIC = 'https://reviews.example.com';

/**
 * The all-in-one behind a TLS proxy (issue 29, M3): it reads TRUST_PROXY exactly as the gateway does,
 * so the cookie is `Secure` and per-address limits count each client, not the proxy's one address; and
 * it answers only to the public host and loopback names (DNS rebinding).
 */
describe('all-in-one behind a proxy (TRUST_PROXY)', () => {
  let db: TestDatabase;
  let dir: string;
  let aio: DevelopmentAllInOne;
  const ctx = testContext('aio-proxy');

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'rrs-aio-proxy-'));
    const config = buildConfig({ DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, ADMIN_TOKEN: TOKEN, LOG_LEVEL: 'warn', TRUST_PROXY: 'loopback', PUBLIC_BASE_URL: PUBLIC, DEMO_PASSWORD: 'demo-password-0123' });
    aio = (await startAllInOne(config, ctx)) as DevelopmentAllInOne;
    ctx.health.setReady(true);
  });
  afterAll(async () => {
    await ctx.stop();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  const viaProxy = (client: string, extra: Record<string, string> = {}) => ({ 'x-forwarded-for': client, 'x-forwarded-proto': 'https', 'x-forwarded-host': 'reviews.example.com', ...extra });

  it('reads TRUST_PROXY as the gateway does: false by default, a hop count or addresses, and refuses true naming the variable', () => {
    expect(buildConfig({}).trustProxy).toBe(false);
    expect(buildConfig({ TRUST_PROXY: '1' }).trustProxy).toBe(1);
    expect(buildConfig({ TRUST_PROXY: 'loopback, 10.0.0.0/8' }).trustProxy).toEqual(['loopback', '10.0.0.0/8']);
    let refused: unknown;
    try {
      buildConfig({ TRUST_PROXY: 'true' });
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(ConfigError);
    expect(refused).toMatchObject({ variable: 'TRUST_PROXY' });
  });

  it('gives the session cookie Secure when the proxy says the request came over TLS', async () => {
    const res = await fetch(`${aio.url}/account/v1/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...viaProxy('203.0.113.10') },
      body: JSON.stringify({ email: aio.demo.email, password: aio.demo.password }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('set-cookie')).toMatch(/;\s*Secure/i);
  });

  it("counts bad API keys per client behind the proxy: one client's 30 wrong keys block that client, not every integrator", async () => {
    for (let i = 0; i < 31; i++) {
      const res = await fetch(`${aio.url}/api/v1/ping`, { headers: { authorization: `Bearer rrs_${'x'.repeat(36)}`, ...viaProxy('203.0.113.66') } });
      expect([401, 429]).toContain(res.status);
    }
    const blocked = await fetch(`${aio.url}/api/v1/ping`, { headers: { authorization: `Bearer ${aio.demo.apiKey}`, ...viaProxy('203.0.113.66') } });
    expect(blocked.status).toBe(429);
    expect(await blocked.json()).toMatchObject({ code: 'too_many_auth_failures' });
    const other = await fetch(`${aio.url}/api/v1/ping`, { headers: { authorization: `Bearer ${aio.demo.apiKey}`, ...viaProxy('203.0.113.67') } });
    expect(other.status).toBe(200);
  });

  it('answers only to the host of PUBLIC_BASE_URL and loopback names: any other Host is 421 misdirected_request (DNS rebinding)', async () => {
    const rebound = await fetch(`${aio.url}/account/v1/session`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-host': 'attacker.example', 'x-forwarded-for': '203.0.113.20' },
      body: JSON.stringify({ email: aio.demo.email, password: aio.demo.password }),
    });
    expect(rebound.status).toBe(421);
    expect(rebound.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await rebound.json()).toMatchObject({ status: 421, code: 'misdirected_request' });
    expect(rebound.headers.get('set-cookie')).toBeNull();
    // The probes answer whatever the Host (the kubelet calls them by pod address).
    expect((await fetch(`${aio.url}/healthz`, { headers: { 'x-forwarded-host': '10.1.2.3' } })).status).toBe(200);
    expect((await fetch(`${aio.url}/api/v1/ping`, { headers: { authorization: `Bearer ${aio.demo.apiKey}`, ...viaProxy('203.0.113.21') } })).status).toBe(200);
  });
});

/** A GET with the Host header a browser fooled by DNS rebinding would send. */
function getWithHost(url: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('all-in-one outside production, reached by a rebound name', () => {
  let db: TestDatabase;
  let dir: string;
  let aio: DevelopmentAllInOne;
  const ctx = testContext('aio-rebinding');

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'rrs-aio-rebind-'));
    aio = (await startAllInOne(buildConfig({ DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, LOG_LEVEL: 'warn' }), ctx)) as DevelopmentAllInOne;
    ctx.health.setReady(true);
  });
  afterAll(async () => {
    await ctx.stop();
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the dev inbox to localhost but not to a page of another name resolving to 127.0.0.1 (421, nothing listed)', async () => {
    const port = new URL(aio.url).port;
    expect((await getWithHost(`${aio.url}/dev/messages`, `localhost:${port}`)).status).toBe(200);
    expect((await getWithHost(`${aio.url}/dev/messages`, `127.0.0.1:${port}`)).status).toBe(200);
    for (const path of ['/dev/messages', '/dev/inbox', '/app/', '/account/v1/session', '/admin/v1/organizations']) {
      const rebound = await getWithHost(`${aio.url}${path}`, `rebind.attacker.example:${port}`);
      expect([path, rebound.status]).toEqual([path, 421]);
      expect(JSON.parse(rebound.body)).toMatchObject({ code: 'misdirected_request' });
      expect(rebound.body).not.toContain('"messages"');
    }
  });
});
