import { openApiChecker, type OpenApiChecker } from '@rrs/testkit';
import { startCascadeStack, type CascadeStack } from './cascadeStack';

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
});
