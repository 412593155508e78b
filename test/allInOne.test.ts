import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client as PgClient } from 'pg';
import { buildDist, freePort, startAllInOne as start, stopAllInOne as stop, type AllInOneProcess, waitFor } from '@rrs/testkit';

/**
 * `npm start`'s process, run as a user would: every service in one process on embedded PostgreSQL and
 * the in-process bus, answering real HTTP.
 */
const ROOT = join(__dirname, '..');
const MAIN = join(ROOT, 'packages', 'all-in-one', 'dist', 'main.js');
const FIXED_KEY = 'rrs_' + 'A'.repeat(30);

/** A checksum-valid key with a fixed body, as a user would pass in DEMO_API_KEY. */
function fixedKey(): string {
  const { isWellFormedApiKey } = require('../services/contacts/src/apiKeys') as typeof import('../services/contacts/src/apiKeys');
  const { crc32 } = require('node:zlib') as typeof import('node:zlib');
  const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  let n = crc32(Buffer.from(FIXED_KEY));
  let sum = '';
  for (let i = 0; i < 6; i++) {
    sum = ALPHABET[n % 62] + sum;
    n = Math.floor(n / 62);
  }
  const key = FIXED_KEY + sum;
  expect(isWellFormedApiKey(key)).toBe(true);
  return key;
}

