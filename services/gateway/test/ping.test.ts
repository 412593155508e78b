import type { RunningContacts } from '@rrs/contacts';
import { Health, startOpsServer } from '@rrs/runtime';
import { openApiChecker, type OpenApiChecker } from '@rrs/testkit';
import { startDirectoryStack, type DirectoryStack } from './directoryStack';

/** The walking skeleton: HTTP → gateway → gRPC → contacts → PostgreSQL, all real. */
describe('GET /api/v1/ping through gateway and contacts', () => {
  let stack: DirectoryStack;
  let contacts: RunningContacts;
  let base: string;
  let key = '';
  let orgId: string;
  let api: OpenApiChecker;

  beforeAll(async () => {
    stack = await startDirectoryStack('ping-test');
    ({ contacts, base } = stack);
    const org = await contacts.directory.createOrganization({ name: 'Acme Dental', plan: 'standard' });
    orgId = org.id;
    key = (await contacts.directory.issueApiKey({ organizationId: org.id })).secret;
    api = await openApiChecker(`${base}/api/v1/openapi.json`);
  });
  afterAll(() => stack.close());

  const ping = async (headers: Record<string, string> = {}) => {
    const res = await api.fetch(`${base}/api/v1/ping`, { headers });
    return { status: res.status, headers: res.headers, json: async () => res.body };
  };

  it('answers the organization and the key scopes for a valid key', async () => {
    const res = await ping({ authorization: `Bearer ${key}` });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({
      ok: true,
      organization: { id: orgId, name: 'Acme Dental' },
      scopes: ['locations:read', 'contacts:write', 'cascades:write', 'cascades:read', 'review-requests:write', 'webhooks:read', 'webhooks:write'],
    });
  });

  it.each([
    ['no Authorization header', {}, 'missing_api_key'],
    ['a non-Bearer scheme', { authorization: `Basic ${key}` }, 'invalid_api_key'],
    ['a malformed key', { authorization: 'Bearer not-a-key' }, 'invalid_api_key'],
    ['a well-formed unknown key', { authorization: 'Bearer rrs_000000000000000000000000000000000000' }, 'invalid_api_key'],
  ])('answers 401 problem+json for %s', async (_label, headers, code) => {
    const res = await ping(headers as Record<string, string>);
    expect(res.status).toBe(401);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ status: 401, code, instance: '/api/v1/ping' });
    expect(body.requestId).toBe(res.headers.get('x-request-id'));
    expect(JSON.stringify(body)).not.toContain(key);
  });

  it('keeps a sane caller request id', async () => {
    const res = await ping({ authorization: `Bearer ${key}`, 'x-request-id': 'crm-req-42' });
    expect(res.headers.get('x-request-id')).toBe('crm-req-42');
  });

  it('logs one JSON line per request with its request id, and never the key', async () => {
    await ping({ authorization: `Bearer ${key}`, 'x-request-id': 'crm-req-log' });
    const line = stack.ctx.logger.lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.requestId === 'crm-req-log' && l.msg === 'request');
    expect(line).toMatchObject({ level: 'info', method: 'GET', route: '/api/v1/ping', status: 200 });
    expect(stack.ctx.logger.lines.join('\n')).not.toContain(key);
  });

  it('answers unknown routes with a not_found problem', async () => {
    const res = await api.fetch(`${base}/api/v1/nope`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ code: 'not_found' });
  });

  it('serves the probes on its port and metrics on the ops port only (METRICS_PORT, served by runService)', async () => {
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ ok: true, checks: { 'contacts-postgres': 'ok' } });
    expect((await fetch(`${base}/metrics`)).status).toBe(404);
    const ops = await startOpsServer({ host: '127.0.0.1', port: 0, health: new Health(), logger: stack.ctx.logger });
    const metrics = await (await fetch(`http://127.0.0.1:${ops.port}/metrics`)).text();
    await ops.close();
    expect(metrics).toContain('http_server_request_duration_seconds_bucket');
    expect(metrics).toContain('grpc_server_handling_seconds_bucket{le="0.001",service="rrs.contacts.v1.ContactsService",method="Authenticate",code="OK"}');
  });
});
