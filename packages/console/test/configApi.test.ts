import { announceChannels } from '@rrs/sender-kit';
import { testContext, waitFor } from '@rrs/testkit';
import { addMember, DEMO_PASSWORD, signIn, startConsoleStack, type ConsoleStack, type Signed } from './consoleStack';

/**
 * The account API's configuration routes (locations, flows, templates, channels, settings) on the real
 * all-in-one: what they change, their refusals with nothing changed, a viewer's 403 and tenant isolation.
 */
describe('account API: configuration', () => {
  let stack: ConsoleStack;
  let owner: Signed;
  /** Everything the configuration routes can change, as the owner reads it. */
  const snapshot = async () => {
    const [locations, flows, templates, settings] = await Promise.all(['/locations', '/flows', '/templates', '/settings'].map((path) => owner.call('GET', path)));
    return { locations: locations.body, flows: flows.body, templates: templates.body, settings: settings.body };
  };
  /** The call is refused with `status` and `code`, and nothing the owner can read changed. */
  const refused = async (caller: Signed, method: string, path: string, body: unknown, status: number, code: string) => {
    const before = await snapshot();
    const res = await caller.call(method, path, { body });
    expect([res.status, res.body?.code]).toEqual([status, code]);
    expect(await snapshot()).toEqual(before);
    return res;
  };

  beforeAll(async () => {
    stack = await startConsoleStack('config-api');
    owner = await signIn(stack.aio.url, 'demo@example.com', DEMO_PASSWORD);
  }, 60_000);
  afterAll(() => stack.close());

  describe('locations', () => {
    it('creates a location with its review links and edits it', async () => {
      const created = await owner.call('POST', '/locations', {
        body: { name: 'Tverskaya', address: 'Tverskaya st. 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'google', url: 'https://search.google.com/local/writereview?placeid=ChIJLU7jZClu5kcR4PcOOO6p3I0' }] },
      });
      expect(created.status).toBe(201);
      expect(created.body.location).toMatchObject({ name: 'Tverskaya', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'google' }] });
      const id = created.body.location.id;
      const edited = await owner.call('PATCH', `/locations/${id}`, { body: { city: 'Moskva', reviewLinks: [{ provider: '2gis', url: 'https://2gis.ru/firm/70000001000000001/tab/reviews' }] } });
      expect(edited.status).toBe(200);
      expect(edited.body.location).toMatchObject({ name: 'Tverskaya', city: 'Moskva', reviewLinks: [{ provider: '2gis', url: 'https://2gis.ru/firm/70000001000000001/tab/reviews' }] });
      expect((await owner.call('GET', '/locations')).body.locations.find((l: { id: string }) => l.id === id).city).toBe('Moskva');
    });

    it('refuses a location without a name, with an unknown field or a link that is not https, and creates or changes nothing', async () => {
      await refused(owner, 'POST', '/locations', { name: '' }, 400, 'invalid_request');
      await refused(owner, 'POST', '/locations', { name: 'X', plan: 'pro' }, 400, 'invalid_request');
      const bad = await refused(owner, 'POST', '/locations', { name: 'X', reviewLinks: [{ provider: 'google', url: 'http://example.com/review' }] }, 400, 'invalid_request');
      expect(JSON.stringify(bad.body)).toContain('reviewLinks');
      const id = (await owner.call('GET', '/locations')).body.locations[0].id;
      await refused(owner, 'PATCH', `/locations/${id}`, { name: '' }, 400, 'invalid_request');
      await refused(owner, 'PATCH', `/locations/${id}`, { timeZone: 'Mars/Olympus' }, 400, 'invalid_request');
    });
  });

  describe('flows', () => {
    it('creates a flow with two steps as the default, edits its steps and response window, and makes another the default', async () => {
      const created = await owner.call('POST', '/flows', { body: { name: 'Email then SMS', isDefault: true, steps: [{ channel: 'EMAIL', delayMinutes: 0 }, { channel: 'SMS', delayMinutes: 1440 }] } });
      expect(created.status).toBe(201);
      expect(created.body.flow).toMatchObject({ isDefault: true, steps: [{ order: 1, channel: 'EMAIL', delayMinutes: 0 }, { order: 2, channel: 'SMS', delayMinutes: 1440 }], responseWindowMinutes: null });
      const flows = (await owner.call('GET', '/flows')).body.flows as Array<{ id: string; isDefault: boolean }>;
      expect(flows.filter((f) => f.isDefault).map((f) => f.id)).toEqual([created.body.flow.id]);

      const edited = await owner.call('PUT', `/flows/${created.body.flow.id}`, { body: { name: 'SMS only', steps: [{ channel: 'SMS', delayMinutes: 0 }], responseWindowMinutes: 60 } });
      expect(edited.status).toBe(200);
      expect(edited.body.flow).toMatchObject({ name: 'SMS only', isDefault: true, steps: [{ order: 1, channel: 'SMS', delayMinutes: 0 }], responseWindowMinutes: 60 });

      const other = flows.find((f) => f.id !== created.body.flow.id)!;
      const made = await owner.call('POST', `/flows/${other.id}/default`);
      expect([made.status, made.body.flow.isDefault]).toEqual([200, true]);
      const after = (await owner.call('GET', '/flows')).body.flows as Array<{ id: string; isDefault: boolean }>;
      expect(after.filter((f) => f.isDefault).map((f) => f.id)).toEqual([other.id]);
    });

    it('refuses no steps, too many, an unknown channel key, a negative delay or response window, and creates or changes nothing', async () => {
      await refused(owner, 'POST', '/flows', { name: 'none', steps: [] }, 400, 'invalid_request');
      await refused(owner, 'POST', '/flows', { name: 'many', steps: Array.from({ length: 11 }, () => ({ channel: 'EMAIL', delayMinutes: 0 })) }, 400, 'invalid_request');
      await refused(owner, 'POST', '/flows', { name: 'lower', steps: [{ channel: 'email', delayMinutes: 0 }] }, 400, 'invalid_request');
      await refused(owner, 'POST', '/flows', { name: 'negative', steps: [{ channel: 'EMAIL', delayMinutes: -1 }] }, 400, 'invalid_request');
      const id = (await owner.call('GET', '/flows')).body.flows[0].id;
      await refused(owner, 'PUT', `/flows/${id}`, { name: 'x', steps: [{ channel: 'EMAIL', delayMinutes: 0 }], responseWindowMinutes: -5 }, 400, 'invalid_request');
      await refused(owner, 'PUT', `/flows/${id}`, { name: '', steps: [{ channel: 'EMAIL', delayMinutes: 0 }] }, 400, 'invalid_request');
      await refused(owner, 'POST', '/flows/0190e0e0-0000-7000-8000-00000000dead/default', undefined, 404, 'not_found');
    });
  });

  describe('templates', () => {
    it('sets the SMS and email templates and goes back to the default', async () => {
      const sms = await owner.call('PUT', '/templates/SMS', { body: { body: '{{location}}: rate your visit {{link}}' } });
      expect([sms.status, sms.body.template]).toEqual([200, { channel: 'SMS', subject: '', body: '{{location}}: rate your visit {{link}}', isDefault: false }]);
      const email = await owner.call('PUT', '/templates/EMAIL', { body: { subject: 'How was {{location}}?', body: 'Hello {{name}}: {{link}}' } });
      expect(email.status).toBe(200);
      const listed = (await owner.call('GET', '/templates')).body.templates as Array<{ channel: string; body: string; isDefault: boolean }>;
      // MAX and TELEGRAM use the SMS template.
      expect(listed.filter((x) => !x.isDefault).map((x) => x.channel).sort()).toEqual(['EMAIL', 'MAX', 'SMS', 'TELEGRAM']);
      expect(listed.find((x) => x.channel === 'MAX')!.body).toBe('{{location}}: rate your visit {{link}}');
      const reset = await owner.call('DELETE', '/templates/SMS');
      expect([reset.status, reset.body.template.isDefault]).toEqual([200, true]);
    });

    it('refuses a template without {{link}}, an unknown placeholder, an email without a subject, a subject on SMS or a messenger template of its own, and changes nothing', async () => {
      await refused(owner, 'PUT', '/templates/SMS', { body: 'no link here' }, 400, 'invalid_request');
      await refused(owner, 'PUT', '/templates/SMS', { body: '{{link}} {{surname}}' }, 400, 'invalid_request');
      await refused(owner, 'PUT', '/templates/EMAIL', { body: 'Hi {{link}}' }, 400, 'invalid_request');
      await refused(owner, 'PUT', '/templates/SMS', { subject: 'no', body: '{{link}}' }, 400, 'invalid_request');
      await refused(owner, 'PUT', '/templates/MAX', { body: 'own {{link}}' }, 400, 'invalid_request');
      await refused(owner, 'PUT', '/templates/sms', { body: '{{link}}' }, 404, 'not_found');
    });
  });

  describe('channels and settings', () => {
    it("shows each channel configured, running and ready, and the organization's SMS balance", async () => {
      const res = await owner.call('GET', '/channels');
      expect(res.status).toBe(200);
      const byKey = Object.fromEntries((res.body.channels as Array<{ channel: string; capabilities: string[] }>).map((c) => [c.channel, c]));
      expect(byKey.EMAIL).toMatchObject({ configured: true, running: true, available: true, ready: true, sender: 'channel-email' });
      expect(byKey.SMS).toMatchObject({ configured: true, running: true, sender: 'channel-sms' });
      expect(byKey.SMS.capabilities).toContain('balance');
      const settings = (await owner.call('GET', '/settings')).body.organization;
      expect(res.body.smsBalance).toBe(settings.smsBalance);
      expect(typeof res.body.smsBalance).toBe('number');
    });

    it("shows a running channel whose account can't send now with the reason, and a configured channel no sender runs", async () => {
      const statusOf = async (key: string) => ((await owner.call('GET', '/channels')).body.channels as Array<{ channel: string }>).find((c) => c.channel === key);
      // A messenger sender announces VIBER with its working account blocked (as channel-messenger's account health does).
      const announced = await announceChannels({
        bus: stack.aio.bus,
        logger: testContext('config-api-viber').logger,
        entries: [{ key: 'VIBER', slug: 'viber', label: 'Viber', contactField: 'phone', capabilities: ['send'], sender: 'channel-viber', position: 50, unavailable: true, unavailableReason: 'account_blocked' }],
      });
      try {
        await waitFor(async () => (await statusOf('VIBER')) !== undefined, { what: 'VIBER in the catalog' });
        expect(await statusOf('VIBER')).toEqual({ channel: 'VIBER', label: 'Viber', configured: false, running: true, available: false, unavailableReason: 'account_blocked', sender: 'channel-viber', capabilities: ['send'], ready: false, providers: [], delivers: true });
        expect((await stack.admin('PUT', `/organizations/${stack.aio.demo.organizationId}/channels/VIBER`, { configured: true })).status).toBe(200);
        await announced.setAvailability('VIBER', { available: true });
        await waitFor(async () => (await statusOf('VIBER') as { ready?: boolean } | undefined)?.ready === true, { what: 'VIBER ready' });
      } finally {
        announced.stop();
      }
      expect((await stack.admin('PUT', `/organizations/${stack.aio.demo.organizationId}/channels/WHATSAPP`, { configured: true })).status).toBe(200);
      expect(await statusOf('WHATSAPP')).toEqual({ channel: 'WHATSAPP', label: 'WHATSAPP', configured: true, running: false, available: false, unavailableReason: null, sender: null, capabilities: [], ready: false, providers: [], delivers: false });
    });

    it('changes the send window, cooldown, consent, name, locale and time zone; the plan stays the operator’s', async () => {
      const res = await owner.call('PATCH', '/settings', { body: { sendWindow: { start: '10:00', end: '20:00', days: [1, 2, 3, 4, 5] }, cooldownDays: 14, requireConsent: true, name: 'Demo Coffee Co', locale: 'ru', timeZone: 'Europe/Moscow' } });
      expect(res.status).toBe(200);
      expect(res.body.organization).toMatchObject({ sendWindow: { start: '10:00', end: '20:00', days: [1, 2, 3, 4, 5] }, cooldownDays: 14, requireConsent: true, name: 'Demo Coffee Co', locale: 'ru', timeZone: 'Europe/Moscow' });
      const off = await owner.call('PATCH', '/settings', { body: { sendWindow: null } });
      expect([off.status, off.body.organization.sendWindow, off.body.organization.cooldownDays]).toEqual([200, null, 14]);
    });

    it('refuses the plan, the balance, a bad window, cooldown or time zone, and changes nothing', async () => {
      await refused(owner, 'PATCH', '/settings', { plan: 'pro' }, 400, 'invalid_request');
      await refused(owner, 'PATCH', '/settings', { smsBalance: 1_000_000 }, 400, 'invalid_request');
      await refused(owner, 'PATCH', '/settings', { sendWindow: { start: '25:00', end: '20:00' } }, 400, 'invalid_request');
      await refused(owner, 'PATCH', '/settings', { cooldownDays: 366 }, 400, 'invalid_request');
      await refused(owner, 'PATCH', '/settings', { cooldownDays: 7, timeZone: 'Mars/Olympus' }, 400, 'invalid_request');
    });
  });

  it('lets a viewer read every configuration page but change nothing: 403 read_only_role', async () => {
    const viewer = await addMember(stack, stack.aio.demo.organizationId, 'config-viewer@example.com', 'viewer');
    for (const path of ['/locations', '/flows', '/templates', '/channels', '/settings']) expect([path, (await viewer.call('GET', path)).status]).toEqual([path, 200]);
    const locationId = (await owner.call('GET', '/locations')).body.locations[0].id;
    const flowId = (await owner.call('GET', '/flows')).body.flows[0].id;
    await refused(viewer, 'POST', '/locations', { name: 'Viewer point' }, 403, 'read_only_role');
    await refused(viewer, 'PATCH', `/locations/${locationId}`, { name: 'Viewer point' }, 403, 'read_only_role');
    await refused(viewer, 'POST', '/flows', { name: 'v', steps: [{ channel: 'EMAIL', delayMinutes: 0 }] }, 403, 'read_only_role');
    await refused(viewer, 'PUT', `/flows/${flowId}`, { name: 'v', steps: [{ channel: 'EMAIL', delayMinutes: 0 }] }, 403, 'read_only_role');
    await refused(viewer, 'POST', `/flows/${flowId}/default`, undefined, 403, 'read_only_role');
    await refused(viewer, 'PUT', '/templates/SMS', { body: 'viewer {{link}}' }, 403, 'read_only_role');
    await refused(viewer, 'DELETE', '/templates/EMAIL', undefined, 403, 'read_only_role');
    await refused(viewer, 'PATCH', '/settings', { cooldownDays: 1 }, 403, 'read_only_role');
  });

  it("keeps each organization to its own: another organization's location and flow ids are 404, nothing changes", async () => {
    const org = await stack.admin('POST', '/organizations', { name: 'Other Org', plan: 'standard', emailConfirmed: true });
    expect(org.status).toBe(201);
    const other = await addMember(stack, org.body.organization.id, 'config-other@example.com', 'owner');
    const locationId = (await owner.call('GET', '/locations')).body.locations[0].id;
    const flowId = (await owner.call('GET', '/flows')).body.flows[0].id;
    await refused(other, 'PATCH', `/locations/${locationId}`, { name: 'Taken' }, 404, 'not_found');
    await refused(other, 'PUT', `/flows/${flowId}`, { name: 'Taken', steps: [{ channel: 'EMAIL', delayMinutes: 0 }] }, 404, 'not_found');
    await refused(other, 'POST', `/flows/${flowId}/default`, undefined, 404, 'not_found');
    expect((await other.call('GET', '/locations')).body.locations).toEqual([]);
    expect((await other.call('GET', '/flows')).body.flows).toEqual([]);
    // Its own settings are its own: a change there leaves the demo organization's alone.
    const before = (await owner.call('GET', '/settings')).body.organization;
    expect((await other.call('PATCH', '/settings', { body: { cooldownDays: 3 } })).status).toBe(200);
    expect((await other.call('GET', '/settings')).body.organization).toMatchObject({ name: 'Other Org', cooldownDays: 3 });
    expect((await owner.call('GET', '/settings')).body.organization).toEqual(before);
  });
});
