import { OpenApiChecker, OpenApiMismatch } from '@rrs/testkit';
import type { GatewayClients } from '../src/clients';
import { renderDocsPage } from '../src/docsPage';
import { publicRoutes } from '../src/routes';
import { serverUrlFor } from '../src/http/openapi';
import type { HandlerContext } from '../src/http/route';
import { exampleProblems } from './documentExamples';
import { lint } from './redocly';
import { principal, serveApp, tableAuthenticator, widgetRoutes, type TestGateway } from './support';

describe('the OpenAPI document', () => {
  let publicGw: TestGateway;
  let localGw: TestGateway;
  let widgetGw: TestGateway;
  const calls: HandlerContext<unknown, unknown, unknown>[] = [];

  beforeAll(async () => {
    const authenticate = tableAuthenticator({ key_full: principal() });
    const entry = (key: string, contactField: string, position: number) => ({ key, slug: key.toLowerCase(), label: key, contactField, capabilities: ['send'], sender: 'test', announcedAt: new Date(), providers: [], position });
    // The spec's four channels, one deployed later (VIBER), and one whose contact field recipients do not have.
    const channelCatalog = {
      list: () => [entry('EMAIL', 'email', 1), entry('SMS', 'phone', 2), entry('MAX', 'phone', 3), entry('TELEGRAM', 'phone', 4), entry('VIBER', 'phone', 5), entry('PIGEON', 'address', 6)],
      version: 1,
    };
    publicGw = await serveApp({ routes: publicRoutes({ clients: {} as GatewayClients, publicBaseUrl: 'https://reviews.acme.test', channelCatalog }), authenticate });
    localGw = await serveApp({ routes: publicRoutes({ clients: {} as GatewayClients, publicBaseUrl: 'http://localhost:8080', channelCatalog }), authenticate, publicBaseUrl: 'http://localhost:8080' });
    widgetGw = await serveApp({ routes: widgetRoutes(calls), authenticate });
  });
  afterAll(async () => {
    await publicGw.close();
    await localGw.close();
    await widgetGw.close();
  });

  const docOf = async (gw: TestGateway) => {
    // A pooled keep-alive connection the server closes (its 5 s idle timeout, passed while a lint ran)
    // just as it is reused resets: that says nothing about the document, so it is asked once more.
    const url = `${gw.base}/api/v1/openapi.json`;
    const res = await fetch(url).catch((err: Error) => {
      if ((err.cause as { code?: string } | undefined)?.code !== 'ECONNRESET') throw err;
      return fetch(url);
    });
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

  it('served by a gateway on the default PUBLIC_BASE_URL (localhost) also passes: its server is relative', async () => {
    const doc = await docOf(localGw);
    expect(doc.servers).toEqual([{ url: '/api/v1', description: expect.any(String) }]);
    const result = await lint(doc);
    expect(result.problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
    expect(result.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);

  it('names the configured PUBLIC_BASE_URL as its server, unless that is a loopback address', async () => {
    expect((await docOf(publicGw)).servers).toEqual([{ url: 'https://reviews.acme.test/api/v1', description: expect.any(String) }]);
    expect(serverUrlFor('https://reviews.acme.test', '/api/v1')).toBe('https://reviews.acme.test/api/v1');
    expect(serverUrlFor('https://reviews.acme.test/', '/api/v1')).toBe('https://reviews.acme.test/api/v1');
    for (const local of ['http://localhost:8080', 'http://127.0.0.1:3000', 'http://[::1]:8080', 'http://LOCALHOST']) expect(serverUrlFor(local, '/api/v1')).toBe('/api/v1');
  });

  it('has an example for every request body, parameter, response and response header, each valid against its schema', async () => {
    for (const doc of [await docOf(publicGw), await docOf(localGw)]) expect(exampleProblems(doc)).toEqual([]);
  });

  it('the example check can fail: a wrong or missing example is reported', async () => {
    const doc = JSON.parse(JSON.stringify(await docOf(publicGw))) as { paths: Record<string, Record<string, { requestBody: { content: Record<string, { example?: unknown }> }; responses: Record<string, { content: Record<string, { example?: unknown }> }> }>> };
    doc.paths['/cascades'].post.requestBody.content['application/json'].example = { locationId: 'l', recipients: [] };
    delete doc.paths['/ping'].get.responses['200'].content['application/json'].example;
    (doc.paths['/ping'].get.responses['401'].content['application/problem+json'].example as { code: string }).code = 'plan_required';
    expect(exampleProblems(doc)).toEqual([
      expect.stringMatching(/^POST \/cascades request body: example does not match/),
      'GET /ping → 200 application/json: no example',
      expect.stringMatching(/^GET \/ping → 401 application\/problem\+json: example does not match/),
    ]);
  });

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

    it('refuses a success to a request the document refuses (the server would accept what the document forbids)', () => {
      const ok = { status: 202, contentType: 'application/json', body: { id: 'w', queued: 1 } };
      checker.check('POST', `${url}/widgets`, ok, { body: { locationId: 'l', recipients: [{ email: 'a@example.com' }] } });
      expect(() => checker.check('POST', `${url}/widgets`, ok, { body: { locationId: 'l', recipients: [] } })).toThrow(/accepted a request body the document refuses/);
      // Refusing it is what the document says: no mismatch.
      const refusal = { type: 'https://reviews.acme.test/docs#error-invalid_request', title: 'Bad Request', status: 400, code: 'invalid_request', detail: 'd', instance: '/x', requestId: 'r' };
      checker.check('POST', `${url}/widgets`, { status: 400, contentType: 'application/problem+json', body: refusal }, { body: { locationId: 'l', recipients: [] } });
      const read = { status: 200, contentType: 'application/json', body: { id: 'w_1', limit: 5 } };
      checker.check('GET', `${url}/widgets/w_1?limit=5`, read, {});
      expect(() => checker.check('GET', `${url}/widgets/w_1?limit=50`, read, {})).toThrow(/query parameter limit/);
    });

    it('refuses a header the document describes, on a response it is not documented for', () => {
      const rate = { 'x-request-id': 'r', ratelimit: '"standard";r=5;t=60', 'ratelimit-policy': '"standard";q=600;w=60' };
      const read = { status: 200, contentType: 'application/json', body: { id: 'w_1', limit: null } };
      expect(() => checker.check('GET', `${url}/widgets/w_1`, { ...read, headers: { ...rate, 'idempotent-replayed': 'true' } })).toThrow(/idempotent-replayed is not documented/);
      checker.check('POST', `${url}/widgets`, { status: 202, contentType: 'application/json', body: { id: 'w', queued: 1 }, headers: { 'x-request-id': 'r', 'idempotent-replayed': 'true' } });
      const unauthorized = { type: 'https://reviews.acme.test/docs#error-missing_api_key', title: 'Unauthorized', status: 401, code: 'missing_api_key', detail: 'd', instance: '/x', requestId: 'r' };
      expect(() => checker.check('GET', `${url}/widgets/w_1`, { status: 401, contentType: 'application/problem+json', body: unauthorized, headers: rate })).toThrow(/ratelimit is not documented for response 401/);
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
