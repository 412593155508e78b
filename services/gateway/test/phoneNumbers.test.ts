import { waitFor } from '@rrs/testkit';
import { startCascadeStack, STACK_ADMIN_TOKEN, type CascadeStack } from './cascadeStack';

/*
 * Toll fraud (issue 13): the phone channels never send to premium-rate, shared-cost, toll-free,
 * satellite/international-network and other non-personal numbers, nor outside the organization's allowed
 * countries (default: its region). One rule (proto/src/phones.ts) on every side: POST /contacts answers
 * 400 `phone_not_allowed` and saves nothing; a send or cascade skips the recipient or the phone step with
 * reason `phone_not_allowed` and nothing reaches the sender. Real gateway, contacts, scheduler, JetStream.
 */
describe('phone numbers the phone channels refuse', () => {
  let stack: CascadeStack;
  let emailThenSms: string;

  type Answer = { status: number; body: Record<string, any> };
  const call = async (method: string, url: string, authorization: string, body?: unknown): Promise<Answer> => {
    const res = await fetch(url, { method, headers: { authorization, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : {} };
  };
  const api = (method: string, path: string, body?: unknown) => call(method, `${stack.base}/api/v1${path}`, `Bearer ${stack.keys.paid}`, body);
  const admin = (method: string, path: string, body?: unknown) => call(method, `${stack.base}/admin/v1${path}`, `Bearer ${STACK_ADMIN_TOKEN}`, body);
  const contactCount = () => stack.contacts.contacts.count(stack.orgIds.paid);
  const sentTo = (cascadeId: string) => stack.sender.received.filter((step) => step.cascadeId === cascadeId);

  /** Numbers no phone channel sends to, whatever the countries: [number, reason, type]. */
  const REFUSED: Array<[string, string, string | undefined]> = [
    ['+44 909 879 0000', 'number_type', 'PREMIUM_RATE'],
    ['+1 900 555 0123', 'number_type', 'PREMIUM_RATE'],
    ['+7 809 505 1234', 'number_type', 'PREMIUM_RATE'],
    ['+49 180 123 4567', 'number_type', 'SHARED_COST'],
    ['+7 800 555 3535', 'number_type', 'TOLL_FREE'],
    ['+44 55 1234 5678', 'number_type', 'UAN'],
    ['+44 70 1234 5678', 'number_type', 'PERSONAL_NUMBER'],
    ['+44 56 1234 5678', 'number_type', 'VOIP'],
    ['+881 6 3123 4567', 'international_network', undefined],
    ['+882 1612 3456', 'international_network', undefined],
  ];

  beforeAll(async () => {
    stack = await startCascadeStack();
    // Every refused number must fail for its type, not for its country: the paid organization allows them all.
    const allowAll = await admin('PATCH', `/organizations/${stack.orgIds.paid}`, { allowedCountries: ['RU', 'GB', 'US', 'DE'] });
    expect(allowAll.body.organization.allowedCountries).toEqual(['RU', 'GB', 'US', 'DE']);
    emailThenSms = (await stack.scheduler.flows.create({ organizationId: stack.orgIds.paid, name: 'Email, SMS at once', isDefault: false, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 0 }] })).id;
  }, 60_000);
  afterAll(() => stack.close());

  it.each(REFUSED)('POST /contacts refuses %s (400 phone_not_allowed, %s) and saves nothing', async (phone, reason, type) => {
    const before = await contactCount();
    const res = await api('POST', '/contacts', { externalId: `crm-${phone}`, name: 'Fraud', phone });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'phone_not_allowed', reason, errors: [{ pointer: '/phone' }] });
    if (type) expect(res.body.numberType).toBe(type);
    expect(await contactCount()).toBe(before);
  });

  it.each(REFUSED)('a send to %s skips the recipient (phone_not_allowed) and nothing reaches the sender', async (phone) => {
    const res = await api('POST', '/channels/sms/send', { locationId: stack.locationId, recipients: [{ name: 'Fraud', phone }] });
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ queued: 0, skipped: 1, status: 'finished' });
    const cascade = (await api('GET', `/cascades/${res.body.id}`)).body;
    expect(cascade.recipients[0]).toMatchObject({ status: 'finished', finishReason: 'unreachable' });
    expect(cascade.recipients[0].steps.map((s: any) => [s.status, s.reason])).toEqual([['skipped', 'phone_not_allowed']]);
    expect(sentTo(res.body.id)).toEqual([]);
  });

  it('a cascade reaching the person by email too sends the email and skips the SMS step (phone_not_allowed)', async () => {
    const res = await api('POST', '/cascades', { locationId: stack.locationId, flowId: emailThenSms, recipients: [{ name: 'Half', email: 'half@example.com', phone: '+44 909 879 0000' }, { name: 'Whole', email: 'whole@example.com', phone: '+79160000501' }] });
    expect(res.body).toMatchObject({ queued: 2, skipped: 0 });
    const cascade = await waitFor(async () => {
      const c = (await api('GET', `/cascades/${res.body.id}`)).body;
      return c.recipients.every((r: any) => r.steps.every((s: any) => s.status === 'sent' || s.status === 'skipped')) ? c : undefined;
    }, { what: 'every step sent or skipped' });
    const half = cascade.recipients.find((r: any) => r.name === 'Half');
    const whole = cascade.recipients.find((r: any) => r.name === 'Whole');
    expect(half.steps.map((s: any) => [s.channel, s.status, s.reason])).toEqual([['EMAIL', 'sent', null], ['SMS', 'skipped', 'phone_not_allowed']]);
    expect(whole.steps.map((s: any) => [s.channel, s.status])).toEqual([['EMAIL', 'sent'], ['SMS', 'sent']]);
    expect(sentTo(res.body.id).filter((s) => s.channel === 'SMS').map((s) => s.recipient!.phone)).toEqual(['+79160000501']);
  });

  it('allowed countries: by default the region only, set through the admin API, refused outside them the same way', async () => {
    const org = stack.orgIds.other;
    const key = stack.keys.other;
    const other = (method: string, path: string, body?: unknown) => call(method, `${stack.base}/api/v1${path}`, `Bearer ${key}`, body);
    expect((await admin('GET', `/organizations/${org}`)).body.organization).toMatchObject({ defaultRegion: 'RU', allowedCountries: [] });
    const british = '+44 7400 123456';
    const before = await stack.contacts.contacts.count(org);
    const refused = await other('POST', '/contacts', { externalId: 'uk-1', phone: british });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ code: 'phone_not_allowed', reason: 'country', country: 'GB', allowedCountries: ['RU'] });
    expect(await stack.contacts.contacts.count(org)).toBe(before);
    expect((await other('POST', '/contacts', { externalId: 'ru-1', phone: '+79160000502' })).status).toBe(200);

    // A bad list is refused whole, and changes nothing.
    const bad = await admin('PATCH', `/organizations/${org}`, { allowedCountries: ['RU', 'XX'] });
    expect(bad.status).toBe(400);
    expect((await admin('GET', `/organizations/${org}`)).body.organization.allowedCountries).toEqual([]);

    expect((await admin('PATCH', `/organizations/${org}`, { allowedCountries: ['RU', 'GB'] })).body.organization.allowedCountries).toEqual(['RU', 'GB']);
    expect((await other('POST', '/contacts', { externalId: 'uk-1', phone: british })).status).toBe(200);
    // Back to the region only: a send to the same number is skipped, as a premium-rate one would be.
    await admin('PATCH', `/organizations/${org}`, { allowedCountries: [] });
    const location = (await stack.contacts.directory.createLocation({ organizationId: org, name: 'Other', address: 'a', city: 'c', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'google', url: 'https://g.example/o' }] })).id;
    const send = await other('POST', '/channels/sms/send', { locationId: location, recipients: [{ phone: british }] });
    expect(send.body).toMatchObject({ queued: 0, skipped: 1 });
    expect(sentTo(send.body.id)).toEqual([]);
  });
});
