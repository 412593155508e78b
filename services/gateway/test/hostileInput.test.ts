import { connect } from 'node:net';
import { startCascadeStack, type CascadeStack } from './cascadeStack';

/*
 * Input an attacker or a fuzzer sends: each is refused with a 4xx problem and a stable code, and
 * nothing is created (counted in the scheduler's schema before and after).
 */
describe('hostile input to the public API', () => {
  let stack: CascadeStack;

  beforeAll(async () => {
    stack = await startCascadeStack();
  });
  afterAll(async () => {
    await stack.close();
  });

  const count = async (table: string) => (await stack.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n;
  async function send(path: string, body: string, headers: Record<string, string> = {}) {
    const res = await fetch(`${stack.base}/api/v1${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${stack.keys.paid}`, 'content-type': 'application/json', ...headers },
      body,
    });
    return { status: res.status, type: res.headers.get('content-type'), body: (await res.json()) as { code?: string; errors?: Array<{ pointer: string }> } };
  }

  it.each([
    ['/cascades', () => ({ locationId: stack.locationId, channel: 'EMAIL', recipients: [{ name: 'A\u0000nna', email: 'anna@example.com' }] }), '/recipients/0/name'],
    ['/cascades', () => ({ locationId: stack.locationId, channel: 'EMAIL', recipients: [{ email: 'anna@example.com' }], externalId: 'x\u0000' }), '/externalId'],
    ['/review-requests', () => ({ locationId: stack.locationId, name: 'An\u0000na' }), '/name'],
  ])('refuses a NUL character in a text field of POST %s with 400 invalid_request naming the field, creating nothing', async (path, body, pointer) => {
    const before = [await count('cascades'), await count('review_requests')];
    const res = await send(path, JSON.stringify(body()));
    expect(res.status).toBe(400);
    expect(res.type).toMatch(/^application\/problem\+json/);
    expect(res.body.code).toBe('invalid_request');
    expect(res.body.errors?.map((e) => e.pointer)).toContain(pointer);
    expect([await count('cascades'), await count('review_requests')]).toEqual(before);
  });

  it.each([[{}], [{ 'idempotency-key': 'deep-1' }]])('refuses JSON nested thousands of levels deep with 400 malformed_json (headers %j), creating nothing', async (headers) => {
    const before = await count('cascades');
    const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`;
    const res = await send('/cascades', `{"locationId":"x","recipients":${deep}}`, headers);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('malformed_json');
    expect(await count('cascades')).toBe(before);
  });

  it('refuses a request carrying two Authorization headers, even when the first one is a valid key', async () => {
    const before = await count('cascades');
    // fetch and http.request merge repeated headers; a raw request sends two lines, as an attacker would.
    const url = new URL(stack.base);
    const body = JSON.stringify({ locationId: stack.locationId, channel: 'EMAIL', recipients: [{ email: 'two@example.com' }] });
    const raw = await new Promise<string>((resolve, reject) => {
      let answer = '';
      const socket = connect(Number(url.port), url.hostname, () =>
        socket.end(
          `POST /api/v1/cascades HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${stack.keys.paid}\r\nAuthorization: Bearer rrs_other\r\n` +
            `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        ),
      );
      socket.on('data', (chunk) => (answer += chunk));
      socket.on('end', () => resolve(answer));
      socket.on('error', reject);
    });
    const res = { status: Number(raw.split(' ')[1]), body: raw.slice(raw.indexOf('\r\n\r\n') + 4) };
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body).code).toBe('invalid_api_key');
    expect(await count('cascades')).toBe(before);
  });

  it('answers malformed, unknown and revoked keys with one and the same 401', async () => {
    const revoked = await stack.contacts.directory.issueApiKey({ organizationId: stack.orgIds.paid, name: 'old' });
    await stack.contacts.directory.revokeApiKey(stack.orgIds.paid, revoked.apiKey.id);
    const answers = [];
    for (const key of ['not-a-key', 'rrs_' + 'A'.repeat(36), revoked.secret]) {
      const res = await fetch(`${stack.base}/api/v1/locations`, { headers: { authorization: `Bearer ${key}` } });
      const body = (await res.json()) as { code: string; detail: string; title: string };
      answers.push({ status: res.status, code: body.code, detail: body.detail, title: body.title });
    }
    expect(answers[0]).toMatchObject({ status: 401, code: 'invalid_api_key' });
    expect(answers[1]).toEqual(answers[0]);
    expect(answers[2]).toEqual(answers[0]);
  });
});