describe('all-in-one (npm start)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'rrs-aio-'));
  // As root, embedded PostgreSQL runs as the `postgres` user, which must be able to enter the folder.
  chmodSync(dataDir, 0o755);
  let port: number;
  let pgPort: number;
  let metricsPort: number;
  let running: AllInOneProcess | undefined;

  beforeAll(async () => {
    buildDist();
    port = await freePort();
    pgPort = await freePort();
    metricsPort = await freePort();
  });
  afterAll(async () => {
    if (running) await stop(running.child);
    rmSync(dataDir, { recursive: true, force: true });
  });

  const env = () => ({ PORT: String(port), EMBEDDED_PG_PORT: String(pgPort), DATA_DIR: dataDir, METRICS_PORT: String(metricsPort) });
  const pgUrl = (password: string) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${pgPort}/postgres`;
  /** Connects to the embedded server with a password: null when it works, else the error's SQLSTATE. */
  const pgLogin = async (password: string): Promise<string | null> => {
    const client = new PgClient({ connectionString: pgUrl(password) });
    try {
      await client.connect();
      return null;
    } catch (err) {
      return (err as { code?: string }).code ?? String(err);
    } finally {
      await client.end().catch(() => undefined);
    }
  };
  const passwordFile = () => join(dataDir, 'postgres-password');
  const ping = (key: string) => fetch(`http://127.0.0.1:${port}/api/v1/ping`, { headers: { authorization: `Bearer ${key}` } });
  const signIn = (email: string, password: string) =>
    fetch(`http://127.0.0.1:${port}/account/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
  /** The console line of the banner: its URL and the demo person's email and password. */
  const consoleLine = (output: string) => {
    const m = /Console:\s+(\S+)\s+\((\S+) \/ (\S+)\)/.exec(output);
    if (!m) throw new Error(`no Console line in the banner:\n${output}`);
    return { url: m[1], email: m[2], password: m[3] };
  };
  let generatedPassword = '';

  it('seeds a demo organization on first start and answers /ping with its printed key', async () => {
    running = await start(env());
    const res = await ping(running.apiKey);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { ok: boolean; organization: { id: string; name: string } };
    expect(body).toMatchObject({ ok: true, organization: { name: 'Demo Coffee' } });
    expect(running.output()).toContain(`curl -H "Authorization: Bearer ${running.apiKey}"`);
  });

  it('serves /metrics on METRICS_PORT only, never on the public port', async () => {
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(404);
    const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('http_server_request_duration_seconds_bucket');
    expect(running!.output()).toContain(`Metrics:                    http://127.0.0.1:${metricsPort}/metrics`);
  });

  it('gives the embedded PostgreSQL a generated password kept in DATA_DIR (0600); the old default is refused', async () => {
    expect(statSync(passwordFile()).mode & 0o777).toBe(0o600);
    const password = readFileSync(passwordFile(), 'utf8').trim();
    expect(password).toMatch(/^\w{32}$/);
    expect(await pgLogin(password)).toBeNull();
    expect(await pgLogin('postgres')).toBe('28P01');
  });

  it('seeds the demo person with a generated password, printed at start and kept in demo.json, and serves the console', async () => {
    const line = consoleLine(running!.output());
    expect(line.email).toBe('demo@example.com');
    expect(line.password.length).toBeGreaterThanOrEqual(10);
    expect(JSON.parse(readFileSync(join(dataDir, 'demo.json'), 'utf8'))).toMatchObject({ email: 'demo@example.com', password: line.password });
    expect((await signIn(line.email, line.password)).status).toBe(200);
    const page = await fetch(`http://127.0.0.1:${port}/app/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<script src="app.js" defer></script>');
    expect((await fetch(`http://127.0.0.1:${port}/app/app.js`)).status).toBe(200);
    generatedPassword = line.password;
  });

  it('stops cleanly on SIGTERM', async () => {
    expect(await stop(running!.child)).toBe(0);
    running = undefined;
  });

  it('keeps its data across a restart, and DEMO_API_KEY adds a fixed key to the same organization', async () => {
    // A data folder from before the generated password: its server has the old default and no password file.
    running = await start(env());
    const admin = new PgClient({ connectionString: pgUrl(readFileSync(passwordFile(), 'utf8').trim()) });
    await admin.connect();
    await admin.query(`ALTER ROLE postgres PASSWORD 'postgres'`);
    await admin.end();
    expect(await stop(running.child)).toBe(0);
    rmSync(passwordFile());

    const key = fixedKey();
    running = await start({ ...env(), DEMO_API_KEY: key });
    expect(running.apiKey).toBe(key);
    const res = await ping(key);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { organization: { name: string } }).organization.name).toBe('Demo Coffee');
    expect(running.output().match(/demo organization seeded/g)).toBeNull();
    // The old default was replaced by a generated password, now kept in the file.
    const password = readFileSync(passwordFile(), 'utf8').trim();
    expect(await pgLogin(password)).toBeNull();
    expect(await pgLogin('postgres')).toBe('28P01');
    expect(statSync(passwordFile()).mode & 0o777).toBe(0o600);
    // The password kept from the first start still signs in.
    expect(consoleLine(running.output()).password).toBe(generatedPassword);
    expect((await signIn('demo@example.com', generatedPassword)).status).toBe(200);
  });

  it('DEMO_EMAIL and DEMO_PASSWORD set the demo person at start', async () => {
    expect(await stop(running!.child)).toBe(0);
    running = await start({ ...env(), DEMO_EMAIL: 'owner@demo.example', DEMO_PASSWORD: 'a-fixed-demo-password' });
    expect(consoleLine(running.output())).toMatchObject({ email: 'owner@demo.example', password: 'a-fixed-demo-password' });
    expect((await signIn('owner@demo.example', 'a-fixed-demo-password')).status).toBe(200);
    const short = await start({ ...env(), PORT: String(await freePort()), DEMO_PASSWORD: 'short' }).then(
      () => 'started',
      (err: Error) => err.message,
    );
    expect(short).toMatch(/DEMO_PASSWORD/);
  });

  it('with DELAY_MINUTE_MS=200 runs a demo cascade end to end: email, SMS after the fast hour, then the review form', async () => {
    // Also proves a restarted process (with data) stops cleanly.
    expect(await stop(running!.child)).toBe(0);
    running = undefined;
    running = await start({ ...env(), DELAY_MINUTE_MS: '200' });
    const url = `http://localhost:${port}`;
    expect(running.output()).toMatch(/DELAY_MINUTE_MS: +200 /);
    expect(running.output()).toContain(`Dev inbox:                  ${url}/dev/inbox`);
    const api = (path: string, init: RequestInit = {}) =>
      fetch(`http://127.0.0.1:${port}/api/v1${path}`, { ...init, headers: { authorization: `Bearer ${running!.apiKey}`, 'content-type': 'application/json', ...init.headers } });

    const { locations } = (await (await api('/locations')).json()) as { locations: Array<{ id: string; name: string }> };
    expect(locations).toHaveLength(1);
    const started = await api('/cascades', { method: 'POST', body: JSON.stringify({ locationId: locations[0].id, recipients: [{ name: 'Anna', email: 'anna@example.com', phone: '+7 916 123-45-67' }] }) });
    expect(started.status).toBe(202);
    const cascade = (await started.json()) as { id: string; queued: number };
    expect(cascade.queued).toBe(1);

    type Message = { channel: string; to: string; text: string; link: string; sentAt: string };
    const messages = async () => ((await (await fetch(`http://127.0.0.1:${port}/dev/messages`)).json()) as { messages: Message[] }).messages;
    const email = await waitFor(async () => (await messages()).find((m) => m.channel === 'EMAIL' && m.to === 'anna@example.com'), { what: 'the email in the dev inbox' });
    expect((await messages()).some((m) => m.channel === 'SMS')).toBe(false);
    // The demo flow's SMS is 60 flow minutes after the email: 12 s with this clock.
    const sms = await waitFor(async () => (await messages()).find((m) => m.channel === 'SMS' && m.to === '+79161234567'), { what: 'the SMS in the dev inbox', timeoutMs: 25_000, intervalMs: 200 });
    expect(Date.parse(sms.sentAt) - Date.parse(email.sentAt)).toBeGreaterThanOrEqual(60 * 200 - 500);

    const got = await waitFor(async () => {
      const body = (await (await api(`/cascades/${cascade.id}`)).json()) as { recipients: Array<{ steps: Array<{ channel: string; status: string }> }> };
      return body.recipients[0].steps.every((st) => st.status === 'sent') ? body : undefined;
    }, { what: 'both steps sent' });
    expect(got.recipients[0].steps.map((st) => [st.channel, st.status])).toEqual([['EMAIL', 'sent'], ['SMS', 'sent']]);

    expect(email.link).toMatch(new RegExp(`^${url}/r/[0-9A-Za-z]+$`));
    expect(email.text).toContain(email.link);
    const form = await fetch(`http://127.0.0.1:${port}${new URL(email.link).pathname}`);
    expect(form.status).toBe(200);
    expect(form.headers.get('content-type')).toMatch(/^text\/html/);
    expect(await form.text()).toContain('Demo Coffee on Tverskaya');

    expect(await stop(running.child)).toBe(0);
    running = undefined;
  }, 45_000);

  it('says EMBEDDED_PG_PORT is taken, naming the variable, when another server holds that port', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const taken = (holder.address() as AddressInfo).port;
    const elsewhere = mkdtempSync(join(tmpdir(), 'rrs-aio-taken-'));
    // As root, embedded PostgreSQL runs as the `postgres` user, which must be able to enter the folder.
    chmodSync(elsewhere, 0o755);
    try {
      const child = spawn(process.execPath, [MAIN], { env: { ...process.env, ...env(), DATA_DIR: elsewhere, EMBEDDED_PG_PORT: String(taken), LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
      let err = '';
      child.stderr!.on('data', (d) => (err += d));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      expect(code).toBe(1);
      expect(err).toContain(`failed to start: port ${taken} is already in use`);
      expect(err).toContain('set EMBEDDED_PG_PORT to a free port');
      expect(err).not.toMatch(/TypeError|Cannot read properties/);
    } finally {
      await new Promise((resolve) => holder.close(resolve));
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });

  it('in production (the image) refuses to start without the senders\' providers, naming the variables to set', async () => {
    const child = spawn(process.execPath, [MAIN], { env: { ...process.env, ...env(), NODE_ENV: 'production', ADMIN_API: 'off', LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(78);
    expect(err).toContain('invalid configuration: SMTP_URL: no provider is configured and NODE_ENV=production: set SMTP_URL or POSTMARK_SERVER_TOKEN (or EMAIL_PROVIDERS=sink');
  });

  it('fails at start with a message naming a bad variable', async () => {
    const child = spawn(process.execPath, [MAIN], { env: { ...process.env, PORT: 'eighty' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr!.on('data', (d) => (err += d));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(78);
    expect(err).toMatch(/invalid configuration: PORT: /);
  });
});
