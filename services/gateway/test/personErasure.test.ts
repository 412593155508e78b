import { openApiChecker, type OpenApiChecker } from '@rrs/testkit';
import { startCascadeStack, STACK_ADMIN_TOKEN, type CascadeStack } from './cascadeStack';

/*
 * Erasure per person through the public API on the real stack (issue 35; docs/customer-respect.md,
 * "Erasure"): POST /api/v1/people/erase erases the person's contacts (contacts service) and the
 * scheduler's rows, GET /api/v1/people/erasures/{id} tells it is done; every refusal changes nothing.
 */
describe('public API: erasing a person', () => {
  let stack: CascadeStack;
  let api: OpenApiChecker;
  type Answer = { status: number; body: Record<string, any>; headers: Headers };
  const call = async (method: string, path: string, options: { body?: unknown; key?: string; idempotencyKey?: string } = {}): Promise<Answer> => {
    const res = await api.fetch(`${stack.base}/api/v1${path}`, {
      method,
      headers: {
        authorization: `Bearer ${options.key ?? stack.keys.paid}`,
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {}),
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    return { status: res.status, body: res.body as Record<string, any>, headers: res.headers };
  };
  /** Every trace of a needle in the contacts and scheduler schemas that the erasure covers. */
  const traces = async (needle: string) => {
    const { rows } = await stack.pool.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM contacts.contacts c WHERE c::text ILIKE '%' || $1 || '%')
            + (SELECT count(*) FROM scheduler.recipients r WHERE r::text ILIKE '%' || $1 || '%')
            + (SELECT count(*) FROM scheduler.review_requests q WHERE q::text ILIKE '%' || $1 || '%') AS n`,
      [needle],
    );
    return Number(rows[0].n);
  };
  const erasures = async () => Number((await stack.pool.query('SELECT count(*)::int AS n FROM scheduler.person_erasures')).rows[0].n);
  const addContact = async (body: Record<string, unknown>) => expect((await call('POST', '/contacts', { body })).status).toBeLessThan(300);

  beforeAll(async () => {
    stack = await startCascadeStack();
    api = await openApiChecker(`${stack.base}/api/v1/openapi.json`);
  }, 60_000);
  afterAll(() => stack.close());

  it('erases the contact and the recipient by email, phone or external id; the status is done; a replay answers the same', async () => {
    await addContact({ externalId: 'crm-olga', name: 'Olga Eraseme', email: 'Olga.Eraseme@example.com', phone: '+7 916 000-00-41', consentAt: '2026-05-01T12:00:00+03:00' });
    await addContact({ externalId: 'crm-keep', name: 'Kept Person', email: 'kept.person@example.com' });
    const started = await call('POST', '/cascades', { body: { locationId: stack.locationId, recipients: [{ name: 'Olga Eraseme', phone: '+79160000041' }, { name: 'Kept Person', email: 'kept.person@example.com' }] } });
    expect(started.status).toBe(202);
    for (const needle of ['Eraseme', '79160000041']) expect(await traces(needle)).toBeGreaterThan(0);

    const erased = await call('POST', '/people/erase', { body: { email: 'olga.eraseme@EXAMPLE.com' }, idempotencyKey: 'erase-olga-1' });
    expect(erased).toMatchObject({ status: 202, body: { id: expect.any(String), status: 'done' } });
    // The email found the contact, whose phone found the recipient.
    for (const needle of ['Eraseme', 'olga.eraseme', '79160000041', 'crm-olga']) expect({ needle, traces: await traces(needle) }).toEqual({ needle, traces: 0 });
    expect(await traces('kept.person')).toBeGreaterThan(0);

    const status = await call('GET', `/people/erasures/${erased.body.id}`);
    expect(status).toMatchObject({ status: 200, body: { id: erased.body.id, status: 'done', requestedAt: expect.any(String), doneAt: expect.any(String) } });
    const replay = await call('POST', '/people/erase', { body: { email: 'olga.eraseme@EXAMPLE.com' }, idempotencyKey: 'erase-olga-1' });
    expect(replay).toMatchObject({ status: 202, body: { id: erased.body.id, status: 'done' } });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    const evidence = await stack.pool.query(`SELECT actor FROM scheduler.lifecycle_actions WHERE request_id = $1`, [erased.body.id]);
    expect(evidence.rows).toEqual([{ actor: expect.stringMatching(/^api:/) }]);
    // Neither the request row nor the saved answer holds the person.
    const saved = await stack.pool.query(`SELECT count(*)::int AS n FROM scheduler.idempotency_keys WHERE position(convert_to('olga', 'UTF8') IN response) > 0 OR position(convert_to('79160000041', 'UTF8') IN response) > 0`);
    expect(saved.rows[0].n).toBe(0);

    const byExternalId = await call('POST', '/people/erase', { body: { contactExternalId: 'crm-keep' } });
    expect(byExternalId).toMatchObject({ status: 202, body: { status: 'done' } });
    // The external id found the contact, whose email found the recipient started without it.
    expect(await traces('kept.person')).toBe(0);
  });

  it('erases once when the same request comes several times at once (replays complete it under a lock)', async () => {
    await addContact({ externalId: 'crm-twice', name: 'Tanya Twice', email: 'tanya.twice@example.com' });
    const answers = await Promise.all(Array.from({ length: 4 }, () => call('POST', '/people/erase', { body: { email: 'tanya.twice@example.com' }, idempotencyKey: 'erase-tanya' })));
    const accepted = answers.filter((a) => a.status === 202);
    for (const refused of answers.filter((a) => a.status !== 202)) expect({ status: refused.status, code: refused.body.code }).toEqual({ status: 409, code: 'idempotency_key_in_use' });
    expect(new Set(accepted.map((a) => a.body.id)).size).toBe(1);
    expect(accepted.every((a) => a.body.status === 'done')).toBe(true);
    const evidence = await stack.pool.query('SELECT count(*)::int AS n FROM scheduler.lifecycle_actions WHERE request_id = $1', [accepted[0].body.id]);
    expect(evidence.rows[0].n).toBe(1);
    expect(await traces('tanya.twice')).toBe(0);
  });

  it('refuses no identifier, a malformed email or phone (400), a key without contacts:write (403), an unknown erasure (404): nothing changes', async () => {
    await addContact({ externalId: 'crm-stay', name: 'Stay Here', email: 'stay.here@example.com', phone: '+79160000042' });
    const before = { erasures: await erasures(), traces: await traces('stay.here') };
    const refusals: Array<[string, Answer, number, string, string?]> = [
      ['no identifier', await call('POST', '/people/erase', { body: {} }), 400, 'invalid_request', ''],
      ['blank identifiers', await call('POST', '/people/erase', { body: { email: ' ', phone: '' } }), 400, 'invalid_request', ''],
      ['malformed email', await call('POST', '/people/erase', { body: { email: 'stay.here-at-example.com', phone: '+79160000042' } }), 400, 'invalid_request', '/email'],
      ['malformed phone', await call('POST', '/people/erase', { body: { email: 'stay.here@example.com', phone: '12' } }), 400, 'invalid_request', '/phone'],
      ['unknown field', await call('POST', '/people/erase', { body: { email: 'stay.here@example.com', name: 'Stay' } }), 400, 'invalid_request'],
    ];
    const { secret } = await stack.contacts.directory.issueApiKey({ organizationId: stack.orgIds.paid, scopes: ['cascades:read'] });
    refusals.push(['wrong scope', await call('POST', '/people/erase', { body: { email: 'stay.here@example.com' }, key: secret }), 403, 'insufficient_scope']);
    refusals.push(['wrong scope (status)', await call('GET', `/people/erasures/0190e0e0-8888-7000-8000-000000000008`, { key: secret }), 403, 'insufficient_scope']);
    refusals.push(['unknown erasure', await call('GET', '/people/erasures/0190e0e0-8888-7000-8000-000000000008'), 404, 'not_found']);
    refusals.push(['malformed erasure id', await call('GET', '/people/erasures/not-an-id'), 404, 'not_found']);
    for (const [what, answer, status, code, pointer] of refusals) {
      expect({ what, status: answer.status, code: answer.body.code }).toEqual({ what, status, code });
      if (pointer !== undefined) expect({ what, pointers: (answer.body.errors ?? []).map((e: { pointer: string }) => e.pointer) }).toEqual({ what, pointers: [pointer] });
    }
    expect({ erasures: await erasures(), traces: await traces('stay.here') }).toEqual(before);

    // Another organization's erasure is 404 too, and erasing there touches nothing here.
    const mine = await call('POST', '/people/erase', { body: { email: 'nobody.here@example.com' } });
    expect(mine.status).toBe(202);
    const theirs = await call('GET', `/people/erasures/${mine.body.id}`, { key: stack.keys.other });
    expect({ status: theirs.status, code: theirs.body.code }).toEqual({ status: 404, code: 'not_found' });
    expect((await call('POST', '/people/erase', { body: { email: 'stay.here@example.com' }, key: stack.keys.other })).status).toBe(202);
    expect(await traces('stay.here')).toBe(before.traces);
  });

  it('the admin API erases in any organization, as `admin`; 400, 401 and 404 change nothing', async () => {
    const org = stack.orgIds.paid;
    const adminApi = await openApiChecker(`${stack.base}/admin/v1/openapi.json`);
    const admin = async (method: string, path: string, body?: unknown, token = STACK_ADMIN_TOKEN) => {
      const res = await adminApi.fetch(`${stack.base}/admin/v1${path}`, {
        method, headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: res.body as Record<string, any> };
    };
    await addContact({ externalId: 'crm-adminerased', name: 'Petr Adminerased', phone: '+79160000043' });
    const before = { erasures: await erasures(), traces: await traces('Adminerased') };
    const refused = [
      ['no identifier', await admin('POST', `/organizations/${org}/people/erase`, {}), 400, 'invalid_request'],
      ['malformed phone', await admin('POST', `/organizations/${org}/people/erase`, { phone: 'call me' }), 400, 'invalid_request'],
      ['bad token', await admin('POST', `/organizations/${org}/people/erase`, { phone: '+79160000043' }, 'adm_wrong_token_0123456789'), 401, 'invalid_admin_token'],
      ['unknown organization', await admin('POST', '/organizations/0190e0e0-1111-7000-8000-0000000000ff/people/erase', { phone: '+79160000043' }), 404, 'not_found'],
      ['unknown erasure', await admin('GET', `/organizations/${org}/people/erasures/0190e0e0-8888-7000-8000-000000000008`), 404, 'not_found'],
    ] as const;
    for (const [what, answer, status, code] of refused) expect({ what, status: answer.status, code: answer.body.code }).toEqual({ what, status, code });
    expect({ erasures: await erasures(), traces: await traces('Adminerased') }).toEqual(before);

    const erased = await admin('POST', `/organizations/${org}/people/erase`, { phone: '8 916 000-00-43' });
    expect(erased).toMatchObject({ status: 202, body: { status: 'done' } });
    expect(await traces('Adminerased')).toBe(0);
    expect(await admin('GET', `/organizations/${org}/people/erasures/${erased.body.id}`)).toMatchObject({ status: 200, body: { id: erased.body.id, status: 'done' } });
    expect((await admin('GET', `/organizations/${stack.orgIds.other}/people/erasures/${erased.body.id}`)).status).toBe(404);
    const evidence = await stack.pool.query('SELECT actor FROM scheduler.lifecycle_actions WHERE request_id = $1', [erased.body.id]);
    expect(evidence.rows).toEqual([{ actor: 'admin' }]);
  });

  it('the console: an owner or admin erases (CSRF checked), a viewer is 403 and nothing changes; every member reads the status', async () => {
    const org = stack.orgIds.paid;
    const accountApi = await openApiChecker(`${stack.base}/account/v1/openapi.json`);
    const signIn = async (role: 'owner' | 'admin' | 'viewer') => {
      const email = `${role}@erasure.example`;
      await stack.contacts.members.ensureMember({ organizationId: org, email, role, password: `${role}-password-1` });
      const res = await fetch(`${stack.base}/account/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: `${role}-password-1` }) });
      expect(res.status).toBe(200);
      return { cookie: res.headers.get('set-cookie')!.split(';')[0], csrf: ((await res.json()) as { csrfToken: string }).csrfToken };
    };
    const account = async (session: { cookie: string; csrf: string }, method: string, path: string, body?: unknown) => {
      const res = await accountApi.fetch(`${stack.base}/account/v1${path}`, {
        method, headers: { cookie: session.cookie, 'x-csrf-token': session.csrf, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: res.body as Record<string, any> };
    };
    const [owner, adminMember, viewer] = [await signIn('owner'), await signIn('admin'), await signIn('viewer')];
    await addContact({ externalId: 'crm-consoleerased', name: 'Vera Consoleerased', email: 'vera.consoleerased@example.com' });
    await addContact({ externalId: 'crm-consoleerased-2', name: 'Ivan Consoleerased', email: 'ivan.consoleerased@example.com' });
    const before = { erasures: await erasures(), vera: await traces('vera.consoleerased') };
    const refused = [
      ['viewer', await account(viewer, 'POST', '/people/erase', { email: 'vera.consoleerased@example.com' }), 403, 'read_only_role'],
      ['no CSRF token', await account({ ...owner, csrf: 'wrong' }, 'POST', '/people/erase', { email: 'vera.consoleerased@example.com' }), 403, 'invalid_csrf_token'],
      ['malformed email', await account(owner, 'POST', '/people/erase', { email: 'vera.consoleerased(at)example.com' }), 400, 'invalid_request'],
    ] as const;
    for (const [what, answer, status, code] of refused) expect({ what, status: answer.status, code: answer.body.code }).toEqual({ what, status, code });
    expect({ erasures: await erasures(), vera: await traces('vera.consoleerased') }).toEqual(before);

    const byOwner = await account(owner, 'POST', '/people/erase', { email: 'vera.consoleerased@example.com' });
    expect(byOwner).toMatchObject({ status: 202, body: { status: 'done' } });
    expect(await traces('vera.consoleerased')).toBe(0);
    const byAdmin = await account(adminMember, 'POST', '/people/erase', { contactExternalId: 'crm-consoleerased-2' });
    expect(byAdmin).toMatchObject({ status: 202, body: { status: 'done' } });
    expect(await traces('ivan.consoleerased')).toBe(0);
    expect(await account(viewer, 'GET', `/people/erasures/${byOwner.body.id}`)).toMatchObject({ status: 200, body: { id: byOwner.body.id, status: 'done' } });
    const evidence = await stack.pool.query('SELECT actor FROM scheduler.lifecycle_actions WHERE request_id = $1', [byOwner.body.id]);
    expect(evidence.rows).toEqual([{ actor: expect.stringMatching(/^member:/) }]);
  });
});
