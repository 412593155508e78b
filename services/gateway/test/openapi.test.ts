import { OpenApiChecker, OpenApiMismatch } from '@rrs/testkit';
import type { GatewayClients } from '../src/clients';
import { publicRoutes } from '../src/routes';
import type { HandlerContext } from '../src/http/route';
import { lint } from './redocly';
import { principal, serveApp, tableAuthenticator, widgetRoutes, type TestGateway } from './support';

describe('the OpenAPI document', () => {
  let publicGw: TestGateway;
  let widgetGw: TestGateway;
  const calls: HandlerContext<unknown, unknown, unknown>[] = [];

  beforeAll(async () => {
    const authenticate = tableAuthenticator({ key_full: principal() });
    const entry = (key: string, contactField: string, position: number) => ({ key, slug: key.toLowerCase(), label: key, contactField, capabilities: ['send'], sender: 'test', announcedAt: new Date(), position });
    const channelCatalog = { list: () => [entry('EMAIL', 'email', 1), entry('SMS', 'phone', 2), entry('MAX', 'phone', 3), entry('TELEGRAM', 'phone', 4)], version: 1 };
    publicGw = await serveApp({ routes: publicRoutes({ clients: {} as GatewayClients, publicBaseUrl: 'https://reviews.acme.test', channelCatalog }), authenticate });
    widgetGw = await serveApp({ routes: widgetRoutes(calls), authenticate });
  });
  afterAll(async () => {
    await publicGw.close();
    await widgetGw.close();
  });

  const docOf = async (gw: TestGateway) => {
    const res = await fetch(`${gw.base}/api/v1/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    return (await res.json()) as Record<string, unknown>;
  };

  it('of the public API passes redocly lint (recommended-strict) with no problem', async () => {
    const doc = await docOf(publicGw);
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths as object)).toEqual(expect.arrayContaining(['/ping', '/channels', '/channels/email/send', '/channels/telegram/send', '/contacts', '/cascades']));
    const result = await lint(doc);
    expect(result.problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
    expect(result.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);

  it('with bodies, parameters, idempotency and own errors also passes', async () => {
    const result = await lint(await docOf(widgetGw));
    expect(result.problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
  }, 60_000);

  it('lint does report a broken document (the check can fail)', async () => {
    const doc = await docOf(widgetGw);
    const paths = doc.paths as Record<string, Record<string, Record<string, unknown>>>;
    delete paths['/widgets'].post.operationId;
    (paths['/widgets'].post.responses as Record<string, unknown>)['202'] = { content: {} };
    const result = await lint(doc);
    expect(result.totals.errors).toBeGreaterThan(0);
  }, 60_000);

  it('is served without a key, and the docs page renders it self-contained', async () => {
    const res = await fetch(`${widgetGw.base}/docs`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expect(res.headers.get('content-security-policy')).toContain("default-src 'none'");
    const html = await res.text();
    for (const id of ['createWidget', 'getWidget', 'deleteWidget']) expect(html).toContain(`id="${id}"`);
    expect(html).toContain('channel_not_configured');
    expect(html).toContain('<code>cascades:write</code>');
    expect(html).not.toMatch(/<script|<link|src=/i);
    expect(html).toContain('href="/api/v1/openapi.json"');
    // Every problem `type` resolves to a row of this page.
    for (const code of ['channel_not_configured', 'rate_limited', 'not_found']) expect(html).toContain(`id="error-${code}"`);
  });

  describe('response checker (testkit)', () => {
    let checker: OpenApiChecker;
    beforeAll(async () => {
      checker = new OpenApiChecker(await docOf(widgetGw));
    });
    const url = 'https://reviews.acme.test/api/v1';

    it('accepts documented responses', () => {
      checker.check('POST', `${url}/widgets`, { status: 202, contentType: 'application/json', body: { id: 'w', queued: 1 } });
      checker.check('GET', `${url}/widgets/w_1?limit=2`, { status: 200, contentType: 'application/json; charset=utf-8', body: { id: 'w_1', limit: null } });
      checker.check('DELETE', `${url}/widgets/w_1`, { status: 204, body: undefined });
    });

    it.each([
      ['an undocumented status', 'POST', '/widgets', { status: 200, contentType: 'application/json', body: { id: 'w', queued: 1 } }],
      ['a field the schema does not have', 'POST', '/widgets', { status: 202, contentType: 'application/json', body: { id: 'w', queued: 1, organizationId: 'o' } }],
      ['a wrong type', 'POST', '/widgets', { status: 202, contentType: 'application/json', body: { id: 'w', queued: '1' } }],
      ['a wrong content type', 'POST', '/widgets', { status: 202, contentType: 'text/html', body: '<p>' }],
      ['an error code the operation does not list', 'DELETE', '/widgets/w_1', { status: 403, contentType: 'application/problem+json', body: { type: 'https://reviews.acme.test/docs#error-x', title: 'Forbidden', status: 403, code: 'plan_required', detail: 'd', instance: '/x', requestId: 'r' } }],
      ['a problem without requestId', 'POST', '/widgets', { status: 404, contentType: 'application/problem+json', body: { type: 'https://reviews.acme.test/docs#error-x', title: 'Not Found', status: 404, code: 'not_found', detail: 'd', instance: '/x' } }],
      ['a 200 on an unknown path', 'GET', '/nowhere', { status: 200, contentType: 'application/json', body: {} }],
      ['a body on a body-less response', 'DELETE', '/widgets/w_1', { status: 204, body: { x: 1 } }],
    ])('rejects %s', (_label, method, path, res) => {
      expect(() => checker.check(method, `${url}${path}`, res)).toThrow(OpenApiMismatch);
    });

    it('checks the headers the document requires', () => {
      const ok = { status: 200, contentType: 'application/json', body: { id: 'w_1', limit: null } };
      const rate = { 'x-request-id': 'r', ratelimit: '"standard";r=5;t=60', 'ratelimit-policy': '"standard";q=600;w=60' };
      checker.check('GET', `${url}/widgets/w_1`, { ...ok, headers: rate });
      expect(() => checker.check('GET', `${url}/widgets/w_1`, { ...ok, headers: { ...rate, 'x-request-id': undefined } })).toThrow(/X-Request-Id missing/);
      expect(() => checker.check('GET', `${url}/widgets/w_1`, { ...ok, headers: { ...rate, ratelimit: 'remaining=5' } })).toThrow(/header RateLimit/);
      const problem = { type: 'https://reviews.acme.test/docs#error-x', title: 'Too Many Requests', status: 429, code: 'rate_limited', detail: 'd', instance: '/x', requestId: 'r' };
      expect(() => checker.check('GET', `${url}/widgets/w_1`, { status: 429, contentType: 'application/problem+json', body: problem, headers: rate })).toThrow(/Retry-After missing/);
      checker.check('GET', `${url}/widgets/w_1`, { status: 429, contentType: 'application/problem+json', body: problem, headers: { ...rate, 'retry-after': '7' } });
    });
  });
});
