import { requestFingerprint } from '@rrs/idempotency';
import { registry } from '@rrs/runtime';
import { openApiChecker, type OpenApiChecker } from '@rrs/testkit';
import { z } from 'zod';
import { defineRoute, type HandlerContext, type Route } from '../src/http/route';
import { principal, rawRequest, serveApp, tableAuthenticator, widgetRoutes, type TestGateway } from './support';

/**
 * The request pipeline of the public API, on routes defined here: what reaches a handler, and every
 * refusal before it (with its problem+json body, checked against the generated OpenAPI document).
 */
describe('gateway request pipeline', () => {
  const calls: HandlerContext<unknown, unknown, unknown>[] = [];
  const routes = widgetRoutes(calls);

  const keys = {
    full: principal(),
    readOnly: principal({}, ['cascades:read']),
    trial: principal({ plan: 'trial' }),
    unconfirmed: principal({ emailConfirmed: false }),
  };
  let gw: TestGateway;
  let api: OpenApiChecker;

  beforeAll(async () => {
    gw = await serveApp({ routes, authenticate: tableAuthenticator(Object.fromEntries(Object.entries(keys).map(([k, p]) => [`key_${k}`, p]))) });
    api = await openApiChecker(`${gw.base}/api/v1/openapi.json`);
  });
  afterAll(() => gw.close());
  beforeEach(() => {
    calls.length = 0;
  });

  const post = (body: unknown, headers: Record<string, string> = {}, key = 'key_full') =>
    api.fetch(`${gw.base}/api/v1/widgets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const valid = { locationId: 'loc_1', recipients: [{ email: 'ann@example.com' }] };

  function expectProblem(res: { status: number; headers: Headers; body: unknown }, status: number, code: string) {
    expect({ status: res.status, code: (res.body as { code?: string }).code }).toEqual({ status, code });
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect((res.body as { requestId: string }).requestId).toBe(res.headers.get('x-request-id'));
    expect((res.body as { type: string }).type).toBe(`https://reviews.acme.test/docs#error-${code}`);
    expect(calls).toHaveLength(0);
  }

  it('hands validated values, the principal and gRPC metadata to the handler', async () => {
    const res = await post({ ...valid, extra: 'ignored' }, { 'x-request-id': 'req-1' });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ id: 'w_1', queued: 1 });
    expect(res.headers.get('idempotent-replayed')).toBeNull();
    expect(calls).toHaveLength(1);
    expect(calls[0].body).toEqual({ locationId: 'loc_1', send: false, recipients: [{ email: 'ann@example.com' }] });
    expect(calls[0].principal.organization.id).toBe('org_1');
    expect(calls[0].idempotency).toBeUndefined();
    expect(calls[0].metadata).toEqual({ 'x-request-id': 'req-1' });
  });

  it('parses no query for a route without a query schema: its handler gets none', async () => {
    const res = await api.fetch(`${gw.base}/api/v1/widgets?limit=3&x=1`, {
      method: 'POST',
      headers: { authorization: 'Bearer key_full', 'content-type': 'application/json' },
      body: JSON.stringify(valid),
    });
    expect(res.status).toBe(202);
    expect(calls).toHaveLength(1);
    expect(calls[0].query).toBeUndefined();
  });

  it('writes the JSON answer with its type and length; HEAD has the same headers and no body; 204 has none', async () => {
    const url = `${gw.base}/api/v1/widgets/w_7?limit=3`;
    const headers = { authorization: 'Bearer key_full' };
    const get = await fetch(url, { headers });
    const text = await get.text();
    expect([get.status, JSON.parse(text)]).toEqual([200, { id: 'w_7', limit: 3 }]);
    expect(get.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(get.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
    expect(get.headers.get('ratelimit')).toMatch(/^"standard";r=\d+;t=\d+$/);
    const head = await fetch(url, { method: 'HEAD', headers });
    expect([head.status, await head.text()]).toEqual([200, '']);
    expect(head.headers.get('content-length')).toBe(get.headers.get('content-length'));
    expect(head.headers.get('content-type')).toBe('application/json; charset=utf-8');
    // No ETag or Last-Modified is ever set, so only `If-None-Match: *` makes a GET fresh (304, no body).
    // Sent raw: fetch adds `Cache-Control: no-cache` to a conditional request, which makes it stale.
    const conditional = (match: string) => rawRequest(gw.base, `GET /api/v1/widgets/w_7 HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer key_full\r\nIf-None-Match: ${match}\r\nConnection: close\r\n\r\n`);
    const fresh = await conditional('*');
    expect([fresh.status, fresh.body, fresh.headers['content-type']]).toEqual([304, '', undefined]);
    expect((await conditional('"abc"')).status).toBe(200);
    const deleted = await fetch(`${gw.base}/api/v1/widgets/w_7`, { method: 'DELETE', headers });
    expect([deleted.status, await deleted.text(), deleted.headers.get('content-type')]).toEqual([204, '', null]);
  });

  it('lists every offending field of a 400 as a JSON pointer', async () => {
    const recipients = [{ email: 'a@example.com' }, { email: 'b@example.com' }, { email: 'c@example.com' }, { email: 'not-an-email' }];
    const res = await post({ locationId: 5, recipients });
    expectProblem(res, 400, 'invalid_request');
    const errors = (res.body as { errors: { pointer: string; detail: string }[] }).errors;
    expect(errors.map((e) => e.pointer).sort()).toEqual(['/locationId', '/recipients/3/email']);
    expect(errors.every((e) => e.detail.length > 0)).toBe(true);
  });

  it('reports the array bounds and a missing body', async () => {
    const tooMany = await post({ locationId: 'l', recipients: Array.from({ length: 6 }, () => ({})) });
    expectProblem(tooMany, 400, 'invalid_request');
    expect((tooMany.body as { errors: { pointer: string }[] }).errors).toEqual([expect.objectContaining({ pointer: '/recipients' })]);
    const none = await api.fetch(`${gw.base}/api/v1/widgets`, { method: 'POST', headers: { authorization: 'Bearer key_full' } });
    expectProblem(none, 400, 'invalid_request');
    expect((none.body as { errors: unknown[] }).errors).toEqual([{ pointer: '', detail: 'a JSON body is required' }]);
  });

  it.each([
    ['malformed JSON', '{"locationId": ', 'application/json', 400, 'malformed_json'],
    ['a JSON scalar', '"text"', 'application/json', 400, 'malformed_json'],
    ['a form body', 'locationId=1', 'application/x-www-form-urlencoded', 415, 'unsupported_media_type'],
    ['text/plain JSON', JSON.stringify(valid), 'text/plain', 415, 'unsupported_media_type'],
    ['a non-UTF-8 charset', JSON.stringify(valid), 'application/json; charset=latin1', 415, 'unsupported_media_type'],
  ])('refuses %s', async (_label, body, type, status, code) => {
    expectProblem(await post(body, { 'content-type': type }), status, code);
  });

  it('refuses a body over 1 MB with 413', async () => {
    const big = JSON.stringify({ ...valid, name: 'x'.repeat(1024 * 1024) });
    expectProblem(await post(big), 413, 'payload_too_large');
  });

  it('answers unknown routes 404 and wrong methods 405 with Allow', async () => {
    expectProblem(await api.fetch(`${gw.base}/api/v1/nothing/here`, { headers: { authorization: 'Bearer key_full' } }), 404, 'not_found');
    const res = await api.fetch(`${gw.base}/api/v1/widgets/w_1`, { method: 'PUT', headers: { authorization: 'Bearer key_full' } });
    expectProblem(res, 405, 'method_not_allowed');
    expect(res.headers.get('allow')).toBe('DELETE, GET, HEAD');
    const other = await api.fetch(`${gw.base}/api/v1/widgets`, { method: 'GET' });
    expectProblem(other, 405, 'method_not_allowed');
    expect(other.headers.get('allow')).toBe('POST');
  });

  it('answers 401 before anything else, and 403 naming the scope', async () => {
    expectProblem(await post(valid, { authorization: '' }), 401, 'missing_api_key');
    expectProblem(await post('{bad json', { authorization: 'Bearer nope' }), 401, 'invalid_api_key');
    expectProblem(await post(valid, { authorization: 'Token key_full' }), 401, 'invalid_api_key');
    const res = await post(valid, {}, 'key_readOnly');
    expectProblem(res, 403, 'insufficient_scope');
    expect(res.body).toMatchObject({ requiredScope: 'cascades:write' });
  });

  it('never checks the sending rule itself: a sending request of a trial or unconfirmed organization reaches the handler (the scheduler\'s admission answers it)', async () => {
    // One admission decision (issue 28): 402 plan_required / 409 email_not_confirmed come from the
    // handler's StartCascade or its dry run (matrix.test.ts, cascades.test.ts), never from the pipeline.
    for (const key of ['key_trial', 'key_unconfirmed']) {
      expect((await post({ ...valid, send: true }, {}, key)).status).toBe(202);
      expect((await post(valid, {}, key)).status).toBe(202);
    }
    expect(calls).toHaveLength(4);
  });

  it('accepts the Idempotency-Key quoted or bare, and passes key + fingerprint as gRPC metadata', async () => {
    await post(valid, { 'idempotency-key': 'order-42' });
    await post({ recipients: valid.recipients, locationId: 'loc_1' }, { 'idempotency-key': '"order-42"' });
    await post({ ...valid, locationId: 'loc_2' }, { 'idempotency-key': '"order-\\"42\\""' });
    const fp = requestFingerprint('POST', '/widgets', valid);
    expect(calls.map((c) => c.idempotency)).toEqual([
      { key: 'order-42', fingerprint: fp },
      { key: 'order-42', fingerprint: fp },
      { key: 'order-"42"', fingerprint: requestFingerprint('POST', '/widgets', { ...valid, locationId: 'loc_2' }) },
    ]);
    expect(calls[0].metadata).toMatchObject({ 'idempotency-key': 'order-42', 'idempotency-fingerprint': fp });
  });

  it.each([
    ['empty', '""'],
    ['too long', 'k'.repeat(256)],
    ['an unescaped inner quote', '"a"b"'],
    ['only spaces inside quotes', '"  "'],
  ])('refuses an Idempotency-Key that is %s', async (_label, key) => {
    const res = await post(valid, { 'idempotency-key': key });
    expectProblem(res, 400, 'invalid_idempotency_key');
    expect(res.body).toMatchObject({ errors: [{ header: 'Idempotency-Key' }] });
  });

  const rawPost = (extraHeader: Buffer) =>
    rawRequest(
      gw.base,
      Buffer.concat([
        Buffer.from(`POST /api/v1/widgets HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer key_full\r\nContent-Type: application/json\r\nContent-Length: ${JSON.stringify(valid).length}\r\n`),
        extraHeader,
        Buffer.from(`\r\nConnection: close\r\n\r\n${JSON.stringify(valid)}`),
      ]),
    );

  it('refuses a non-ASCII Idempotency-Key (fetch would not even send it)', async () => {
    const res = await rawPost(Buffer.from('Idempotency-Key: заказ-1', 'utf8'));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'invalid_idempotency_key' });
    expect(calls).toHaveLength(0);
  });

  it('answers a request node cannot parse (control character in a header) with problem+json too', async () => {
    const res = await rawPost(Buffer.from('Idempotency-Key: a\u0001b', 'latin1'));
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(res.body).toMatchObject({ status: 400, code: 'malformed_http', requestId: res.headers['x-request-id'] });
    expect(calls).toHaveLength(0);
  });

  it('accepts a 255-character key', async () => {
    expect((await post(valid, { 'idempotency-key': 'k'.repeat(255) })).status).toBe(202);
  });

  it('marks replayed responses with Idempotent-Replayed: true', async () => {
    const res = await post({ ...valid, locationId: 'replayed' }, { 'idempotency-key': 'again' });
    expect(res.status).toBe(202);
    expect(res.headers.get('idempotent-replayed')).toBe('true');
  });

  it('passes domain errors of the handler (as they come from a service) through as problems', async () => {
    const res = await post({ ...valid, locationId: 'missing' });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ code: 'not_found' });
    const conflict = await post({ ...valid, locationId: 'unconfigured' });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ code: 'channel_not_configured' });
  });

  it('answers every spelling of an API path as the mount at /api/v1 does, with the same metrics labels', async () => {
    const get = (path: string) => fetch(`${gw.base}${path}`, { headers: { authorization: 'Bearer key_full' } });
    // The docs page is its own route, whatever the case and with a trailing slash.
    for (const path of ['/api/v1/docs', '/api/v1/docs/', '/API/V1/DOCS']) {
      const res = await get(path);
      expect([path, res.status, res.headers.get('content-type')]).toEqual([path, 200, 'text/html; charset=utf-8']);
    }
    // The mount is case-insensitive, and the query is the route's.
    for (const path of ['/api/v1/widgets/w_7?limit=3', '/API/v1/widgets/w_7?limit=3', '/api/V1/widgets/w_7/?limit=3']) {
      const res = await get(path);
      expect([path, res.status, await res.json()]).toEqual([path, 200, { id: 'w_7', limit: 3 }]);
    }
    calls.length = 0;
    for (const [path, shown] of [
      ['/api/v1/nothing?x=1', '/api/v1/nothing'],
      ['/api/v1', '/api/v1/'],
      ['/api/v1//widgets', '/api/v1//widgets'],
    ]) {
      const res = await get(path);
      expect([path, res.status, await res.json()]).toEqual([path, 404, expect.objectContaining({ code: 'not_found', detail: `no route for GET ${shown}`, instance: path.split('?')[0] })]);
    }
    const metrics = await registry.metrics();
    expect(metrics).toMatch(/http_server_request_duration_seconds_count\{method="GET",route="\/api\/v1\/widgets\/\{id\}",status="200"\} [1-9]/);
    expect(metrics).toMatch(/http_server_request_duration_seconds_count\{method="GET",route="unmatched",status="404"\} [1-9]/);
    expect(metrics).toMatch(/http_server_request_duration_seconds_count\{method="GET",route="\/docs",status="200"\} [1-9]/);
  });

  it('validates path parameters (404) and query parameters (400)', async () => {
    const ok = await api.fetch(`${gw.base}/api/v1/widgets/w_7?limit=3`, { headers: { authorization: 'Bearer key_full' } });
    expect(ok.body).toEqual({ id: 'w_7', limit: 3 });
    calls.length = 0;
    expectProblem(await api.fetch(`${gw.base}/api/v1/widgets/nope`, { headers: { authorization: 'Bearer key_full' } }), 404, 'not_found');
    const bad = await api.fetch(`${gw.base}/api/v1/widgets/w_7?limit=99`, { headers: { authorization: 'Bearer key_full' } });
    expectProblem(bad, 400, 'invalid_request');
    expect((bad.body as { errors: unknown[] }).errors).toEqual([{ parameter: 'limit', detail: expect.any(String) }]);
  });

  it('answers a body-less success without a body', async () => {
    const res = await api.fetch(`${gw.base}/api/v1/widgets/w_1`, { method: 'DELETE', headers: { authorization: 'Bearer key_full' } });
    expect(res.status).toBe(204);
    expect(calls).toHaveLength(1);
  });

  it('documents each operation with its error codes as enums', async () => {
    const doc = api.doc as { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: { allOf: { properties?: { code?: { enum: string[] } } }[] } }> }> }>> };
    const codes = (path: string, method: string, status: number) => doc.paths[path][method].responses[status].content!['application/problem+json'].schema.allOf[1].properties!.code!.enum;
    expect(codes('/widgets', 'post', 400).sort()).toEqual(['invalid_idempotency_key', 'invalid_request', 'malformed_json']);
    expect(codes('/widgets', 'post', 409).sort()).toEqual(['channel_not_configured', 'email_not_confirmed', 'idempotency_key_in_use', 'idempotency_key_reused']);
    expect(codes('/widgets', 'post', 402)).toEqual(['plan_required']);
    expect(codes('/widgets/{id}', 'get', 401).sort()).toEqual(['invalid_api_key', 'missing_api_key']);
    expect(codes('/widgets/{id}', 'get', 429)).toEqual(['too_many_auth_failures', 'rate_limited']);
    // Not rate-limited: its only 429 is the per-address limit on invalid keys.
    expect(codes('/widgets/{id}', 'delete', 429)).toEqual(['too_many_auth_failures']);
    expect(doc.paths['/widgets'].post.responses['415']).toBeDefined();
  });
});

