import { startScheduler } from '@rrs/cascade-scheduler';
import { generateApiKey, type RunningContacts } from '@rrs/contacts';
import { busV1, contactsV1, schedulerV1, SCOPES, sendingRefusal } from '@rrs/proto';
import { UnavailableError, createGrpcClient, createPool, type Pool } from '@rrs/runtime';
import { createTestBus, openApiChecker, type OpenApiChecker, type TestBus } from '@rrs/testkit';
import type { GatewayClients } from '../src/clients';
import { publicRoutes } from '../src/routes';
import { STATUS_TITLES } from '../src/http/errorCodes';
import { currentRoutes, type Route, type RouteExample } from '../src/http/route';
import { startDirectoryStack, type DirectoryStack } from './directoryStack';

/**
 * Every public route in the registry × every way a request can be refused before it does anything:
 * no key, a bad key, a revoked key, a key without the route's scope, a trial plan (sending routes), an
 * unconfirmed account email (sending routes). Each must give its exact status and code, and nothing may
 * be created or sent. The gateway's own refusals (401, 403) make no call to any service behind it (other
 * than the key lookup). The sending rule is not the gateway's (issue 28, "one door"): a sending route's
 * only call is the scheduler's admission (StartCascade, or its dry run for POST /contacts), which refuses
 * (402/409) before anything is written — the last test finds no row in either service.
 * New routes are covered as soon as they are in `publicRoutes`.
 */

/**
 * Requests that send, for routes whose `sends` depends on the body and whose own `example` does not
 * send. A route can carry this itself as `sendingExample`; this table covers routes written before that.
 */
const SENDING_EXAMPLES: Record<string, RouteExample> = {};

/**
 * The spec's overview and method reference: scope (Permission column), whether 429 is listed, whether the
 * method sends, and the error statuses it lists. Decisions where the spec is silent: MAX and TELEGRAM
 * sends need `cascades:write` like the other channel sends.
 */
const SPEC: Record<string, { scope: string | null; rateLimited: boolean; sends: boolean | 'startCascade'; errors: number[] }> = {
  'GET /ping': { scope: null, rateLimited: true, sends: false, errors: [401, 429] },
  'GET /channels': { scope: null, rateLimited: true, sends: false, errors: [401, 429] },
  'GET /locations': { scope: 'locations:read', rateLimited: true, sends: false, errors: [401, 403, 429] },
  'POST /contacts': { scope: 'contacts:write', rateLimited: true, sends: 'startCascade', errors: [400, 401, 402, 403, 404, 409, 429] },
  'GET /flows': { scope: 'cascades:read', rateLimited: true, sends: false, errors: [401, 403, 429] },
  'POST /cascades': { scope: 'cascades:write', rateLimited: true, sends: true, errors: [400, 401, 402, 403, 404, 409, 429] },
  'GET /cascades/{id}': { scope: 'cascades:read', rateLimited: true, sends: false, errors: [401, 403, 404, 429] },
  'POST /review-requests': { scope: 'review-requests:write', rateLimited: true, sends: false, errors: [400, 401, 403, 404, 429] },
  'POST /channels/email/send': { scope: 'cascades:write', rateLimited: true, sends: true, errors: [400, 401, 402, 403, 404, 409, 429] },
  'POST /channels/sms/send': { scope: 'cascades:write', rateLimited: true, sends: true, errors: [400, 401, 402, 403, 404, 409, 429] },
  'POST /channels/max/send': { scope: 'cascades:write', rateLimited: false, sends: true, errors: [400, 401, 402, 403, 404, 409] },
  'POST /channels/telegram/send': { scope: 'cascades:write', rateLimited: false, sends: true, errors: [400, 401, 402, 403, 404, 409] },
};

type CallLog = string[];

/** The real services a call may reach: the key lookup (contacts) and the admission (the scheduler's StartCascade). */
interface RealClients {
  contacts?: GatewayClients['contacts'];
  scheduler?: GatewayClients['scheduler'];
}

/**
 * Clients that log every call except the key lookup. The key lookup goes to the real contacts service
 * and StartCascade (the one admission decision) to the real scheduler; any other call fails with 503
 * after being logged (a refused request must not make one). Covers every client GatewayClients has,
 * including ones added later.
 */
