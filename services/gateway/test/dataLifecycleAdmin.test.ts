import { AddressHasher, DEVELOPMENT_PERSON_HASH_KEY, erasePerson } from '@rrs/cascade-scheduler';
import { startCascadeStack, STACK_ADMIN_TOKEN, type CascadeStack } from './cascadeStack';

/*
 * The data lifecycle through the admin API on the real stack (docs/customer-respect.md, "Data
 * lifecycle"): the organization's retention of personal data, validated, and the evidence of erasures.
 */
describe('admin API: data retention and the evidence of erasures', () => {
  let stack: CascadeStack;
  type Answer = { status: number; body: Record<string, any> };
  const admin = async (method: string, path: string, body?: unknown, token = STACK_ADMIN_TOKEN): Promise<Answer> => {
    const res = await fetch(`${stack.base}/admin/v1${path}`, {
      method, headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : {} };
  };

  beforeAll(async () => {
    stack = await startCascadeStack();
  }, 60_000);
  afterAll(() => stack.close());

  it('personalDataRetentionDays: 365 by default, set from 30 to 3650; anything else is 400 and changes nothing', async () => {
    const org = stack.orgIds.paid;
    expect(await admin('GET', `/organizations/${org}/data-retention`)).toEqual({ status: 200, body: { personalDataRetentionDays: 365 } });
    expect(await admin('PUT', `/organizations/${org}/data-retention`, { personalDataRetentionDays: 180 })).toEqual({ status: 200, body: { personalDataRetentionDays: 180 } });
    for (const bad of [{ personalDataRetentionDays: 29 }, { personalDataRetentionDays: 3651 }, { personalDataRetentionDays: 90.5 }, { personalDataRetentionDays: '90' }, {}, { personalDataRetentionDays: 90, extra: 1 }]) {
      const res = await admin('PUT', `/organizations/${org}/data-retention`, bad);
      expect({ bad, status: res.status, code: res.body.code }).toEqual({ bad, status: 400, code: 'invalid_request' });
    }
    const unauthorized = await admin('PUT', `/organizations/${org}/data-retention`, { personalDataRetentionDays: 30 }, 'adm_wrong_token_0123456789');
    expect(unauthorized.status).toBe(401);
    expect(await admin('GET', `/organizations/${org}/data-retention`)).toEqual({ status: 200, body: { personalDataRetentionDays: 180 } });
    const { rows } = await stack.pool.query('SELECT personal_data_retention_days FROM organization_settings WHERE organization_id = $1', [org]);
    expect(rows).toEqual([{ personal_data_retention_days: 180 }]);
  });

  it('lifecycle-actions: an erasure is listed with the keyed hashes, who asked and what was done, by pages', async () => {
    const org = stack.orgIds.paid;
    const hasher = new AddressHasher(DEVELOPMENT_PERSON_HASH_KEY);
    const res = await fetch(`${stack.base}/api/v1/cascades`, {
      method: 'POST', headers: { authorization: `Bearer ${stack.keys.paid}`, 'content-type': 'application/json' },
      body: JSON.stringify({ locationId: stack.locationId, recipients: [{ name: 'Zoya Gone', email: 'zoya.gone@example.com' }] }),
    });
    expect(res.status).toBe(202);
    await erasePerson(stack.pool, hasher, { organizationId: org, requestId: 'erasure-admin-1', actor: 'admin', email: 'zoya.gone@example.com', phone: '', contactExternalId: '' });
    await erasePerson(stack.pool, hasher, { organizationId: org, requestId: 'erasure-admin-2', actor: 'admin', email: 'nobody@example.com', phone: '', contactExternalId: '' });
    const first = await admin('GET', `/organizations/${org}/lifecycle-actions?limit=1`);
    expect(first).toMatchObject({ status: 200, body: { actions: [{ kind: 'erasure', requestId: 'erasure-admin-1', actor: 'admin', subjectHashes: [hasher.hash('zoya.gone@example.com')], counts: { recipients: 1, review_requests: 1 } }] } });
    expect(JSON.stringify(first.body)).not.toContain('zoya');
    const second = await admin('GET', `/organizations/${org}/lifecycle-actions?limit=1&after=${first.body.nextAfter}`);
    expect(second).toMatchObject({ status: 200, body: { actions: [{ requestId: 'erasure-admin-2', counts: {} }], nextAfter: null } });
    expect((await admin('GET', `/organizations/${stack.orgIds.trial}/lifecycle-actions`)).body).toEqual({ actions: [], nextAfter: null });
    expect((await admin('GET', `/organizations/${org}/lifecycle-actions?limit=0`))).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
  });

  it('the console: every member reads the retention, an owner or admin sets it, a viewer is refused 403 and nothing changes', async () => {
    const org = stack.orgIds.other;
    const signIn = async (role: 'owner' | 'admin' | 'viewer') => {
      const email = `${role}@lifecycle.example`;
      await stack.contacts.members.ensureMember({ organizationId: org, email, role, password: `${role}-password-1` });
      const res = await fetch(`${stack.base}/account/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: `${role}-password-1` }) });
      expect(res.status).toBe(200);
      return { cookie: res.headers.get('set-cookie')!.split(';')[0], csrf: ((await res.json()) as { csrfToken: string }).csrfToken };
    };
    const account = async (session: { cookie: string; csrf: string }, method: string, body?: unknown): Promise<Answer> => {
      const res = await fetch(`${stack.base}/account/v1/data-retention`, {
        method, headers: { cookie: session.cookie, 'x-csrf-token': session.csrf, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    };
    const viewer = await signIn('viewer');
    const owner = await signIn('owner');
    const adminMember = await signIn('admin');
    expect(await account(viewer, 'GET')).toEqual({ status: 200, body: { personalDataRetentionDays: 365 } });
    const refused = await account(viewer, 'PUT', { personalDataRetentionDays: 60 });
    expect(refused.status).toBe(403);
    expect(await account(owner, 'GET')).toEqual({ status: 200, body: { personalDataRetentionDays: 365 } });
    expect(await account(owner, 'PUT', { personalDataRetentionDays: 60 })).toEqual({ status: 200, body: { personalDataRetentionDays: 60 } });
    expect(await account(adminMember, 'PUT', { personalDataRetentionDays: 20 })).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    expect(await account(viewer, 'GET')).toEqual({ status: 200, body: { personalDataRetentionDays: 60 } });
  });
});
