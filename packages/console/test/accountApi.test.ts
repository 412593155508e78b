import { accountCaller, addMember, DEMO_PASSWORD, emailedLink, signIn, startConsoleStack, type ConsoleStack, type Signed } from './consoleStack';

/** The account API (/account/v1) on the real all-in-one: sign-in, sessions, CSRF, roles and tenant isolation. */
describe('account API', () => {
  let stack: ConsoleStack;
  let base: string;
  let call: ReturnType<typeof accountCaller>;
  let owner: Signed;
  let locationId: string;
  const sessions = async () => Number((await stack.contactsSql<{ n: string }>('SELECT count(*) AS n FROM member_sessions'))[0].n);
  const apiKeys = async () => Number((await stack.contactsSql<{ n: string }>('SELECT count(*) AS n FROM api_keys'))[0].n);

  beforeAll(async () => {
    stack = await startConsoleStack('account-api');
    base = stack.aio.url;
    call = accountCaller(base);
    owner = await signIn(base, 'demo@example.com', DEMO_PASSWORD);
    locationId = (await owner.call('GET', '/locations')).body.locations[0].id;
  }, 60_000);
  afterAll(() => stack.close());

  it('signs the demo person in with an HttpOnly SameSite cookie and answers who they are', async () => {
    const res = await call('POST', '/session', { body: { email: 'Demo@Example.com', password: DEMO_PASSWORD } });
    expect(res.status).toBe(200);
    expect(res.headers.get('set-cookie')).toMatch(/^rrs_session=rss_[0-9A-Za-z]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=\d+$/);
    const me = await owner.call('GET', '/session');
    expect(me.status).toBe(200);
    expect([res.headers.get('cache-control'), me.headers.get('cache-control')]).toEqual(['no-store', 'no-store']);
    expect(me.body).toMatchObject({ member: { email: 'demo@example.com', role: 'owner' }, organization: { id: stack.aio.demo.organizationId, name: 'Demo Coffee' }, csrfToken: owner.csrf });
  });

  it('does not take X-Forwarded-Proto from a client it does not trust as a proxy: no Secure over plain http', async () => {
    // The all-in-one trusts no proxy: X-Forwarded-Proto from the client is ignored.
    const res = await call('POST', '/session', { body: { email: 'demo@example.com', password: DEMO_PASSWORD }, headers: { 'x-forwarded-proto': 'https' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('set-cookie')).not.toMatch(/Secure/);
  });

  it('refuses a wrong password with 401 invalid_credentials and opens no session', async () => {
    const before = await sessions();
    const res = await call('POST', '/session', { body: { email: 'demo@example.com', password: 'not-the-password' } });
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('invalid_credentials');
    expect(res.headers.get('set-cookie')).toBeNull();
    const unknown = await call('POST', '/session', { body: { email: 'nobody@example.com', password: DEMO_PASSWORD } });
    expect([unknown.status, unknown.body.code]).toEqual([401, 'invalid_credentials']);
    expect(await sessions()).toBe(before);
  });

  it('throttles failed sign-ins: after 5 for one email, even the right password gets 429 with Retry-After', async () => {
    const member = await addMember(stack, stack.aio.demo.organizationId, 'throttled@example.com', 'admin', 'right-password-123');
    expect(member.csrf).toBeTruthy();
    for (let i = 0; i < 5; i++) expect((await call('POST', '/session', { body: { email: 'throttled@example.com', password: `wrong-${i}` } })).status).toBe(401);
    const before = await sessions();
    const res = await call('POST', '/session', { body: { email: 'throttled@example.com', password: 'right-password-123' } });
    expect(res.status).toBe(429);
    expect(res.body.code).toBe('too_many_sign_in_attempts');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(res.headers.get('set-cookie')).toBeNull();
    expect(await sessions()).toBe(before);
  });

  it('answers 401 missing_session without a cookie and invalid_session for an unknown or ended one', async () => {
    expect((await call('GET', '/api-keys')).body.code).toBe('missing_session');
    const bogus = await call('GET', '/api-keys', { cookie: 'rrs_session=rss_nope' });
    expect([bogus.status, bogus.body.code]).toEqual([401, 'invalid_session']);
    const leaving = await signIn(base, 'demo@example.com', DEMO_PASSWORD);
    expect((await leaving.call('DELETE', '/session')).status).toBe(204);
    const after = await leaving.call('GET', '/session');
    expect([after.status, after.body.code]).toEqual([401, 'invalid_session']);
  });

  it('refuses a state-changing call without the CSRF token, or from another origin, and creates nothing', async () => {
    const before = await apiKeys();
    const noToken = await owner.call('POST', '/api-keys', { body: { name: 'csrf' }, csrf: null });
    expect([noToken.status, noToken.body.code]).toEqual([403, 'invalid_csrf_token']);
    const wrongToken = await owner.call('POST', '/api-keys', { body: { name: 'csrf' }, csrf: 'x'.repeat(43) });
    expect([wrongToken.status, wrongToken.body.code]).toEqual([403, 'invalid_csrf_token']);
    const crossSite = await owner.call('POST', '/api-keys', { body: { name: 'csrf' }, headers: { origin: 'https://evil.example' } });
    expect([crossSite.status, crossSite.body.code]).toEqual([403, 'cross_origin_request']);
    const crossSiteSignIn = await call('POST', '/session', { body: { email: 'demo@example.com', password: DEMO_PASSWORD }, headers: { origin: 'https://evil.example' } });
    expect([crossSiteSignIn.status, crossSiteSignIn.body.code]).toEqual([403, 'cross_origin_request']);
    const opaque = await owner.call('POST', '/api-keys', { body: { name: 'csrf' }, headers: { origin: 'null' } });
    expect([opaque.status, opaque.body.code]).toEqual([403, 'cross_origin_request']);
    expect(await apiKeys()).toBe(before);
    // The console's own origins pass: PUBLIC_BASE_URL's (a proxy may rewrite Host) and the request's host.
    const viaPublic = await owner.call('POST', '/api-keys', { body: { name: 'same-site 1' }, headers: { origin: 'http://localhost:8080' } });
    const viaHost = await owner.call('POST', '/api-keys', { body: { name: 'same-site 2' }, headers: { origin: new URL(base).origin } });
    expect([viaPublic.status, viaHost.status]).toEqual([201, 201]);
  });

  it('issues an API key whose secret works on the public API, lists it without the secret, and revokes it', async () => {
    const created = await owner.call('POST', '/api-keys', { body: { name: 'crm', scopes: ['cascades:read'] } });
    expect(created.status).toBe(201);
    const ping = await fetch(`${base}/api/v1/ping`, { headers: { authorization: `Bearer ${created.body.secret}` } });
    expect(ping.status).toBe(200);
    const listed = (await owner.call('GET', '/api-keys')).body.apiKeys.find((k: { id: string }) => k.id === created.body.apiKey.id);
    expect(listed).toMatchObject({ name: 'crm', scopes: ['cascades:read'], revokedAt: null });
    expect(JSON.stringify(listed)).not.toContain(created.body.secret);
    const revoked = await owner.call('DELETE', `/api-keys/${created.body.apiKey.id}`);
    expect(revoked.status).toBe(200);
    expect(revoked.body.apiKey.revokedAt).not.toBeNull();
  });

  it("sends one customer by hand under the public API's rules: an Idempotency-Key replays, the list finds it by externalId and status", async () => {
    const body = { locationId, externalId: 'order-hand-1', recipients: [{ name: 'Анна', email: 'anna@example.com' }] };
    const first = await owner.call('POST', '/cascades', { body, headers: { 'idempotency-key': 'hand-1' } });
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ status: 'running', queued: 1, skipped: 0 });
    const again = await owner.call('POST', '/cascades', { body, headers: { 'idempotency-key': 'hand-1' } });
    expect([again.status, again.body.id, again.headers.get('idempotent-replayed')]).toEqual([202, first.body.id, 'true']);
    const reused = await owner.call('POST', '/cascades', { body: { ...body, externalId: 'other' }, headers: { 'idempotency-key': 'hand-1' } });
    expect([reused.status, reused.body.code]).toEqual([409, 'idempotency_key_reused']);
    const found = await owner.call('GET', '/cascades?externalId=order-hand-1');
    expect(found.body.cascades.map((c: { id: string }) => c.id)).toEqual([first.body.id]);
    expect(found.body.cascades[0]).toMatchObject({ externalId: 'order-hand-1', recipients: 1, skipped: 0, locationId });
    expect((await owner.call('GET', '/cascades?externalId=order-hand-1&status=finished')).body.cascades).toEqual([]);
    const one = await owner.call('GET', `/cascades/${first.body.id}`);
    expect(one.body.recipients[0]).toMatchObject({ name: 'Анна', email: 'anna@example.com' });
    const paged: string[] = [];
    for (const n of [1, 2]) paged.push((await owner.call('POST', '/cascades', { body: { locationId, externalId: 'paged', recipients: [{ email: `p${n}@example.com` }] } })).body.id);
    const page1 = (await owner.call('GET', '/cascades?externalId=paged&limit=1')).body;
    expect([page1.cascades.map((c: { id: string }) => c.id), page1.nextAfter]).toEqual([[paged[1]], paged[1]]);
    const page2 = (await owner.call('GET', `/cascades?externalId=paged&limit=1&after=${page1.nextAfter}`)).body;
    expect([page2.cascades.map((c: { id: string }) => c.id), page2.nextAfter]).toEqual([[paged[0]], null]);
    const badStatus = await owner.call('GET', '/cascades?status=lost');
    expect([badStatus.status, badStatus.body.code]).toEqual([400, 'invalid_request']);
  });

  it('lets a viewer look but not change anything: 403 read_only_role, nothing created', async () => {
    const viewer = await addMember(stack, stack.aio.demo.organizationId, 'viewer@example.com', 'viewer');
    expect((await viewer.call('GET', '/api-keys')).status).toBe(200);
    expect((await viewer.call('GET', '/cascades')).status).toBe(200);
    const keysBefore = await apiKeys();
    const cascadesBefore = (await owner.call('GET', '/cascades?limit=100')).body.cascades.length;
    const key = await viewer.call('POST', '/api-keys', { body: { name: 'nope' } });
    expect([key.status, key.body.code]).toEqual([403, 'read_only_role']);
    const send = await viewer.call('POST', '/cascades', { body: { locationId, recipients: [{ email: 'v@example.com' }] } });
    expect([send.status, send.body.code]).toEqual([403, 'read_only_role']);
    const someKey = (await owner.call('GET', '/api-keys')).body.apiKeys[0].id;
    expect((await viewer.call('DELETE', `/api-keys/${someKey}`)).body.code).toBe('read_only_role');
    expect(await apiKeys()).toBe(keysBefore);
    expect((await owner.call('GET', '/cascades?limit=100')).body.cascades.length).toBe(cascadesBefore);
    // Signing out changes only the viewer's own session.
    expect((await viewer.call('DELETE', '/session')).status).toBe(204);
  });

  it("keeps each organization to its own: another organization's ids are 404 and its lists are its own", async () => {
    const org = await stack.admin('POST', '/organizations', { name: 'Other Org', plan: 'standard', emailConfirmed: true });
    expect(org.status).toBe(201);
    const other = await addMember(stack, org.body.organization.id, 'other-owner@example.com', 'owner');
    const demoKey = (await owner.call('GET', '/api-keys')).body.apiKeys.find((k: { revokedAt: string | null }) => k.revokedAt === null);
    const demoCascade = (await owner.call('GET', '/cascades')).body.cascades[0];
    expect(demoCascade).toBeDefined();

    const revoke = await other.call('DELETE', `/api-keys/${demoKey.id}`);
    expect([revoke.status, revoke.body.code]).toEqual([404, 'not_found']);
    expect((await owner.call('GET', '/api-keys')).body.apiKeys.find((k: { id: string }) => k.id === demoKey.id).revokedAt).toBeNull();
    const read = await other.call('GET', `/cascades/${demoCascade.id}`);
    expect([read.status, read.body.code]).toEqual([404, 'not_found']);
    const send = await other.call('POST', '/cascades', { body: { locationId, recipients: [{ email: 'x@example.com' }] } });
    expect([send.status, send.body.code]).toEqual([404, 'not_found']);
    expect((await other.call('GET', '/cascades')).body.cascades).toEqual([]);
    expect((await other.call('GET', '/api-keys')).body.apiKeys).toEqual([]);
    expect((await other.call('GET', '/locations')).body.locations).toEqual([]);
    expect((await other.call('GET', '/members')).body.members.map((m: { email: string }) => m.email)).toEqual(['other-owner@example.com']);
  });

  it('uses an invitation once: a second accept is 401 invalid_invitation; an email already a member is 409 member_exists', async () => {
    const invited = await stack.admin('POST', `/organizations/${stack.aio.demo.organizationId}/invitations`, { email: 'once@example.com', role: 'admin' });
    const token = decodeURIComponent(invited.body.acceptUrl.split('#/accept/')[1]);
    expect(invited.body.acceptUrl.startsWith('http://localhost:8080/app/#/accept/inv_')).toBe(true);
    expect((await call('POST', '/invitations/accept', { body: { token, name: 'Once', password: 'password-once-1' } })).status).toBe(201);
    const twice = await call('POST', '/invitations/accept', { body: { token, name: 'Twice', password: 'password-once-2' } });
    expect([twice.status, twice.body.code]).toEqual([401, 'invalid_invitation']);
    const again = await stack.admin('POST', `/organizations/${stack.aio.demo.organizationId}/invitations`, { email: 'ONCE@example.com', role: 'viewer' });
    expect([again.status, again.body.code]).toEqual([409, 'member_exists']);
    const short = await stack.admin('POST', `/organizations/${stack.aio.demo.organizationId}/invitations`, { email: 'short@example.com' });
    const shortToken = decodeURIComponent(short.body.acceptUrl.split('#/accept/')[1]);
    const weak = await call('POST', '/invitations/accept', { body: { token: shortToken, name: 'Short', password: 'short' } });
    expect([weak.status, weak.body.code, weak.body.errors[0].pointer]).toEqual([400, 'invalid_request', '/password']);
    expect((await stack.contactsSql("SELECT 1 FROM members WHERE email = 'short@example.com'")).length).toBe(0);
  });

  it('resets a password with a one-time link: every old session ends, the old password stops, the link works once', async () => {
    const member = await addMember(stack, stack.aio.demo.organizationId, 'forgetful@example.com', 'admin', 'old-password-123');
    const id = (await member.call('GET', '/session')).body.member.id;
    const otherOrg = (await stack.admin('POST', '/organizations', { name: 'Reset Other' })).body.organization.id;
    const wrongOrg = await stack.admin('POST', `/organizations/${otherOrg}/members/${id}/password-reset`);
    expect([wrongOrg.status, wrongOrg.body.code]).toEqual([404, 'not_found']);
    const started = await stack.admin('POST', `/organizations/${stack.aio.demo.organizationId}/members/${id}/password-reset`);
    expect(started.status).toBe(201);
    expect(started.body.resetUrl).toMatch(/^http:\/\/localhost:8080\/app\/#\/reset\/rst_/);
    const token = decodeURIComponent(started.body.resetUrl.split('#/reset/')[1]);

    const weak = await call('POST', '/password-reset', { body: { token, password: 'short' } });
    expect([weak.status, weak.body.code]).toEqual([400, 'invalid_request']);
    expect((await member.call('GET', '/session')).status).toBe(200);

    const done = await call('POST', '/password-reset', { body: { token, password: 'new-password-456' } });
    expect(done.status).toBe(200);
    expect(done.headers.get('set-cookie')).toMatch(/^rrs_session=rss_/);
    expect((await member.call('GET', '/session')).body.code).toBe('invalid_session');
    expect((await call('POST', '/session', { body: { email: 'forgetful@example.com', password: 'old-password-123' } })).body.code).toBe('invalid_credentials');
    expect((await signIn(base, 'forgetful@example.com', 'new-password-456')).csrf).toBeTruthy();
    const again = await call('POST', '/password-reset', { body: { token, password: 'third-password-789' } });
    expect([again.status, again.body.code]).toEqual([401, 'invalid_reset_token']);
  });

  it('lets an owner invite people from the console; an admin gets 403 owner_only and nothing is created', async () => {
    const invited = await owner.call('POST', '/members/invitations', { body: { email: 'Invited@Example.com', role: 'viewer' } });
    expect(invited.status).toBe(201);
    expect(invited.body.invitation).toMatchObject({ email: 'invited@example.com', role: 'viewer' });
    expect(invited.body).not.toHaveProperty('acceptUrl');
    const link = await emailedLink(base, 'invited@example.com');
    expect(JSON.stringify(invited.body)).not.toContain(link.split('#/accept/')[1]);
    const token = decodeURIComponent(link.split('#/accept/')[1]);
    expect((await call('POST', '/invitations/accept', { body: { token, name: 'Invited', password: 'invited-password-1' } })).status).toBe(201);
    expect((await owner.call('GET', '/members')).body.members.find((m: { email: string }) => m.email === 'invited@example.com')).toMatchObject({ role: 'viewer', name: 'Invited' });
    const invitedBy = await stack.contactsSql<{ invited_by: string }>("SELECT invited_by FROM member_invitations WHERE email = 'invited@example.com'");
    expect(invitedBy[0].invited_by).toBe((await owner.call('GET', '/session')).body.member.id);

    const admin = await addMember(stack, stack.aio.demo.organizationId, 'an-admin@example.com', 'admin');
    const before = (await stack.contactsSql('SELECT 1 FROM member_invitations')).length;
    const refused = await admin.call('POST', '/members/invitations', { body: { email: 'nope@example.com', role: 'owner' } });
    expect([refused.status, refused.body.code]).toEqual([403, 'owner_only']);
    expect((await stack.contactsSql('SELECT 1 FROM member_invitations')).length).toBe(before);
    const badRole = await owner.call('POST', '/members/invitations', { body: { email: 'nope@example.com', role: 'god' } });
    expect([badRole.status, badRole.body.code]).toEqual([400, 'invalid_request']);
  });
});
