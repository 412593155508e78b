import { accountCaller, DEMO_PASSWORD, emailedLink, signIn, startConsoleStack, type ConsoleStack, type Signed } from './consoleStack';

/**
 * The account API's findings of issue 29 ("Low"), on the real all-in-one: an invitation does not tell
 * whether a person has an account elsewhere; Idempotency-Key is honoured on API-key and invitation
 * creation (no usable secret saved); unknown invitation and reset links are limited per address.
 */
describe('account API: invitations, keys and links under attack', () => {
  let stack: ConsoleStack;
  let base: string;
  let owner: Signed;
  const call = () => accountCaller(base);

  beforeAll(async () => {
    stack = await startConsoleStack('account-hardening');
    base = stack.aio.url;
    owner = await signIn(base, 'demo@example.com', DEMO_PASSWORD);
  }, 60_000);
  afterAll(async () => {
    await stack.close();
  });

  it("answers an owner inviting another organization's member exactly as for anyone; the person learns it on accepting (409 member_exists)", async () => {
    const other = (await stack.admin('POST', '/organizations', { name: 'Elsewhere' })).body.organization.id as string;
    const placed = await stack.admin('POST', `/organizations/${other}/invitations`, { email: 'taken@example.com', role: 'owner' });
    const placedToken = decodeURIComponent(placed.body.acceptUrl.split('#/accept/')[1]);
    expect((await call()('POST', '/invitations/accept', { body: { token: placedToken, name: 'Taken', password: 'taken-password-1' } })).status).toBe(201);

    const existing = await owner.call('POST', '/members/invitations', { body: { email: 'Taken@example.com', role: 'viewer' } });
    const fresh = await owner.call('POST', '/members/invitations', { body: { email: 'nobody-yet@example.com', role: 'viewer' } });
    expect([existing.status, fresh.status]).toEqual([201, 201]);
    const shape = (body: any) => ({ keys: Object.keys(body).sort(), invitation: Object.keys(body.invitation).sort(), emailed: body.emailed, role: body.invitation.role });
    expect(shape(existing.body)).toEqual(shape(fresh.body));
    const pending = (await owner.call('GET', '/members/invitations')).body.invitations.map((i: { email: string }) => i.email);
    expect(pending).toEqual(expect.arrayContaining(['taken@example.com', 'nobody-yet@example.com']));

    // The person, holding the link in their mailbox, is told; nobody else was.
    const link = await emailedLink(base, 'taken@example.com', 1);
    const accept = await call()('POST', '/invitations/accept', { body: { token: decodeURIComponent(link.split('#/accept/')[1]), name: 'Again', password: 'taken-password-2' } });
    expect([accept.status, accept.body.code]).toEqual([409, 'member_exists']);
    expect((await stack.contactsSql("SELECT organization_id FROM members WHERE email = 'taken@example.com'")).map((m) => m.organization_id)).toEqual([other]);
    // A member of this organization is 409 at once: its owners see their members anyway.
    const own = await owner.call('POST', '/members/invitations', { body: { email: 'demo@example.com', role: 'viewer' } });
    expect([own.status, own.body.code]).toEqual([409, 'member_exists']);
  });

  it('issues one API key for a repeated Idempotency-Key and answers the repeat with the same key and secret (Idempotent-Replayed)', async () => {
    const before = (await owner.call('GET', '/api-keys')).body.apiKeys.length as number;
    const headers = { 'idempotency-key': 'c0ffee00-0000-4000-8000-000000000001' };
    const first = await owner.call('POST', '/api-keys', { body: { name: 'CRM once' }, headers });
    const again = await owner.call('POST', '/api-keys', { body: { name: 'CRM once' }, headers });
    expect([first.status, again.status]).toEqual([201, 201]);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect((await owner.call('GET', '/api-keys')).body.apiKeys).toHaveLength(before + 1);
    const ping = await fetch(`${base}/api/v1/ping`, { headers: { authorization: `Bearer ${again.body.secret}` } });
    expect(ping.status).toBe(200);
    // The same key with another body is refused, nothing issued.
    const reused = await owner.call('POST', '/api-keys', { body: { name: 'another' }, headers });
    expect([reused.status, reused.body.code]).toEqual([409, 'idempotency_key_reused']);
    expect((await owner.call('GET', '/api-keys')).body.apiKeys).toHaveLength(before + 1);

    // The saved answer holds neither the secret nor the Idempotency-Key readable.
    const saved = await stack.contactsSql<{ key: string; response: Buffer }>('SELECT key, response FROM idempotency_keys');
    const everything = saved.map((row) => `${row.key} ${row.response.toString('utf8')} ${row.response.toString('base64')}`).join('\n');
    expect(everything).not.toContain(first.body.secret);
    expect(everything).not.toContain(headers['idempotency-key']);
  });

  it('makes one invitation and sends its email once for a repeated Idempotency-Key', async () => {
    const headers = { 'idempotency-key': 'c0ffee00-0000-4000-8000-000000000002' };
    const first = await owner.call('POST', '/members/invitations', { body: { email: 'twice-clicked@example.com', role: 'admin' }, headers });
    const again = await owner.call('POST', '/members/invitations', { body: { email: 'twice-clicked@example.com', role: 'admin' }, headers });
    expect([first.status, again.status]).toEqual([201, 201]);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await stack.contactsSql("SELECT id FROM member_invitations WHERE email = 'twice-clicked@example.com'")).toHaveLength(1);
    await emailedLink(base, 'twice-clicked@example.com');
    // An email queued after both has arrived, so a second one of the repeat would have too: the repeat
    // queued its email again with the invitation's id, and the bus kept one.
    await owner.call('POST', '/members/invitations', { body: { email: 'marker@example.com', role: 'viewer' } });
    await emailedLink(base, 'marker@example.com');
    const inbox = (await (await fetch(`${base}/dev/messages?to=twice-clicked%40example.com`)).json()) as { messages: unknown[] };
    expect(inbox.messages).toHaveLength(1);
  });

  // Last: it leaves this test process's address blocked on the account links for 15 minutes.
  it('limits unknown invitation and reset links per address: past 10, every such request is 429 too_many_auth_failures, a valid link too', async () => {
    const invited = await stack.admin('POST', `/organizations/${stack.aio.demo.organizationId}/invitations`, { email: 'late-joiner@example.com', role: 'viewer' });
    const valid = decodeURIComponent(invited.body.acceptUrl.split('#/accept/')[1]);
    for (let i = 0; i < 11; i++) {
      const guess = i % 2 === 0
        ? await call()('POST', '/invitations/accept', { body: { token: `inv_guess${i}`, name: 'Guess', password: 'guess-password-1' } })
        : await call()('POST', '/password-reset', { body: { token: `rst_guess${i}`, password: 'guess-password-1' } });
      expect([guess.status, guess.body.code]).toEqual([401, i % 2 === 0 ? 'invalid_invitation' : 'invalid_reset_token']);
    }
    const blocked = await call()('POST', '/invitations/accept', { body: { token: valid, name: 'Late', password: 'late-password-123' } });
    expect([blocked.status, blocked.body.code]).toEqual([429, 'too_many_auth_failures']);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await call()('POST', '/password-reset', { body: { token: 'rst_more', password: 'guess-password-1' } })).status).toBe(429);
    expect(await stack.contactsSql("SELECT 1 FROM members WHERE email = 'late-joiner@example.com'")).toHaveLength(0);
    // Signing in is another limit: the address still signs in.
    expect((await call()('POST', '/session', { body: { email: 'demo@example.com', password: DEMO_PASSWORD } })).status).toBe(200);
  });
});