function recordingClients(real: RealClients, log: CallLog): GatewayClients {
  const wrap = (service: string) =>
    new Proxy({} as never, {
      get(_t, method: string) {
        return async (...args: unknown[]) => {
          if (service === 'contacts' && method === 'authenticate') {
            return (real.contacts!.authenticate as (...a: unknown[]) => unknown)(...args);
          }
          log.push(`${service}.${method}`);
          if (service === 'scheduler' && method === 'startCascade') return (real.scheduler!.startCascade as (...a: unknown[]) => unknown)(...args);
          throw new UnavailableError(`${service}.${method} is not reachable in the matrix test`);
        };
      },
    });
  return new Proxy({} as GatewayClients, { get: (_t, service: string) => wrap(service) });
}

const calls: CallLog = [];
const realClients: RealClients = {};
const clients = recordingClients(realClients, calls);
/** A fixed catalog of the spec's four channels, so their run-time send routes are in the matrix too. */
const channelEntry = (key: string, contactField: string, position: number): busV1.ChannelCatalogEntry => ({
  key,
  slug: key.toLowerCase(),
  label: key,
  contactField,
  capabilities: ['send'],
  sender: `channel-${key.toLowerCase()}`,
  announcedAt: new Date(),
  providers: [],
  position,
});
const entries = [channelEntry('EMAIL', 'email', 1), channelEntry('SMS', 'phone', 2), channelEntry('MAX', 'phone', 3), channelEntry('TELEGRAM', 'phone', 4)];
const channelCatalog = { list: () => entries, version: 1 };
const routes: Route[] = currentRoutes(publicRoutes({ clients, publicBaseUrl: 'http://localhost', channelCatalog }));

function requestOf(route: Route, example = route.example) {
  let path = route.path;
  for (const seg of route.segments) if (seg.startsWith('{')) path = path.replace(seg, encodeURIComponent(example?.params?.[seg.slice(1, -1)] ?? 'id_1'));
  const query = example?.query ? `?${new URLSearchParams(example.query).toString()}` : '';
  return { path: `/api/v1${path}${query}`, body: route.request.body ? JSON.stringify(example?.body ?? {}) : undefined };
}

function sendingExample(route: Route): Route['example'] | undefined {
  if (!route.sends) return undefined;
  if (route.sends === true) return route.example;
  const candidates = [route.sendingExample, route.example, SENDING_EXAMPLES[route.operationId]];
  for (const c of candidates) {
    if (!c || !route.request.body) continue;
    const parsed = route.request.body.safeParse(c.body);
    if (parsed.success && route.sends({ body: parsed.data, params: c.params ?? {}, query: c.query ?? {} })) return c;
  }
  throw new Error(`route ${route.operationId}: its sends() depends on the request, but no example sends; give it a sendingExample`);
}

