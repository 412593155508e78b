import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createTestDatabase, testContext, waitFor, type TestDatabase } from '@rrs/testkit';
import type { AllInOneConfig } from '../../all-in-one/src/config';
import { startAllInOne, type DevelopmentAllInOne } from '../../all-in-one/src/launcher';

export const DEMO_PASSWORD = 'demo-password-for-tests';

/** The all-in-one on a fresh database (no embedded PostgreSQL), its demo person signing in with DEMO_PASSWORD. */
export interface ConsoleStack {
  aio: DevelopmentAllInOne;
  /** Runs SQL in the contacts service's schema, to check what was (not) stored. */
  contactsSql<T extends pg.QueryResultRow = Record<string, unknown>>(text: string, values?: unknown[]): Promise<T[]>;
  /** Runs SQL in the scheduler's schema (e.g. to move a response target into the past). */
  schedulerSql<T extends pg.QueryResultRow = Record<string, unknown>>(text: string, values?: unknown[]): Promise<T[]>;
  admin(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }>;
  close(): Promise<void>;
}

export async function startConsoleStack(name: string, over: Partial<Omit<AllInOneConfig, 'production'>> = {}): Promise<ConsoleStack> {
  const db: TestDatabase = await createTestDatabase();
  const dir = mkdtempSync(join(tmpdir(), `rrs-${name}-`));
  const ctx = testContext(name);
  const aio = await startAllInOne(
    { host: '127.0.0.1', port: 0, dataDir: dir, databaseUrl: db.url, embeddedPostgresPort: 0, publicBaseUrl: 'http://localhost:8080', minuteMs: 60_000, allowHttpCrm: false, adminTokens: 'generate', opsHost: '127.0.0.1', opsPort: 0, logLevel: 'warn', demoPassword: DEMO_PASSWORD, ...over, production: false },
    ctx,
  );
  ctx.health.setReady(true);
  const pool = new pg.Pool({ connectionString: db.url, max: 2, options: '-c search_path=contacts' });
  const schedulerPool = new pg.Pool({ connectionString: db.url, max: 2, options: '-c search_path=scheduler' });
  return {
    aio,
    contactsSql: async (text, values) => (await pool.query(text, values)).rows,
    schedulerSql: async (text, values) => (await schedulerPool.query(text, values)).rows,
    admin: async (method, path, body) => {
      const res = await fetch(`${aio.url}/admin/v1${path}`, { method, headers: { authorization: `Bearer ${aio.demo.adminToken}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      return { status: res.status, body: res.status === 204 ? null : await res.json() };
    },
    close: async () => {
      await pool.end();
      await schedulerPool.end();
      await ctx.stop();
      await db.drop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A signed-in member as the console is: the session cookie and the CSRF token. */
export interface Signed {
  cookie: string;
  csrf: string;
  call(method: string, path: string, options?: { body?: unknown; csrf?: string | null; headers?: Record<string, string> }): Promise<{ status: number; body: any; headers: Headers }>;
}

export function accountCaller(base: string) {
  return async (method: string, path: string, options: { body?: unknown; cookie?: string; csrf?: string | null; headers?: Record<string, string> } = {}) => {
    const headers: Record<string, string> = { ...(options.headers ?? {}) };
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    if (options.cookie) headers.cookie = options.cookie;
    if (options.csrf) headers['x-csrf-token'] = options.csrf;
    const res = await fetch(`${base}/account/v1${path}`, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
  };
}

export async function signIn(base: string, email: string, password: string): Promise<Signed> {
  const call = accountCaller(base);
  const res = await call('POST', '/session', { body: { email, password } });
  if (res.status !== 200) throw new Error(`sign-in of ${email} answered ${res.status} ${JSON.stringify(res.body)}`);
  const cookie = res.headers.get('set-cookie')!.split(';')[0];
  const csrf = res.body.csrfToken as string;
  return {
    cookie,
    csrf,
    call: (method, path, options = {}) => call(method, path, { ...options, cookie, csrf: options.csrf === undefined ? csrf : options.csrf }),
  };
}

/** Invites `email` into the organization through the admin API and accepts it: the new member, signed in. */
export async function addMember(stack: ConsoleStack, organizationId: string, email: string, role: 'owner' | 'admin' | 'viewer', password = 'member-password-123'): Promise<Signed> {
  const invited = await stack.admin('POST', `/organizations/${organizationId}/invitations`, { email, role });
  if (invited.status !== 201) throw new Error(`invitation answered ${invited.status} ${JSON.stringify(invited.body)}`);
  const token = decodeURIComponent(String(invited.body.acceptUrl).split('#/accept/')[1]);
  const accepted = await accountCaller(stack.aio.url)('POST', '/invitations/accept', { body: { token, name: email.split('@')[0], password } });
  if (accepted.status !== 201) throw new Error(`accept answered ${accepted.status} ${JSON.stringify(accepted.body)}`);
  return signIn(stack.aio.url, email, password);
}

/** The link of the newest email to `to` in the dev inbox (invitations, resets: the answers never carry it), waiting for it (bounded). */
export async function emailedLink(base: string, to: string, previous = 0): Promise<string> {
  for (let i = 0; i < 100; i++) {
    const { messages } = (await (await fetch(`${base}/dev/messages?to=${encodeURIComponent(to)}`)).json()) as { messages: Array<{ link: string }> };
    // Newest first.
    if (messages.length > previous) return messages[0].link;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`no email for ${to} in the dev inbox`);
}

/**
 * Sends one customer a review request by hand and rates it through the form's pages as the customer
 * would (with the private feedback, when given): the cascade, the link's token and its review request.
 */
export async function customerRates(base: string, sender: Signed, options: { email: string; rating: number; feedback?: string; locationId: string }): Promise<{ cascadeId: string; token: string; reviewRequestId: string }> {
  const started = await sender.call('POST', '/cascades', { body: { locationId: options.locationId, externalId: `order-${options.email}`, recipients: [{ name: 'Rita', email: options.email }] } });
  if (started.status !== 202) throw new Error(`send answered ${started.status} ${JSON.stringify(started.body)}`);
  const path = new URL(await emailedLink(base, options.email)).pathname;
  const form = await fetch(`${base}${path}`);
  const cookie = form.headers.get('set-cookie')!.split(';')[0];
  const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(await form.text())![1];
  const post = (to: string, fields: Record<string, string>) =>
    fetch(`${base}${path}/${to}`, { method: 'POST', redirect: 'manual', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ csrf, ...fields }) });
  const rated = await post('rating', { rating: String(options.rating) });
  if (rated.status !== 303) throw new Error(`rating answered ${rated.status}`);
  if (options.feedback) {
    const given = await post('feedback', { text: options.feedback });
    if (given.status !== 303) throw new Error(`feedback answered ${given.status}`);
  }
  const reviewRequestId = await waitFor(async () => {
    const { ratings } = (await sender.call('GET', `/ratings?limit=100`)).body as { ratings: Array<{ reviewRequestId: string; externalId: string | null }> };
    return ratings.find((r) => r.externalId === `order-${options.email}`)?.reviewRequestId;
  }, { what: 'the rating in the inbox' });
  return { cascadeId: started.body.id, token: path.split('/r/')[1], reviewRequestId };
}
