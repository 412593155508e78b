import { eventsV1, schedulerV1 } from '@rrs/proto';
import { createGrpcClient } from '@rrs/runtime';
import { waitFor } from '@rrs/testkit';
import { startCascadeStack, STACK_ADMIN_TOKEN, type CascadeStack } from './cascadeStack';

/*
 * The customer-respect rules through the public and admin APIs on the real stack (docs/customer-respect.md):
 * the cooldown, the opt-out ledger across channels and requests, RFC 8058 one-click, consent, and the
 * per-person export. Send windows have their own suite (cascade-scheduler/test/sendWindows.test.ts).
 */
describe('customer respect', () => {
  let stack: CascadeStack;
  let soonFlowId: string;
  let laterFlowId: string;
  let arbatId: string;

  type Answer = { status: number; body: Record<string, any> };
  const call = async (method: string, url: string, authorization: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer> => {
    const res = await fetch(url, { method, headers: { authorization, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : {} };
  };
  const api = (method: string, path: string, body?: unknown, key = stack.keys.paid) => call(method, `${stack.base}/api/v1${path}`, `Bearer ${key}`, body);
  const admin = (method: string, path: string, body?: unknown) => call(method, `${stack.base}/admin/v1${path}`, `Bearer ${STACK_ADMIN_TOKEN}`, body);
  const cascadeOf = async (id: string) => (await api('GET', `/cascades/${id}`)).body;
  const sentTo = (cascadeId: string) => stack.sender.received.filter((step) => step.cascadeId === cascadeId);
  const cascadeRows = async () => (await stack.pool.query('SELECT count(*)::int AS n FROM cascades')).rows[0].n as number;
  /** The finish events written for a cascade (the outbox, before the relay's delivery to the bus). */
  const finishEvents = async (cascadeId: string) => {
    const { rows } = await stack.pool.query<{ payload: Buffer }>(`SELECT payload FROM outbox WHERE subject = 'events.cascade.recipient.finished'`);
    return rows
      .map((row) => eventsV1.Event.decode(row.payload).payload)
      .flatMap((payload) => (payload?.$case === 'cascadeRecipientFinished' && payload.cascadeRecipientFinished.cascadeId === cascadeId ? [payload.cascadeRecipientFinished] : []));
  };
  const stepsSent = (cascadeId: string) =>
    waitFor(async () => {
      const cascade = await cascadeOf(cascadeId);
      return cascade.recipients.every((r: any) => r.steps[0].status === 'sent') ? cascade : undefined;
    }, { what: `the first steps of ${cascadeId} sent` });

  beforeAll(async () => {
    stack = await startCascadeStack();
    const org = stack.orgIds.paid;
    // The stack's organizations have no cooldown; this suite turns the default one on through the admin API.
    const patched = await admin('PATCH', `/organizations/${org}`, { cooldownDays: 30 });
    expect(patched.body.organization).toMatchObject({ cooldownDays: 30, requireConsent: false });
    soonFlowId = (await stack.scheduler.flows.create({ organizationId: org, name: 'Email, SMS soon', isDefault: false, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 30 }] })).id;
    laterFlowId = (await stack.scheduler.flows.create({ organizationId: org, name: 'Email, SMS later', isDefault: false, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 150 }] })).id;
    arbatId = (await stack.contacts.directory.createLocation({ organizationId: org, name: 'Arbat', address: 'Arbat 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'yandex', url: 'https://y.example/r' }] })).id;
  }, 60_000);
  afterAll(() => stack.close());

  it('a new organization gets a 30-day cooldown and no consent requirement; both are validated', async () => {
    const created = await admin('POST', '/organizations', { name: 'Defaults' });
    expect(created.status).toBe(201);
    expect(created.body.organization).toMatchObject({ cooldownDays: 30, requireConsent: false });
    const before = await admin('GET', `/organizations/${created.body.organization.id}`);
    for (const bad of [{ cooldownDays: -1 }, { cooldownDays: 366 }, { cooldownDays: 1.5 }, { requireConsent: 'yes' }]) {
      const res = await admin('PATCH', `/organizations/${created.body.organization.id}`, bad);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
    }
    expect(await admin('GET', `/organizations/${created.body.organization.id}`)).toEqual(before);
  });

  it('cooldown: a person sent a request at one location is skipped at another, matched by phone alone; ignoreCooldown sends anyway', async () => {
    const first = await api('POST', '/channels/email/send', { locationId: stack.locationId, recipients: [{ name: 'Kira', email: 'kira@example.com', phone: '+79160000001' }] });
    expect(first.body).toMatchObject({ queued: 1, skipped: 0 });
    await stepsSent(first.body.id);

    // Another location, another cascade, the phone alone and written the national way: the same person.
    const again = await api('POST', '/cascades', { locationId: arbatId, flowId: soonFlowId, recipients: [{ name: 'Kira', phone: '8 916 000-00-01' }, { name: 'Lev', phone: '+79160000009' }] });
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ queued: 1, skipped: 1 });
    const cascade = await cascadeOf(again.body.id);
    expect(cascade.counts).toMatchObject({ recipients: 2, queued: 1, skipped: 1, cooldown: 1, noConsent: 0 });
    const kira = cascade.recipients.find((r: any) => r.name === 'Kira');
    expect(kira).toMatchObject({ status: 'finished', finishReason: 'cooldown' });
    expect(kira.steps.map((s: any) => [s.status, s.reason])).toEqual([['skipped', 'cooldown'], ['skipped', 'cooldown']]);
    const [event] = await waitFor(async () => ((await finishEvents(again.body.id)).length ? finishEvents(again.body.id) : undefined), { what: 'the finish event of the skipped recipient' });
    expect(event).toMatchObject({ reason: 'cooldown', rating: 0 });
    expect(event.steps.map((s) => s.reason)).toEqual(['cooldown', 'cooldown']);
    await waitFor(() => sentTo(again.body.id).length === 1, { what: "Lev's email-less flow to send its SMS" });
    expect(sentTo(again.body.id).map((s) => s.recipient!.phone)).toEqual(['+79160000009']);

    const genuinelyNew = await api('POST', '/channels/sms/send', { locationId: arbatId, ignoreCooldown: true, recipients: [{ name: 'Kira', phone: '+79160000001' }] });
    expect(genuinelyNew.body).toMatchObject({ queued: 1, skipped: 0 });
    await waitFor(() => sentTo(genuinelyNew.body.id).length === 1, { what: 'the SMS past the cooldown' });
  });

  it('cooldown: a person who rated within it is not asked again, and one whose last request is older than it is', async () => {
    const link = await api('POST', '/review-requests', { locationId: stack.locationId, customerName: 'Mila', contact: 'mila@example.com' });
    expect(link.status).toBe(201);
    await stack.scheduler.reviews.submitRating(link.body.url.split('/r/')[1], 5);
    const asked = await api('POST', '/channels/email/send', { locationId: stack.locationId, recipients: [{ email: 'MILA@example.com' }] });
    expect(asked.body).toMatchObject({ queued: 0, skipped: 1, status: 'finished' });

    // The cooldown is in days of real time: a history older than it no longer counts.
    await stack.pool.query(`UPDATE person_activity SET last_sent_at = last_sent_at - interval '31 days', last_rated_at = last_rated_at - interval '31 days' WHERE address = 'mila@example.com'`);
    const later = await api('POST', '/channels/email/send', { locationId: stack.locationId, recipients: [{ email: 'mila@example.com' }] });
    expect(later.body).toMatchObject({ queued: 1, skipped: 0 });
  });

  it('an email one-click unsubscribe (RFC 8058) stops a later SMS of another cascade to the same person, and every later request', async () => {
    const person = { name: 'Nina', email: 'nina@example.com', phone: '+79160000002' };
    const first = await api('POST', '/cascades', { locationId: stack.locationId, flowId: soonFlowId, recipients: [person] });
    // The same person through her work address, in a cascade whose SMS comes later.
    const second = await api('POST', '/cascades', { locationId: stack.locationId, flowId: laterFlowId, ignoreCooldown: true, recipients: [{ ...person, email: 'nina@work.example' }] });
    expect(second.body).toMatchObject({ queued: 1 });
    await stepsSent(first.body.id);
    await stepsSent(second.body.id);
    const token = sentTo(first.body.id)[0].reviewUrl.split('/r/')[1];

    // The mail client's POST: no cookie, no CSRF field, multipart/form-data as RFC 8058's example.
    const form = new FormData();
    form.append('List-Unsubscribe', 'One-Click');
    const oneClick = await fetch(`${stack.base}/u/${token}`, { method: 'POST', body: form });
    expect(oneClick.status).toBe(200);
    const { rows } = await stack.pool.query(`SELECT address, channel, source FROM suppressions WHERE address IN ('nina@example.com', '+79160000002') ORDER BY address`);
    expect(rows).toEqual([
      { address: '+79160000002', channel: 'EMAIL', source: 'one_click' },
      { address: 'nina@example.com', channel: 'EMAIL', source: 'one_click' },
    ]);

    const firstAfter = await cascadeOf(first.body.id);
    expect(firstAfter.recipients[0]).toMatchObject({ finishReason: 'unsubscribed' });
    expect(firstAfter.recipients[0].steps[1]).toMatchObject({ status: 'canceled' });
    // The other cascade's SMS comes due after the opt-out and is skipped: the phone is hers.
    const secondAfter = await waitFor(async () => {
      const cascade = await cascadeOf(second.body.id);
      return cascade.recipients[0].steps[1].status !== 'scheduled' ? cascade : undefined;
    }, { what: 'the later SMS to come due', timeoutMs: 20_000 });
    expect(secondAfter.recipients[0].steps[1]).toMatchObject({ channel: 'SMS', status: 'skipped', reason: 'opted_out' });
    expect(sentTo(second.body.id).map((s) => s.channel)).toEqual(['EMAIL']);

    // A later request, on any channel, even past the cooldown: skipped as opted out.
    const later = await api('POST', '/channels/sms/send', { locationId: arbatId, ignoreCooldown: true, recipients: [{ name: 'Nina', phone: '+7 916 000-00-02' }] });
    expect(later.body).toMatchObject({ queued: 0, skipped: 1 });
    const laterCascade = await cascadeOf(later.body.id);
    expect(laterCascade.recipients[0]).toMatchObject({ finishReason: 'unsubscribed', steps: [{ status: 'skipped', reason: 'opted_out' }] });
    expect(laterCascade.counts).toMatchObject({ skipped: 1, unsubscribed: 1 });
    expect(sentTo(later.body.id)).toEqual([]);
  });

  it('a POST to /u/ that is not a one-click and has no CSRF token is refused and records nothing', async () => {
    const started = await api('POST', '/channels/email/send', { locationId: stack.locationId, recipients: [{ email: 'olga@example.com' }] });
    await stepsSent(started.body.id);
    const token = sentTo(started.body.id)[0].reviewUrl.split('/r/')[1];
    const before = (await stack.pool.query('SELECT count(*)::int AS n FROM suppressions')).rows[0].n;
    for (const body of [new URLSearchParams({ 'List-Unsubscribe': 'Two-Clicks' }), new URLSearchParams({})]) {
      const res = await fetch(`${stack.base}/u/${token}`, { method: 'POST', body });
      expect(res.status).toBe(403);
    }
    expect((await stack.pool.query('SELECT count(*)::int AS n FROM suppressions')).rows[0].n).toBe(before);
    expect((await cascadeOf(started.body.id)).recipients[0].finishReason).not.toBe('unsubscribed');
    // The urlencoded form of the one-click body works too.
    const res = await fetch(`${stack.base}/u/${token}`, { method: 'POST', body: new URLSearchParams({ 'List-Unsubscribe': 'One-Click' }) });
    expect(res.status).toBe(200);
    expect((await stack.pool.query(`SELECT source FROM suppressions WHERE address = 'olga@example.com'`)).rows).toEqual([{ source: 'one_click' }]);
  });

  it('requireConsent: recipients without consentAt are skipped no_consent; a contact\'s stored consent counts', async () => {
    const org = stack.orgIds.other;
    expect((await admin('PATCH', `/organizations/${org}`, { requireConsent: true })).body.organization).toMatchObject({ requireConsent: true });
    const location = await stack.contacts.directory.createLocation({ organizationId: org, name: 'Pokrovka', address: '', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [] });
    await stack.scheduler.flows.create({ organizationId: org, name: 'Email', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }] });
    const key = stack.keys.other;

    const res = await api('POST', '/cascades', { locationId: location.id, recipients: [{ email: 'yes@example.com', consentAt: '2026-05-01T12:00:00+03:00' }, { email: 'no@example.com' }] }, key);
    expect(res.body).toMatchObject({ queued: 1, skipped: 1 });
    const cascade = (await api('GET', `/cascades/${res.body.id}`, undefined, key)).body;
    expect(cascade.counts).toMatchObject({ noConsent: 1, skipped: 1 });
    expect(cascade.recipients.map((r: any) => [r.email, r.finishReason])).toEqual([['yes@example.com', null], ['no@example.com', 'no_consent']]);
    expect(cascade.recipients[1].steps).toEqual([expect.objectContaining({ status: 'skipped', reason: 'no_consent' })]);

    const send = await api('POST', '/channels/email/send', { locationId: location.id, recipients: [{ email: 'no2@example.com' }] }, key);
    expect(send.body).toMatchObject({ queued: 0, skipped: 1 });
    const contact = await api('POST', '/contacts', { externalId: 'crm-77', email: 'contact@example.com', locationId: location.id, consentAt: '2026-05-01T09:00:00Z', startCascade: true }, key);
    expect(contact.body.cascade).toMatchObject({ queued: 1, skipped: 0 });

    // A consent that is not a date-time with an offset is refused, and nothing is created.
    const before = await cascadeRows();
    const bad = await api('POST', '/cascades', { locationId: location.id, recipients: [{ email: 'x@example.com', consentAt: 'yesterday' }] }, key);
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 'invalid_request', errors: [expect.objectContaining({ pointer: '/recipients/0/consentAt' })] });
    expect(await cascadeRows()).toBe(before);
  });

  it('the admin API lists, adds and removes suppressions, refusing what is not an address', async () => {
    const org = stack.orgIds.paid;
    const added = await admin('POST', `/organizations/${org}/suppressions`, { address: '8 (916) 000-00-03', note: 'asked by phone' });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ created: true, suppression: { address: '+79160000003', channel: '', source: 'admin', recipientId: null, note: 'asked by phone' } });
    const again = await admin('POST', `/organizations/${org}/suppressions`, { address: '+79160000003' });
    expect(again.body).toEqual({ suppression: added.body.suppression, created: false });
    const listed = await admin('GET', `/organizations/${org}/suppressions?address=${encodeURIComponent('+7 916 000 00 03')}`);
    expect(listed.body).toEqual({ suppressions: [added.body.suppression], nextAfter: null });
    const page = await admin('GET', `/organizations/${org}/suppressions?limit=1`);
    expect(page.body.suppressions).toHaveLength(1);
    expect(page.body.nextAfter).toBe(page.body.suppressions[0].address);

    const sent = await api('POST', '/channels/sms/send', { locationId: stack.locationId, recipients: [{ phone: '+79160000003' }] });
    expect(sent.body).toMatchObject({ queued: 0, skipped: 1 });

    const count = async () => (await stack.pool.query('SELECT count(*)::int AS n FROM suppressions')).rows[0].n as number;
    const before = await count();
    const notAnAddress = await admin('POST', `/organizations/${org}/suppressions`, { address: 'call me maybe' });
    expect(notAnAddress).toMatchObject({ status: 400, body: { code: 'invalid_request', errors: [{ pointer: '/address' }] } });
    expect((await admin('POST', '/organizations/0190e0e0-0000-7000-8000-00000000dead/suppressions', { address: 'a@example.com' })).status).toBe(404);
    expect((await admin('POST', `/organizations/${org}/suppressions`, { address: 'a@example.com', channel: 'EMAIL' })).status).toBe(400);
    expect(await count()).toBe(before);

    expect((await admin('DELETE', `/organizations/${org}/suppressions/${encodeURIComponent('+79160000003')}`)).status).toBe(204);
    expect((await admin('DELETE', `/organizations/${org}/suppressions/${encodeURIComponent('+79160000003')}`)).body).toMatchObject({ code: 'not_found' });
    const resent = await api('POST', '/channels/sms/send', { locationId: stack.locationId, recipients: [{ phone: '+79160000003' }] });
    expect(resent.body).toMatchObject({ queued: 1 });
  });

  it("exports a person's consent, opt-outs, messages and ratings with the public links shown", async () => {
    const person = { name: 'Pavel', email: 'pavel@example.com', phone: '+79160000004', consentAt: '2026-04-30T10:00:00+03:00' };
    const started = await api('POST', '/cascades', { locationId: stack.locationId, flowId: soonFlowId, recipients: [person] });
    await stepsSent(started.body.id);
    const token = sentTo(started.body.id)[0].reviewUrl.split('/r/')[1];
    await stack.scheduler.reviews.submitRating(token, 2);
    await stack.scheduler.reviews.submitFeedback(token, 'Cold coffee');
    // The thank-you page's "get future requests in Telegram": the person's bot chat claims the code.
    const grpc = createGrpcClient(schedulerV1.CascadeSchedulerServiceClient, `127.0.0.1:${stack.scheduler.grpcPort}`);
    try {
      const [offered] = (await grpc.client.getReviewForm({ token, recordOpen: false, forUnsubscribe: false, botChannels: ['TELEGRAM'] })).form!.botLinks;
      await grpc.client.claimBotLink({ code: offered.code, channel: 'TELEGRAM', chatId: '5550004' });
    } finally {
      grpc.close();
    }
    await stack.scheduler.reviews.unsubscribe({ token, oneClick: false });

    const exported = await admin('GET', `/organizations/${stack.orgIds.paid}/people/export?email=PAVEL@example.com&phone=${encodeURIComponent('8 916 000-00-04')}`);
    expect(exported.status).toBe(200);
    const body = exported.body;
    expect(body.addresses).toEqual(['pavel@example.com', '+79160000004']);
    expect(body.consents).toEqual([{ cascadeId: started.body.id, recipientId: expect.any(String), consentAt: '2026-04-30T07:00:00.000Z', recordedAt: expect.any(String) }]);
    expect(body.messages).toEqual([expect.objectContaining({ cascadeId: started.body.id, stepOrder: 1, channel: 'EMAIL', address: 'pavel@example.com', status: 'sent' })]);
    expect(body.ratings).toEqual([
      expect.objectContaining({ rating: 2, feedback: 'Cold coffee', cascadeId: started.body.id, publicLinksShown: [{ provider: 'google', url: 'https://g.example/r' }], publicLinksShownAt: expect.any(String) }),
    ]);
    expect(body.suppressions.map((s: any) => [s.address, s.source])).toEqual([['+79160000004', 'unsubscribe_page'], ['pavel@example.com', 'unsubscribe_page']]);
    expect(body.lastSentAt).not.toBeNull();
    expect(body.lastRatedAt).not.toBeNull();
    expect(body.botLinks).toEqual([{ channel: 'TELEGRAM', reviewRequestId: expect.any(String), linkedAt: expect.any(String), chatId: '5550004' }]);
    expect(body.botLinks[0].reviewRequestId).toBe(body.ratings[0].reviewRequestId);

    expect(await admin('GET', `/organizations/${stack.orgIds.paid}/people/export`)).toMatchObject({ status: 400, body: { code: 'invalid_request' } });
    expect(await admin('GET', `/organizations/${stack.orgIds.paid}/people/export?phone=12`)).toMatchObject({ status: 400, body: { code: 'invalid_request', errors: [{ parameter: 'phone' }] } });
    const nobody = await admin('GET', `/organizations/${stack.orgIds.other}/people/export?email=pavel@example.com`);
    expect(nobody.body).toMatchObject({ consents: [], messages: [], ratings: [], suppressions: [], lastSentAt: null, botLinks: [] });
  });
});
