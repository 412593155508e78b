import { waitFor } from '@rrs/testkit';
import { accountCaller, addMember, customerRates, DEMO_PASSWORD, signIn, startConsoleStack, type ConsoleStack, type Signed } from './consoleStack';

interface DevMessage {
  channel: string;
  to: string;
  subject: string;
  text: string;
}

/**
 * The account API of the ratings inbox, its alerts and stopping a cascade, on the real all-in-one: an
 * alert in the dev inbox for each owner and admin (not the viewer, not the customer); the workflow
 * (assign, note, resolve, reopen) with its history; a reply by email; the alert settings, members'
 * choices and a staff chat linked through the stand-in bot; and for each role what it may do — a viewer
 * reads and is refused every change (403 `read_only_role`), an admin and an owner act — with nothing
 * changed by a refusal, and another organization's ids 404.
 */
describe('account API: ratings inbox, alerts, replies, stopping a cascade', () => {
  let stack: ConsoleStack;
  let base: string;
  let owner: Signed;
  let admin: Signed;
  let viewer: Signed;
  let locationId: string;
  let ownerId: string;
  let adminId: string;

  beforeAll(async () => {
    stack = await startConsoleStack('inbox-api');
    base = stack.aio.url;
    owner = await signIn(base, 'demo@example.com', DEMO_PASSWORD);
    admin = await addMember(stack, stack.aio.demo.organizationId, 'inbox-admin@example.com', 'admin');
    viewer = await addMember(stack, stack.aio.demo.organizationId, 'inbox-viewer@example.com', 'viewer');
    locationId = (await owner.call('GET', '/locations')).body.locations[0].id;
    ownerId = (await owner.call('GET', '/session')).body.member.id;
    adminId = (await admin.call('GET', '/session')).body.member.id;
  }, 60_000);
  afterAll(() => stack.close());

  const devMessages = async () => ((await (await fetch(`${base}/dev/messages`)).json()) as { messages: DevMessage[] }).messages;

  it('a low rating with feedback alerts every owner and admin in the dev inbox, never the viewer or the customer, and the history logs it', async () => {
    const { reviewRequestId } = await customerRates(base, owner, { email: 'rude@example.com', rating: 1, feedback: 'The waiter was rude', locationId });
    const alerts = await waitFor(async () => {
      const found = (await devMessages()).filter((m) => m.text.includes('The waiter was rude') && m.subject.includes('1★'));
      return found.length === 2 ? found : undefined;
    }, { what: 'the two alert emails in the dev inbox' });
    expect(alerts.map((m) => m.to).sort()).toEqual(['demo@example.com', 'inbox-admin@example.com']);
    expect(alerts[0].text).toContain(`/app/#/ratings/${reviewRequestId}`);
    expect((await devMessages()).filter((m) => m.text.includes('The waiter was rude') && (m.to === 'inbox-viewer@example.com' || m.to === 'rude@example.com'))).toEqual([]);
    const detail = await waitFor(async () => {
      const r = await viewer.call('GET', `/ratings/${reviewRequestId}`);
      return r.body.history.filter((e: { kind: string }) => e.kind === 'alerted').length === 2 ? r : undefined;
    }, { what: 'the alerts in the history' });
    expect(detail.status).toBe(200);
    expect(detail.body).toMatchObject({ rating: { status: 'new', actionable: true, overdue: false, respondBy: expect.any(String), feedback: 'The waiter was rude' }, canReply: true, replyRefusal: null });
    expect(detail.body.history.map((e: { kind: string; target: string | null }) => [e.kind, e.target]).sort()).toEqual([
      ['alerted', 'email:demo@example.com'], ['alerted', 'email:inbox-admin@example.com'], ['feedback', null],
    ]);
  });

  it('the workflow by role: a viewer is refused every change (403 read_only_role, nothing changed); an admin takes and resolves; the owner reopens', async () => {
    const { reviewRequestId } = await customerRates(base, owner, { email: 'slow@example.com', rating: 2, feedback: 'Slow service', locationId });
    const history = async () => (await owner.call('GET', `/ratings/${reviewRequestId}`)).body.history.filter((e: { kind: string }) => !['alerted', 'feedback'].includes(e.kind));
    const refusals = [
      ['PUT', `/ratings/${reviewRequestId}/assignee`, { memberId: adminId }],
      ['DELETE', `/ratings/${reviewRequestId}/assignee`, undefined],
      ['POST', `/ratings/${reviewRequestId}/resolve`, { note: 'done' }],
      ['POST', `/ratings/${reviewRequestId}/reopen`, undefined],
      ['POST', `/ratings/${reviewRequestId}/notes`, { note: 'a note' }],
      ['POST', `/ratings/${reviewRequestId}/replies`, { text: 'Sorry' }],
      ['PUT', `/ratings/${reviewRequestId}/handled`, undefined],
    ] as const;
    for (const [method, path, body] of refusals) {
      const r = await viewer.call(method, path, { body });
      expect([method, path, r.status, r.body.code]).toEqual([method, path, 403, 'read_only_role']);
    }
    // Without the CSRF token even an owner changes nothing.
    expect((await owner.call('PUT', `/ratings/${reviewRequestId}/assignee`, { body: { memberId: adminId }, csrf: null })).body.code).toBe('invalid_csrf_token');
    expect(await history()).toEqual([]);
    expect((await owner.call('GET', `/ratings/${reviewRequestId}`)).body.rating).toMatchObject({ status: 'new', assignedTo: null });

    // A member of no organization here, and an empty note: 400, nothing changed.
    expect((await admin.call('PUT', `/ratings/${reviewRequestId}/assignee`, { body: { memberId: 'somebody-else' } })).status).toBe(400);
    expect((await admin.call('POST', `/ratings/${reviewRequestId}/resolve`, { body: { note: '   ' } })).status).toBe(400);
    expect(await history()).toEqual([]);

    const assigned = await admin.call('PUT', `/ratings/${reviewRequestId}/assignee`, { body: { memberId: adminId } });
    expect(assigned).toMatchObject({ status: 200, body: { rating: { status: 'in_progress', assignedTo: adminId } } });
    expect((await viewer.call('GET', `/ratings?status=in_progress&assignedTo=${adminId}`)).body.ratings.map((r: { reviewRequestId: string }) => r.reviewRequestId)).toEqual([reviewRequestId]);
    expect((await admin.call('POST', `/ratings/${reviewRequestId}/notes`, { body: { note: 'Asked the kitchen' } })).status).toBe(200);
    const resolved = await admin.call('POST', `/ratings/${reviewRequestId}/resolve`, { body: { note: 'Apologised; a new order sent' } });
    expect(resolved.body.rating).toMatchObject({ status: 'resolved', handledBy: adminId, resolutionNote: 'Apologised; a new order sent' });
    expect((await admin.call('POST', `/ratings/${reviewRequestId}/resolve`, { body: { note: 'again' } })).body.code).toBe('rating_resolved');
    expect((await owner.call('POST', `/ratings/${reviewRequestId}/reopen`)).body.rating).toMatchObject({ status: 'in_progress', handledAt: null });
    expect((await owner.call('POST', `/ratings/${reviewRequestId}/reopen`)).body.code).toBe('rating_not_resolved');
    expect((await history()).map((e: { kind: string; memberId: string }) => [e.kind, e.memberId])).toEqual([
      ['assigned', adminId], ['noted', adminId], ['resolved', adminId], ['reopened', ownerId],
    ]);
  });

  it('a reply goes to the customer by email (the dev inbox), once per Idempotency-Key, and shows in the history; an opted-out customer is refused with nothing sent', async () => {
    const { reviewRequestId } = await customerRates(base, owner, { email: 'reply-me@example.com', rating: 2, feedback: 'Cold coffee', locationId });
    const reply = { subject: 'About your coffee', text: 'We are sorry. The next one is on us.' };
    const first = await owner.call('POST', `/ratings/${reviewRequestId}/replies`, { body: reply, headers: { 'idempotency-key': 'reply-form-1' } });
    expect(first).toMatchObject({ status: 202, body: { to: 'reply-me@example.com', sent: true } });
    const again = await owner.call('POST', `/ratings/${reviewRequestId}/replies`, { body: reply, headers: { 'idempotency-key': 'reply-form-1' } });
    expect(again.body).toMatchObject({ sent: false });
    const sent = await waitFor(async () => (await devMessages()).filter((m) => m.to === 'reply-me@example.com' && m.subject === 'About your coffee'), { what: 'the reply in the dev inbox' });
    expect(sent).toHaveLength(1);
    expect(sent[0].text).toContain('The next one is on us.');
    expect((await viewer.call('GET', `/ratings/${reviewRequestId}`)).body.history.filter((e: { kind: string }) => e.kind === 'replied')).toEqual([
      expect.objectContaining({ memberId: ownerId, text: reply.text, target: 'reply-me@example.com' }),
    ]);

    const { reviewRequestId: optedOut, token } = await customerRates(base, owner, { email: 'no-more@example.com', rating: 1, locationId });
    const unsubscribe = await fetch(`${base}/u/${token}`);
    const cookie = unsubscribe.headers.get('set-cookie')!.split(';')[0];
    const csrf = /name="csrf" value="([0-9a-f]+)"/.exec(await unsubscribe.text())![1];
    await fetch(`${base}/u/${token}`, { method: 'POST', redirect: 'manual', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ csrf }) });
    await waitFor(async () => (await owner.call('GET', `/ratings/${optedOut}`)).body.replyRefusal === 'customer_opted_out' || undefined, { what: 'the opt-out' });
    const refused = await owner.call('POST', `/ratings/${optedOut}/replies`, { body: { text: 'Please come back' } });
    expect(refused).toMatchObject({ status: 409, body: { code: 'customer_opted_out' } });
    expect((await devMessages()).filter((m) => m.to === 'no-more@example.com' && m.text.includes('Please come back'))).toEqual([]);
    expect((await owner.call('GET', `/ratings/${optedOut}`)).body.history.filter((e: { kind: string }) => e.kind === 'replied')).toEqual([]);
  });

  it('alert settings and choices: a viewer reads them and is refused changes; an admin sets them; refusals by pointer change nothing', async () => {
    const before = (await viewer.call('GET', '/alerts')).body;
    expect(before.settings).toEqual({ threshold: 3, locationThresholds: [], responseTargetMinutes: 120, workingHours: { start: '09:00', end: '21:00', days: [] }, replyTo: '' });
    expect(before.members.map((m: { email: string; alerts: string; chosen: boolean }) => [m.email, m.alerts, m.chosen]).sort()).toEqual([
      ['demo@example.com', 'instant', false], ['inbox-admin@example.com', 'instant', false], ['inbox-viewer@example.com', 'off', false],
    ]);
    expect(before.bots.sort()).toEqual(['MAX', 'TELEGRAM']);
    const settings = { threshold: 4, locationThresholds: [{ locationId, threshold: 2 }], responseTargetMinutes: 60, workingHours: { start: '10:00', end: '19:00', days: [1, 2, 3, 4, 5] }, replyTo: 'care@demo.example' };
    expect((await viewer.call('PUT', '/alerts/settings', { body: settings })).body.code).toBe('read_only_role');
    expect((await viewer.call('PUT', `/alerts/members/${adminId}`, { body: { alerts: 'off' } })).body.code).toBe('read_only_role');
    const bad = await admin.call('PUT', '/alerts/settings', { body: { ...settings, threshold: 9, workingHours: { start: '10:00', end: '10:00', days: [] }, locationThresholds: [{ locationId: '0190e0e0-0000-7000-8000-00000000dead', threshold: 2 }] } });
    expect(bad.status).toBe(400);
    expect(bad.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual(['/threshold', '/workingHours/end']);
    const foreignLocation = await admin.call('PUT', '/alerts/settings', { body: { ...settings, locationThresholds: [{ locationId: '0190e0e0-0000-7000-8000-00000000dead', threshold: 2 }] } });
    expect(foreignLocation.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(['/locationThresholds/0/locationId']);
    expect((await owner.call('GET', '/alerts')).body).toEqual(before);

    const saved = await admin.call('PUT', '/alerts/settings', { body: settings });
    expect(saved).toMatchObject({ status: 200, body: { settings } });
    const chosen = await admin.call('PUT', `/alerts/members/${ownerId}`, { body: { alerts: 'digest' } });
    expect(chosen.body.members.find((m: { memberId: string }) => m.memberId === ownerId)).toMatchObject({ alerts: 'digest', chosen: true });
    expect((await admin.call('PUT', '/alerts/members/not-a-member', { body: { alerts: 'off' } })).status).toBe(404);
    // Back to the defaults for the other tests.
    await owner.call('PUT', '/alerts/settings', { body: before.settings });
    await owner.call('PUT', `/alerts/members/${ownerId}`, { body: { alerts: 'instant' } });
  });

  it("a staff chat linked through the stand-in bot's deep link gets the alerts in the dev inbox (bot:4242); unlinking it stops them", async () => {
    expect((await viewer.call('POST', '/alerts/chats', { body: { channel: 'TELEGRAM' } })).body.code).toBe('read_only_role');
    const linked = await admin.call('POST', '/alerts/chats', { body: { channel: 'TELEGRAM' } });
    expect(linked.status).toBe(201);
    const deepLink = new URL(linked.body.link);
    expect(deepLink.pathname).toBe('/dev/bots/telegram');
    const started = await fetch(`${base}/dev/bots/telegram/start`, { method: 'POST', redirect: 'manual', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ code: deepLink.searchParams.get('start')! }) });
    expect(started.status).toBe(303);
    expect((await viewer.call('GET', '/alerts')).body.chats).toEqual([expect.objectContaining({ channel: 'TELEGRAM', chatId: '4242', linkedBy: adminId })]);
    // The demo organization speaks Russian: so does the bot.
    expect((await devMessages()).find((m) => m.to === 'bot:4242')?.text).toContain('уведомления об оценках Demo Coffee будут приходить в этот чат');

    await customerRates(base, owner, { email: 'chat-alert@example.com', rating: 1, feedback: 'Dirty table', locationId });
    const inChat = await waitFor(async () => (await devMessages()).find((m) => m.to === 'bot:4242' && m.text.includes('Dirty table')), { what: 'the alert in the staff chat' });
    expect(inChat.text).toContain('1/5');

    expect((await viewer.call('DELETE', '/alerts/chats/TELEGRAM/4242')).body.code).toBe('read_only_role');
    expect((await admin.call('DELETE', '/alerts/chats/TELEGRAM/4242')).status).toBe(204);
    expect((await admin.call('DELETE', '/alerts/chats/TELEGRAM/4242')).status).toBe(404);
    expect((await owner.call('GET', '/alerts')).body.chats).toEqual([]);
  });

  it('another organization sees none of it: its ratings 404, its inbox and chats empty', async () => {
    const { reviewRequestId } = await customerRates(base, owner, { email: 'isolated@example.com', rating: 2, locationId });
    const org = await stack.admin('POST', '/organizations', { name: 'Other Co', plan: 'standard', emailConfirmed: true });
    const invited = await stack.admin('POST', `/organizations/${org.body.organization?.id ?? org.body.id}/invitations`, { email: 'other-owner@example.com', role: 'owner' });
    const token = decodeURIComponent(String(invited.body.acceptUrl).split('#/accept/')[1]);
    await accountCaller(base)('POST', '/invitations/accept', { body: { token, name: 'Other', password: 'other-password-123' } });
    const other = await signIn(base, 'other-owner@example.com', 'other-password-123');
    expect((await other.call('GET', `/ratings/${reviewRequestId}`)).status).toBe(404);
    expect((await other.call('POST', `/ratings/${reviewRequestId}/notes`, { body: { note: 'mine?' } })).status).toBe(404);
    expect((await other.call('POST', `/ratings/${reviewRequestId}/replies`, { body: { text: 'hello' } })).status).toBe(404);
    expect((await other.call('GET', '/ratings')).body.ratings).toEqual([]);
    expect((await other.call('GET', '/alerts')).body.chats).toEqual([]);
  });

  it('stopping a cascade from the console: a viewer is refused; an admin stops its running recipient; another organization gets 404', async () => {
    const started = await owner.call('POST', '/cascades', { body: { locationId, externalId: 'stop-me', recipients: [{ name: 'Sam', email: 'stop-me@example.com' }] } });
    const id = started.body.id as string;
    expect((await viewer.call('POST', `/cascades/${id}/cancel`)).body.code).toBe('read_only_role');
    expect((await owner.call('GET', `/cascades/${id}`)).body.status).toBe('running');
    expect((await admin.call('POST', `/cascades/${id}/cancel`)).body).toEqual({ canceled: 1 });
    const after = (await owner.call('GET', `/cascades/${id}`)).body;
    expect(after).toMatchObject({ status: 'finished', recipients: [{ status: 'finished', finishReason: 'canceled' }] });
    expect((await admin.call('POST', `/cascades/${id}/cancel`)).body).toEqual({ canceled: 0 });
    expect((await admin.call('POST', '/cascades/0190e0e0-0000-7000-8000-00000000dead/cancel')).status).toBe(404);
  });
});