describe('auth and plan matrix over every public route', () => {
  let stack: DirectoryStack;
  let contacts: RunningContacts;
  let tb: TestBus;
  let schedulerPool: Pool;
  let base: string;
  let api: OpenApiChecker;
  const keys: Record<string, string> = {};
  const orgIds: string[] = [];
  /** The calls the current test's request may make (none, or the scheduler's admission). */
  let allowedCalls: string[] = [];

  beforeAll(async () => {
    // Behind this gateway only the key lookup and the scheduler's admission answer (recordingClients).
    // Every route gets bad keys from this one address: the per-address limit (addressLimits.test.ts) is raised out of the way.
    const lenient = { failures: 100_000, windowSeconds: 60, blockSeconds: 1 };
    stack = await startDirectoryStack('matrix-test', { rateLimits: { windowSeconds: 60, perPlan: { trial: 100_000, standard: 100_000, pro: 100_000 } }, addressFailureRules: { apiKeyAuth: lenient, linkToken: lenient } }, { clients, channelCatalog });
    ({ contacts, base } = stack);
    const contactsAddress = `127.0.0.1:${contacts.grpcPort}`;
    const c = createGrpcClient(contactsV1.ContactsServiceClient, contactsAddress);
    stack.ctx.lifecycle.onStop('matrix directory client', () => c.close());
    realClients.contacts = c.client;
    // The real scheduler (no dispatcher: nothing could be sent anyway), on the stack's database.
    tb = await createTestBus('memory');
    const scheduler = await startScheduler({ databaseUrl: stack.db.url, grpcHost: '127.0.0.1', grpcPort: 0, contactsAddress }, stack.ctx, { bus: tb.bus, noDispatcher: true });
    const s = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, `127.0.0.1:${scheduler.grpcPort}`);
    stack.ctx.lifecycle.onStop('matrix scheduler client', () => s.close());
    realClients.scheduler = s.client;
    schedulerPool = createPool({ url: stack.db.url, schema: 'scheduler' });
    api = await openApiChecker(`${base}/api/v1/openapi.json`);

    const d = contacts.directory;
    const paid = await d.createOrganization({ name: 'Paid', plan: 'standard', emailConfirmed: true, sendWindow: null, cooldownDays: 0 });
    const trial = await d.createOrganization({ name: 'Trial', plan: 'trial', emailConfirmed: true, sendWindow: null, cooldownDays: 0 });
    const unconfirmed = await d.createOrganization({ name: 'Unconfirmed', plan: 'standard', emailConfirmed: false, sendWindow: null, cooldownDays: 0 });
    orgIds.push(paid.id, trial.id, unconfirmed.id);
    const revoked = await d.issueApiKey({ organizationId: paid.id });
    await d.revokeApiKey(paid.id, revoked.apiKey.id);
    keys.revoked = revoked.secret;
    keys.trial = (await d.issueApiKey({ organizationId: trial.id })).secret;
    keys.unconfirmed = (await d.issueApiKey({ organizationId: unconfirmed.id })).secret;
    for (const scope of SCOPES) {
      keys[`without ${scope}`] = (await d.issueApiKey({ organizationId: paid.id, scopes: SCOPES.filter((s) => s !== scope) })).secret;
    }
  });

  afterAll(async () => {
    await schedulerPool.end();
    await stack.close();
    await tb.cleanup();
  });

  beforeEach(() => {
    calls.length = 0;
    allowedCalls = [];
  });

  afterEach(async () => {
    expect(calls).toEqual(allowedCalls);
  });

  const send = async (route: Route, authorization: string | undefined, example = route.example) => {
    const { path, body } = requestOf(route, example);
    const headers: Record<string, string> = {};
    if (authorization !== undefined) headers.authorization = authorization;
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (route.method === 'POST') headers['idempotency-key'] = `matrix-${route.operationId}`;
    const res = await api.fetch(`${base}${path}`, { method: route.method, headers, body });
    return { status: res.status, body: res.body as Record<string, unknown> };
  };

  it('covers at least the routes of the spec that exist so far', () => {
    const present = new Set(routes.map((r) => `${r.method} ${r.path}`));
    expect(present).toContain('GET /ping');
    for (const slug of ['email', 'sms', 'max', 'telegram']) expect(present).toContain(`POST /channels/${slug}/send`);
    expect(new Set(routes.map((r) => `${r.method} ${r.path}`)).size).toBe(routes.length);
  });

  describe.each(routes.filter((r) => SPEC[`${r.method} ${r.path}`]).map((r) => [`${r.method} ${r.path}`, r] as const))('%s follows the spec', (name, route) => {
    const spec = SPEC[name];
    it(`needs ${spec.scope ?? 'any valid key'}, ${spec.rateLimited ? 'is' : 'is not'} rate-limited, documents ${spec.errors.join(', ')}`, () => {
      expect(route.scope).toBe(spec.scope);
      expect(route.rateLimited).toBe(spec.rateLimited);
      expect(Boolean(route.sends)).toBe(spec.sends !== false);
      if (spec.sends === 'startCascade') expect(typeof route.sends).toBe('function');
      type Op = { responses: Record<string, { content?: Record<string, { schema: { allOf: Array<{ properties?: { code?: { enum?: string[] } } }> } }> }> };
      const op = (api.doc.paths as Record<string, Record<string, Op>>)[route.path][route.method.toLowerCase()];
      const documented = Object.keys(op.responses).map(Number);
      for (const status of spec.errors) expect(documented).toContain(status);
      // Not rate-limited: no request quota. Every route still refuses an address that sent too many
      // invalid keys, and one that creates recipients has the organization's recipient budget
      // (issue 13, docs/security.md): those are its only 429s.
      const codes429 = op.responses['429']?.content?.['application/problem+json'].schema.allOf[1].properties?.code?.enum ?? [];
      if (!spec.rateLimited) expect(codes429).toEqual(['too_many_auth_failures', ...(route.recipients ? ['recipient_quota_exceeded'] : [])]);
    });
  });

  describe.each(routes.map((r) => [`${r.method} ${r.path}`, r] as const))('%s', (_name, route) => {
    it('no key → 401 missing_api_key', async () => {
      expect(await send(route, undefined)).toMatchObject({ status: 401, body: { code: 'missing_api_key' } });
    });

    it('a bad key → 401 invalid_api_key', async () => {
      expect(await send(route, 'Bearer not-a-key')).toMatchObject({ status: 401, body: { code: 'invalid_api_key' } });
      expect(await send(route, `Bearer ${generateApiKey()}`)).toMatchObject({ status: 401, body: { code: 'invalid_api_key' } });
      expect(await send(route, `Basic ${keys.trial}`)).toMatchObject({ status: 401, body: { code: 'invalid_api_key' } });
    });

    it('a revoked key → 401 invalid_api_key', async () => {
      expect(await send(route, `Bearer ${keys.revoked}`)).toMatchObject({ status: 401, body: { code: 'invalid_api_key' } });
    });

    if (route.scope) {
      const scope = route.scope;
      it(`a key without ${scope} → 403 insufficient_scope`, async () => {
        expect(await send(route, `Bearer ${keys[`without ${scope}`]}`)).toMatchObject({ status: 403, body: { code: 'insufficient_scope', requiredScope: scope } });
      });
    } else {
      it('needs no scope: a key with any scope set passes the scope check', async () => {
        const res = await send(route, `Bearer ${keys[`without ${SCOPES[0]}`]}`);
        expect([401, 402, 403]).not.toContain(res.status);
        calls.length = 0;
      });
    }

    if (route.sends) {
      // The gateway does not re-check: its one call is the scheduler's admission, which refuses with the
      // problem the gateway answered itself before (the same status, code, title and detail, no other member).
      const refused = async (key: string, account: { plan: string; emailConfirmed: boolean }) => {
        allowedCalls = ['scheduler.startCascade'];
        const res = await send(route, `Bearer ${key}`, sendingExample(route));
        const rule = sendingRefusal(account)!;
        const status = rule.kind === 'payment_required' ? 402 : 409;
        expect(res).toEqual({
          status,
          body: {
            type: `http://localhost/docs#error-${rule.code}`, title: STATUS_TITLES[status], status, code: rule.code,
            detail: rule.message, instance: requestOf(route, sendingExample(route)).path.split('?')[0], requestId: expect.any(String),
          },
        });
      };
      it('a trial plan → 402 plan_required, answered by the scheduler\'s admission alone', async () => {
        await refused(keys.trial, { plan: 'trial', emailConfirmed: true });
      });
      it('an unconfirmed account email → 409 email_not_confirmed, answered by the scheduler\'s admission alone', async () => {
        await refused(keys.unconfirmed, { plan: 'standard', emailConfirmed: false });
      });
    }
  });

  it('created nothing in the directory, nor in the scheduler (no cascade, step, message, budget or Idempotency-Key record)', async () => {
    for (const id of orgIds) expect(await contacts.contacts.count(id)).toBe(0);
    const tables = ['cascades', 'recipients', 'recipient_steps', 'review_requests', 'outbox', 'recipient_budgets', 'idempotency_keys'];
    const counts = Object.fromEntries(await Promise.all(tables.map(async (t) => [t, Number((await schedulerPool.query<{ n: string }>(`SELECT count(*) AS n FROM ${t}`)).rows[0].n)] as const)));
    expect(counts).toEqual(Object.fromEntries(tables.map((t) => [t, 0])));
  });
});
