import { startWebhookReceiver, type ReceivedWebhook } from './webhookReceiver';
import { accountCaller, addMember, DEMO_PASSWORD, signIn, startConsoleStack, type ConsoleStack, type Signed } from './consoleStack';

/**
 * The account API's developer section (webhook endpoints) and members management on the real
 * all-in-one: each route's refusals (status, code, nothing changed), roles, the last owner, tenant
 * isolation, and the system emails (invitations, password resets) landing in the dev inbox.
 */
describe('account API: webhooks and members', () => {
  let stack: ConsoleStack;
  let base: string;
  let call: ReturnType<typeof accountCaller>;
  let owner: Signed;
  let receiver: Awaited<ReturnType<typeof startWebhookReceiver>>;
  let receiverUrl: string;
  let received: ReceivedWebhook[] = [];
  const count = async (table: string, where = 'true', values: unknown[] = []) => Number((await stack.contactsSql<{ n: string }>(`SELECT count(*) AS n FROM ${table} WHERE ${where}`, values))[0].n);
  const inbox = async (to: string) => ((await (await fetch(`${base}/dev/messages?to=${encodeURIComponent(to)}`)).json()) as { messages: Array<{ channel: string; to: string; subject: string; text: string; link: string }> }).messages;
  /** Waits (bounded) until the dev inbox holds `n` messages for `to`. */
  const inboxOf = async (to: string, n = 1) => {
    for (let i = 0; i < 100; i++) {
      const messages = await inbox(to);
      if (messages.length >= n) return messages;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    throw new Error(`no email for ${to} in the dev inbox`);
  };

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    receiverUrl = receiver.url;
    received = receiver.received;
    stack = await startConsoleStack('developer-members-api');
    base = stack.aio.url;
    call = accountCaller(base);
    owner = await signIn(base, 'demo@example.com', DEMO_PASSWORD);
  }, 60_000);
  afterAll(async () => {
    await stack.close();
    await receiver.close();
  });

  describe('webhook endpoints', () => {
    let endpointId: string;

    it('creates an endpoint with its secret shown once, lists it without the secret, sends a test and replays it', async () => {
      const created = await owner.call('POST', '/webhooks', { body: { url: receiverUrl, events: ['cascade.recipient.finished'] } });
      expect(created.status).toBe(201);
      expect(created.body.secret).toMatch(/^whsec_/);
      endpointId = created.body.id;
      const list = await owner.call('GET', '/webhooks');
      expect(list.body.webhooks.map((w: { id: string }) => w.id)).toContain(endpointId);
      expect(JSON.stringify(list.body)).not.toContain(created.body.secret);

      const test = await owner.call('POST', `/webhooks/${endpointId}/test`);
      expect(test.status).toBe(202);
      expect(test.body.eventType).toBe('webhook.test');
      let log: any;
      for (let i = 0; i < 100; i++) {
        log = (await owner.call('GET', `/webhooks/${endpointId}/deliveries`)).body;
        if (log.deliveries[0]?.status === 'delivered') break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(log.deliveries[0]).toMatchObject({ id: test.body.id, status: 'delivered', attempts: [{ statusCode: 200 }] });
      expect(received.some((r) => r.headers['webhook-id'] === test.body.eventId)).toBe(true);

      const replay = await owner.call('POST', `/webhooks/${endpointId}/deliveries/${test.body.id}/replay`);
      expect(replay.status).toBe(202);
      for (let i = 0; i < 100 && received.filter((r) => r.headers['webhook-id'] === test.body.eventId).length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(received.filter((r) => r.headers['webhook-id'] === test.body.eventId)).toHaveLength(2);
    });

    it('changes the events and rotates the secret (the new one shown once)', async () => {
      const changed = await owner.call('PATCH', `/webhooks/${endpointId}`, { body: { events: ['cascade.recipient.finished', 'cascade.recipient.rated'] } });
      expect([changed.status, changed.body.events]).toEqual([200, ['cascade.recipient.finished', 'cascade.recipient.rated']]);
      const rotated = await owner.call('POST', `/webhooks/${endpointId}/rotate-secret`);
      expect(rotated.status).toBe(200);
      expect(rotated.body.secret).toMatch(/^whsec_/);
      expect(rotated.body.previousSecretExpiresAt).not.toBeNull();
    });

    it('refuses a URL it may not call and an unknown event with nothing created', async () => {
      const before = (await owner.call('GET', '/webhooks')).body.webhooks.length;
      const badUrl = await owner.call('POST', '/webhooks', { body: { url: 'https://10.0.0.1/hooks', events: ['cascade.recipient.finished'] } });
      expect([badUrl.status, badUrl.body.code]).toEqual([400, 'webhook_url_not_allowed']);
      const badEvent = await owner.call('POST', '/webhooks', { body: { url: receiverUrl, events: ['no.such.event'] } });
      expect([badEvent.status, badEvent.body.code]).toEqual([400, 'invalid_request']);
      expect((await owner.call('GET', '/webhooks')).body.webhooks.length).toBe(before);
    });

    it('lets a viewer read the endpoints and the log but change nothing (403 read_only_role)', async () => {
      const viewer = await addMember(stack, stack.aio.demo.organizationId, 'hook-viewer@example.com', 'viewer');
      expect((await viewer.call('GET', '/webhooks')).status).toBe(200);
      expect((await viewer.call('GET', `/webhooks/${endpointId}/deliveries`)).status).toBe(200);
      const sent = received.length;
      for (const [method, path, body] of [
        ['POST', '/webhooks', { url: receiverUrl, events: ['cascade.recipient.finished'] }],
        ['PATCH', `/webhooks/${endpointId}`, { events: ['cascade.recipient.rated'] }],
        ['POST', `/webhooks/${endpointId}/rotate-secret`, undefined],
        ['POST', `/webhooks/${endpointId}/test`, undefined],
        ['DELETE', `/webhooks/${endpointId}`, undefined],
      ] as const) {
        const res = await viewer.call(method, path, { body });
        expect([method, path, res.status, res.body.code]).toEqual([method, path, 403, 'read_only_role']);
      }
      const after = (await owner.call('GET', `/webhooks/${endpointId}`)).body;
      expect(after.events).toEqual(['cascade.recipient.finished', 'cascade.recipient.rated']);
      expect(received.length).toBe(sent);
    });

    it("answers 404 for another organization's endpoint and delivery", async () => {
      const org = await stack.admin('POST', '/organizations', { name: 'Hooks Other', plan: 'standard', emailConfirmed: true });
      const other = await addMember(stack, org.body.organization.id, 'hooks-other@example.com', 'owner');
      const deliveryId = (await owner.call('GET', `/webhooks/${endpointId}/deliveries`)).body.deliveries[0].id;
      for (const [method, path] of [
        ['GET', `/webhooks/${endpointId}`],
        ['GET', `/webhooks/${endpointId}/deliveries`],
        ['PATCH', `/webhooks/${endpointId}`],
        ['POST', `/webhooks/${endpointId}/test`],
        ['POST', `/webhooks/${endpointId}/deliveries/${deliveryId}/replay`],
        ['DELETE', `/webhooks/${endpointId}`],
      ] as const) {
        const res = await other.call(method, path, { body: method === 'PATCH' ? { description: 'taken' } : undefined });
        expect([method, path, res.status, res.body.code]).toEqual([method, path, 404, 'not_found']);
      }
      expect((await other.call('GET', '/webhooks')).body.webhooks).toEqual([]);
      expect((await owner.call('GET', `/webhooks/${endpointId}`)).body.description).toBe('');
    });
  });

  describe('members', () => {
    it('emails an invitation from the console and lists it as pending until revoked; the revoked link is refused', async () => {
      const invited = await owner.call('POST', '/members/invitations', { body: { email: 'invitee@example.com', role: 'viewer' } });
      expect(invited.status).toBe(201);
      expect(invited.body.emailed).toBe(true);
      const [email] = await inboxOf('invitee@example.com');
      expect(email.link).toMatch(/^http:\/\/localhost:8080\/app\/#\/accept\/inv_/);
      expect(email.text).toContain(email.link);
      // Only the person, in their mailbox, gets the link: the owner's answer never holds it.
      expect(invited.body).not.toHaveProperty('acceptUrl');
      expect(JSON.stringify(invited.body)).not.toContain(email.link.split('#/accept/')[1]);
      const pending = await owner.call('GET', '/members/invitations');
      expect(pending.body.invitations.map((i: { email: string }) => i.email)).toContain('invitee@example.com');
      const revoked = await owner.call('DELETE', `/invitations/${invited.body.invitation.id}`);
      expect(revoked.status).toBe(204);
      expect((await owner.call('GET', '/members/invitations')).body.invitations.map((i: { id: string }) => i.id)).not.toContain(invited.body.invitation.id);
      const token = decodeURIComponent(email.link.split('#/accept/')[1]);
      const accept = await call('POST', '/invitations/accept', { body: { token, name: 'Late', password: 'late-password-123' } });
      expect([accept.status, accept.body.code]).toEqual([401, 'invalid_invitation']);
      const again = await owner.call('DELETE', `/invitations/${invited.body.invitation.id}`);
      expect([again.status, again.body.code]).toEqual([404, 'not_found']);
    });

    it('emails an invitation made through the admin API too, and still answers its link', async () => {
      const invited = await stack.admin('POST', `/organizations/${stack.aio.demo.organizationId}/invitations`, { email: 'admin-invitee@example.com', role: 'admin' });
      expect(invited.status).toBe(201);
      const [email] = await inboxOf('admin-invitee@example.com');
      expect(email.link).toBe(invited.body.acceptUrl);
    });

    it('changes a role and removes a member, whose session stops working at once', async () => {
      const member = await addMember(stack, stack.aio.demo.organizationId, 'changing@example.com', 'viewer');
      const id = (await member.call('GET', '/session')).body.member.id;
      const changed = await owner.call('PATCH', `/members/${id}`, { body: { role: 'admin' } });
      expect([changed.status, changed.body.member.role]).toEqual([200, 'admin']);
      expect((await member.call('GET', '/session')).body.member.role).toBe('admin');
      const removed = await owner.call('DELETE', `/members/${id}`);
      expect(removed.status).toBe(204);
      const after = await member.call('GET', '/session');
      expect([after.status, after.body.code]).toEqual([401, 'invalid_session']);
      expect(await count('members', 'id = $1', [id])).toBe(0);
      expect(await count('member_sessions', 'member_id = $1', [id])).toBe(0);
      const signIn = await call('POST', '/session', { body: { email: 'changing@example.com', password: 'member-password-123' } });
      expect([signIn.status, signIn.body.code]).toEqual([401, 'invalid_credentials']);
    });

    it('refuses an admin (403 owner_only) and a viewer (403 read_only_role) with nothing changed', async () => {
      const admin = await addMember(stack, stack.aio.demo.organizationId, 'not-owner@example.com', 'admin');
      const viewer = await addMember(stack, stack.aio.demo.organizationId, 'just-looking@example.com', 'viewer');
      const viewerId = (await viewer.call('GET', '/session')).body.member.id;
      const invitation = (await owner.call('POST', '/members/invitations', { body: { email: 'kept@example.com', role: 'viewer' } })).body.invitation;
      const resetsBefore = await count('member_password_resets');
      for (const [who, expected] of [[admin, 'owner_only'], [viewer, 'read_only_role']] as const) {
        for (const [method, path, body] of [
          ['PATCH', `/members/${viewerId}`, { role: 'owner' }],
          ['DELETE', `/members/${viewerId}`, undefined],
          ['DELETE', `/invitations/${invitation.id}`, undefined],
          ['POST', `/members/${viewerId}/password-reset`, undefined],
        ] as const) {
          const res = await who.call(method, path, { body });
          expect([expected, method, path, res.status, res.body.code]).toEqual([expected, method, path, 403, expected]);
        }
      }
      expect((await owner.call('GET', '/members')).body.members.find((m: { id: string }) => m.id === viewerId).role).toBe('viewer');
      expect((await owner.call('GET', '/members/invitations')).body.invitations.map((i: { id: string }) => i.id)).toContain(invitation.id);
      expect(await count('member_password_resets')).toBe(resetsBefore);
      // Any member may see who is invited.
      expect((await viewer.call('GET', '/members/invitations')).status).toBe(200);
    });

    it('keeps the last owner: demoting or removing them is 409 last_owner, nothing changed; with a second owner it works', async () => {
      const org = await stack.admin('POST', '/organizations', { name: 'One Owner', plan: 'standard', emailConfirmed: true });
      const solo = await addMember(stack, org.body.organization.id, 'solo-owner@example.com', 'owner');
      const soloId = (await solo.call('GET', '/session')).body.member.id;
      const demote = await solo.call('PATCH', `/members/${soloId}`, { body: { role: 'admin' } });
      expect([demote.status, demote.body.code]).toEqual([409, 'last_owner']);
      const remove = await solo.call('DELETE', `/members/${soloId}`);
      expect([remove.status, remove.body.code]).toEqual([409, 'last_owner']);
      expect((await solo.call('GET', '/session')).body.member.role).toBe('owner');
      const second = await addMember(stack, org.body.organization.id, 'second-owner@example.com', 'owner');
      expect((await solo.call('PATCH', `/members/${soloId}`, { body: { role: 'admin' } })).status).toBe(200);
      const secondId = (await second.call('GET', '/session')).body.member.id;
      const last = await second.call('DELETE', `/members/${secondId}`);
      expect([last.status, last.body.code]).toEqual([409, 'last_owner']);
    });

    it('keeps an owner when two owners demote each other at the same moment', async () => {
      const org = await stack.admin('POST', '/organizations', { name: 'Two Owners', plan: 'standard', emailConfirmed: true });
      const first = await addMember(stack, org.body.organization.id, 'first-owner@example.com', 'owner');
      const second = await addMember(stack, org.body.organization.id, 'other-owner-2@example.com', 'owner');
      const [firstId, secondId] = await Promise.all([first, second].map(async (m) => (await m.call('GET', '/session')).body.member.id as string));
      const answers = await Promise.all([first.call('PATCH', `/members/${secondId}`, { body: { role: 'viewer' } }), second.call('PATCH', `/members/${firstId}`, { body: { role: 'viewer' } })]);
      // One demotion wins. The other is refused either by the last-owner rule (both passed the role check
      // before either landed) or, when the winner landed first, because its sender is now a viewer.
      const won = answers.filter((a) => a.status === 200);
      const refused = answers.filter((a) => a.status !== 200).map((a) => [a.status, a.body.code]);
      expect(won).toHaveLength(1);
      expect(refused).toHaveLength(1);
      expect([[409, 'last_owner'], [403, 'read_only_role']]).toContainEqual(refused[0]);
      expect(await count('members', `organization_id = $1 AND role = 'owner'`, [org.body.organization.id])).toBe(1);
    });

    it("answers 404 for another organization's member and invitation, with nothing changed", async () => {
      const org = await stack.admin('POST', '/organizations', { name: 'People Other', plan: 'standard', emailConfirmed: true });
      const other = await addMember(stack, org.body.organization.id, 'people-other@example.com', 'owner');
      const otherId = (await other.call('GET', '/session')).body.member.id;
      const otherInvitation = (await other.call('POST', '/members/invitations', { body: { email: 'other-invitee@example.com', role: 'viewer' } })).body.invitation;
      for (const [method, path, body] of [
        ['PATCH', `/members/${otherId}`, { role: 'viewer' }],
        ['DELETE', `/members/${otherId}`, undefined],
        ['POST', `/members/${otherId}/password-reset`, undefined],
        ['DELETE', `/invitations/${otherInvitation.id}`, undefined],
        ['PATCH', '/members/not-a-uuid', { role: 'viewer' }],
      ] as const) {
        const res = await owner.call(method, path, { body });
        expect([method, path, res.status, res.body.code]).toEqual([method, path, 404, 'not_found']);
      }
      expect((await other.call('GET', '/session')).body.member.role).toBe('owner');
      expect((await other.call('GET', '/members/invitations')).body.invitations.map((i: { id: string }) => i.id)).toEqual([otherInvitation.id]);
      expect((await owner.call('GET', '/members/invitations')).body.invitations.map((i: { id: string }) => i.id)).not.toContain(otherInvitation.id);
    });

    it('refuses a role that does not exist with 400 and nothing changed', async () => {
      const member = await addMember(stack, stack.aio.demo.organizationId, 'role-typo@example.com', 'viewer');
      const id = (await member.call('GET', '/session')).body.member.id;
      const res = await owner.call('PATCH', `/members/${id}`, { body: { role: 'superuser' } });
      expect([res.status, res.body.code]).toEqual([400, 'invalid_request']);
      expect((await member.call('GET', '/session')).body.member.role).toBe('viewer');
    });

    it("emails a member a reset link at an owner's request, never answering the link", async () => {
      const member = await addMember(stack, stack.aio.demo.organizationId, 'forgetful@example.com', 'admin');
      const id = (await member.call('GET', '/session')).body.member.id;
      const res = await owner.call('POST', `/members/${id}/password-reset`);
      expect(res.status).toBe(202);
      expect(res.body.emailed).toBe(true);
      expect(JSON.stringify(res.body)).not.toContain('rst_');
      // Their invitation came first (addMember), the reset link second.
      const email = (await inboxOf('forgetful@example.com', 2)).find((m) => m.link.includes('#/reset/'))!;
      expect(email.link).toMatch(/\/app\/#\/reset\/rst_/);
      const token = decodeURIComponent(email.link.split('#/reset/')[1]);
      const reset = await call('POST', '/password-reset', { body: { token, password: 'brand-new-password-1' } });
      expect(reset.status).toBe(200);
      expect((await member.call('GET', '/session')).status).toBe(401);
    });
  });

  describe('forgot password', () => {
    it('answers the same for a known and an unknown email; only the known one gets an email', async () => {
      await addMember(stack, stack.aio.demo.organizationId, 'knows-email@example.com', 'viewer');
      const resetsBefore = await count('member_password_resets');
      const known = await call('POST', '/password-reset/request', { body: { email: 'Knows-Email@example.com' } });
      const unknown = await call('POST', '/password-reset/request', { body: { email: 'nobody-here@example.com' } });
      expect([known.status, known.body]).toEqual([202, {}]);
      expect([unknown.status, unknown.body]).toEqual([known.status, known.body]);
      expect([...unknown.headers.keys()].sort()).toEqual([...known.headers.keys()].sort());
      const email = (await inboxOf('knows-email@example.com', 2)).find((m) => m.link.includes('#/reset/'))!;
      // In the organization's language: the demo organization's is Russian.
      expect(email.subject).toBe('Сброс пароля');
      expect(await count('member_password_resets')).toBe(resetsBefore + 1);
      // The unknown address gets nothing, though the known one's email has arrived.
      expect(await inbox('nobody-here@example.com')).toEqual([]);
      const token = decodeURIComponent(email.link.split('#/reset/')[1]);
      const reset = await call('POST', '/password-reset', { body: { token, password: 'remembered-now-123' } });
      expect(reset.status).toBe(200);
      expect((await call('POST', '/session', { body: { email: 'knows-email@example.com', password: 'remembered-now-123' } })).status).toBe(200);
    });

    it('is throttled like sign-in, for known and unknown emails alike, creating nothing once refused', async () => {
      for (const [email, isMember] of [['throttle-member@example.com', true], ['throttle-stranger@example.com', false]] as const) {
        if (isMember) await addMember(stack, stack.aio.demo.organizationId, email, 'viewer');
        for (let i = 0; i < 5; i++) expect((await call('POST', '/password-reset/request', { body: { email } })).status).toBe(202);
        // The links of the accepted requests are made after their answers: wait for them first.
        if (isMember) {
          for (let i = 0; i < 100 && (await count('member_password_resets r JOIN members m ON m.id = r.member_id', 'm.email = $1', [email])) < 5; i++) await new Promise((resolve) => setTimeout(resolve, 100));
          expect(await count('member_password_resets r JOIN members m ON m.id = r.member_id', 'm.email = $1', [email])).toBe(5);
        }
        const resetsBefore = await count('member_password_resets');
        const refused = await call('POST', '/password-reset/request', { body: { email } });
        expect([refused.status, refused.body.code]).toEqual([429, 'too_many_sign_in_attempts']);
        expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
        expect(await count('member_password_resets')).toBe(resetsBefore);
      }
    });
  });
});