describe('routes that change at run time (RouteProvider)', () => {
  it('serves and documents the routes the provider has now', async () => {
    const sendRoute = (slug: string) =>
      defineRoute({
        method: 'POST',
        path: `/channels/${slug}/send`,
        operationId: `send${slug[0].toUpperCase()}${slug.slice(1)}`,
        summary: `Send through ${slug}`,
        tags: ['channels'],
        auth: 'apiKey',
        scope: 'cascades:write',
        rateLimited: false,
        sends: true,
        request: { body: z.object({ locationId: z.string() }) },
        responses: { 202: { description: 'Accepted', body: z.object({ channel: z.string() }) } },
        handler: async () => ({ body: { channel: slug.toUpperCase() } }),
      });
    let current: Route[] = [sendRoute('email')];
    const gw = await serveApp({ routes: [{ routes: () => current }], authenticate: tableAuthenticator({ k: principal() }) });
    try {
      const send = (slug: string) =>
        fetch(`${gw.base}/api/v1/channels/${slug}/send`, { method: 'POST', headers: { authorization: 'Bearer k', 'content-type': 'application/json' }, body: '{"locationId":"l"}' });
      const paths = async () => Object.keys(((await (await fetch(`${gw.base}/api/v1/openapi.json`)).json()) as { paths: object }).paths);
      expect((await send('email')).status).toBe(202);
      expect((await send('max')).status).toBe(404);
      expect(await paths()).toEqual(['/channels/email/send']);
      current = [sendRoute('email'), sendRoute('max')];
      expect((await send('max')).status).toBe(202);
      expect(await paths()).toEqual(['/channels/email/send', '/channels/max/send']);
    } finally {
      await gw.close();
    }
  });
});
