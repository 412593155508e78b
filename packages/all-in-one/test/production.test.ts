import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SUBSCRIBABLE_EVENT_TYPES } from '@rrs/proto';
import { ConfigError } from '@rrs/runtime';
import { createTestDatabase, testContext, type TestDatabase } from '@rrs/testkit';
import { banner } from '../src/banner';
import { buildConfig } from '../src/config';
import { startAllInOne, type RunningAllInOne } from '../src/launcher';

/** Production with the sinks named (a staging): the senders' provider variables are not the subject here. */
const STAGING = { EMAIL_PROVIDERS: 'sink', SMS_PROVIDERS: 'sink', MESSENGER_SINK: 'max,telegram' };

// The test gives a DATABASE_URL, so embedded PostgreSQL (an ES module jest cannot load) is never started.
jest.mock('../src/embeddedPostgres', () => ({
  startEmbeddedPostgres: () => Promise.reject(new Error('embedded PostgreSQL is not used in this test')),
}));

const TOKEN = 'adm_supplied_token_0123456789';

const configError = (env: Record<string, string>): ConfigError | undefined => {
  try {
    buildConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  return undefined;
};

/** NODE_ENV=production (the image): no dev inbox, no loopback webhooks, no generated admin token, no /metrics on the public port. */
describe('all-in-one in production', () => {
  let db: TestDatabase;
  let dir: string;
  let aio: RunningAllInOne;
  let receiver: Server;
  let receiverUrl: string;
  let apiKey: string;
  const ctx = testContext('aio-production');
  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${aio.url}/admin/v1${path}`, { method, headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as any };
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    dir = mkdtempSync(join(tmpdir(), 'rrs-aio-prod-'));
    receiver = createServer((_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const config = buildConfig({ ...STAGING, NODE_ENV: 'production', DATABASE_URL: db.url, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dir, ADMIN_TOKEN: TOKEN, LOG_LEVEL: 'warn' });
    aio = await startAllInOne(config, ctx);
    ctx.health.setReady(true);
  });

  it('seeds no demo organization, writes no demo.json and prints no secret (issue 29)', async () => {
    expect(aio.demo).toBeUndefined();
    expect((await admin('GET', '/organizations')).body.organizations).toEqual([]);
    expect(existsSync(join(dir, 'demo.json'))).toBe(false);
    const signIn = await fetch(`${aio.url}/account/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'demo@example.com', password: 'x'.repeat(12) }) });
    expect(signIn.status).toBe(401);
    const printed = banner(aio, buildConfig({ ...STAGING, NODE_ENV: 'production', ADMIN_TOKEN: TOKEN }), Date.now());
    expect(printed).not.toMatch(/rrs_|API key|password|demo@example\.com/i);
    expect(printed).not.toContain(TOKEN);
    expect(printed).toContain('/admin/v1');
    // Organizations come from the admin API.
    const organization = (await admin('POST', '/organizations', { name: 'Acme', plan: 'standard', emailConfirmed: true })).body.organization;
    apiKey = (await admin('POST', `/organizations/${organization.id}/api-keys`, { name: 'CRM' })).body.secret;
    expect((await fetch(`${aio.url}/api/v1/ping`, { headers: { authorization: `Bearer ${apiKey}` } })).status).toBe(200);
  });
  afterAll(async () => {
    await ctx.stop();
    await new Promise((resolve) => receiver.close(resolve));
    await db.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('has no dev inbox', async () => {
    for (const path of ['/dev/messages', '/dev/inbox']) {
      const res = await fetch(`${aio.url}${path}`);
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ code: 'not_found' });
    }
    expect(aio.devInbox).toBe(false);
  });

  it('refuses a loopback webhook URL, creating nothing', async () => {
    const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
    const res = await fetch(`${aio.url}/api/v1/webhooks`, { method: 'POST', headers, body: JSON.stringify({ url: receiverUrl, events: [SUBSCRIBABLE_EVENT_TYPES[0]] }) });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: 'webhook_url_not_allowed' });
    const list = (await (await fetch(`${aio.url}/api/v1/webhooks`, { headers })).json()) as { webhooks: unknown[] };
    expect(list.webhooks).toEqual([]);
  });

  it('takes the supplied admin token and generates none', async () => {
    const res = await fetch(`${aio.url}/admin/v1/organizations`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    expect((await fetch(`${aio.url}/admin/v1/organizations`, { headers: { authorization: 'Bearer adm_another_token_0123456789' } })).status).toBe(401);
  });

  it('does not serve /metrics on the public port', async () => {
    expect((await fetch(`${aio.url}/metrics`)).status).toBe(404);
  });
});

describe('all-in-one settings', () => {
  it('refuses to start in production with the admin API on and no ADMIN_TOKEN, naming the variable', () => {
    expect(configError({ NODE_ENV: 'production' })).toMatchObject({ variable: 'ADMIN_TOKEN' });
    expect(configError({ ...STAGING, NODE_ENV: 'production', ADMIN_API: 'off' })).toBeUndefined();
    expect(buildConfig({ ...STAGING, NODE_ENV: 'production', ADMIN_API: 'off' })).toMatchObject({ adminTokens: undefined, production: true });
    expect(buildConfig({ ...STAGING, NODE_ENV: 'production', ADMIN_TOKEN: `${TOKEN},adm_next_token_0123456789` }).adminTokens).toEqual([TOKEN, 'adm_next_token_0123456789']);
  });

  it('in development generates the admin token as today', () => {
    expect(buildConfig({})).toMatchObject({ adminTokens: 'generate', production: false });
  });

  it('serves /metrics on METRICS_PORT, beside the public port by default', () => {
    expect(buildConfig({})).toMatchObject({ opsPort: 9472, opsHost: '127.0.0.1' });
    expect(buildConfig({ HOST: '0.0.0.0', METRICS_PORT: '9100' })).toMatchObject({ opsPort: 9100, opsHost: '0.0.0.0' });
    expect(buildConfig({ HOST: '0.0.0.0', METRICS_HOST: '127.0.0.1' })).toMatchObject({ opsHost: '127.0.0.1' });
  });

  it('takes the dispatcher\'s in-flight bound as the scheduler does (DISPATCH_IN_FLIGHT_*), naming a bad variable', () => {
    expect(buildConfig({})).toMatchObject({ dispatchInFlightPerChannel: 1000, dispatchInFlightTargetMs: 100 });
    expect(buildConfig({ DISPATCH_IN_FLIGHT_PER_CHANNEL: '0', DISPATCH_IN_FLIGHT_TARGET_MS: '100' })).toMatchObject({ dispatchInFlightPerChannel: 0, dispatchInFlightTargetMs: 100 });
    expect(configError({ DISPATCH_IN_FLIGHT_TARGET_MS: '5' })).toMatchObject({ variable: 'DISPATCH_IN_FLIGHT_TARGET_MS' });
  });
});

