import type { contactsV1 } from '@rrs/proto';
import { count, failure, queryRows, startHarness, type ContactsHarness } from './harness';

/** Templates, channel configuration, the sending profile and the SMS balance, over real gRPC and PostgreSQL. */
describe('sending setup over gRPC', () => {
  let h: ContactsHarness;
  beforeAll(async () => {
    h = await startHarness('contacts-sending');
  });
  afterAll(() => h.close());

  const newOrg = async (over: Partial<contactsV1.CreateOrganizationRequest> = {}) =>
    (await h.client.createOrganization({ name: 'Acme', plan: 'standard', emailConfirmed: true, smsBalance: 0, timeZone: '', locale: 'en', defaultRegion: '', ...over })).organization!;

  describe('templates', () => {
    it('default to the locale of the organization for every known channel', async () => {
      const en = (await h.client.listTemplates({ organizationId: (await newOrg({ locale: 'en' })).id })).templates;
      const ru = (await h.client.listTemplates({ organizationId: (await newOrg({ locale: 'ru' })).id })).templates;
      expect(en.map((t) => t.channel)).toEqual(['EMAIL', 'SMS', 'MAX', 'TELEGRAM']);
      expect(en.every((t) => t.isDefault && t.body.includes('{{link}}'))).toBe(true);
      expect(en[0].subject).toMatch(/visit/);
      expect(ru[0].subject).toMatch(/визит/);
      expect(ru[1]).toMatchObject({ channel: 'SMS', subject: '' });
      expect(ru[1].body).not.toContain('\n');
    });

    it('are set per channel, including channels added later, and reset to the default', async () => {
      const o = await newOrg();
      const email = (await h.client.setTemplate({ organizationId: o.id, channel: 'EMAIL', subject: 'Rate {{location}}', body: 'Hi {{name}}: {{link}}' })).template;
      expect(email).toEqual({ channel: 'EMAIL', subject: 'Rate {{location}}', body: 'Hi {{name}}: {{link}}', isDefault: false });
      await h.client.setTemplate({ organizationId: o.id, channel: 'WHATSAPP', subject: '', body: 'Rate us {{link}}' });
      const list = (await h.client.listTemplates({ organizationId: o.id })).templates;
      expect(list.map((t) => [t.channel, t.isDefault])).toEqual([['EMAIL', false], ['SMS', true], ['MAX', true], ['TELEGRAM', true], ['WHATSAPP', false]]);
      const reset = (await h.client.resetTemplate({ organizationId: o.id, channel: 'EMAIL' })).template!;
      expect(reset.isDefault).toBe(true);
      expect((await h.client.listTemplates({ organizationId: o.id })).templates[0]).toEqual(reset);
    });

    it.each<[string, Partial<contactsV1.SetTemplateRequest>, string]>([
      ['an EMAIL template without a subject', { channel: 'EMAIL', subject: '', body: '{{link}}' }, '/subject'],
      ['a subject on an SMS template', { channel: 'SMS', subject: 'Hi', body: '{{link}}' }, '/subject'],
      ['a body without {{link}}', { channel: 'SMS', subject: '', body: 'Rate us please' }, '/body'],
      ['an unknown placeholder', { channel: 'SMS', subject: '', body: '{{link}} {{surname}}' }, '/body'],
      ['a body over 4000 characters', { channel: 'SMS', subject: '', body: `{{link}}${'x'.repeat(4000)}` }, '/body'],
      ['a lower-case channel key', { channel: 'sms', subject: '', body: '{{link}}' }, '/channel'],
    ])('refuse %s with 400 and store nothing', async (_l, t, pointer) => {
      const o = await newOrg();
      const err = await failure(h.client.setTemplate({ organizationId: o.id, channel: 'SMS', subject: '', body: '', ...t }));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect((err.details as { errors: Array<{ pointer: string }> }).errors.map((e) => e.pointer)).toContain(pointer);
      expect(await count(h, 'message_templates', 'organization_id = $1', [o.id])).toBe(0);
    });

    it('are 404 for an unknown organization', async () => {
      expect(await failure(h.client.setTemplate({ organizationId: '0190c3c4-0000-7000-8000-000000000000', channel: 'SMS', subject: '', body: '{{link}}' }))).toMatchObject({ status: 404, code: 'not_found' });
    });
  });

  describe('channel configuration', () => {
    it('starts with no channel configured and records each change', async () => {
      const o = await newOrg();
      expect((await h.client.listChannelConfigurations({ organizationId: o.id })).channels).toEqual([
        { channel: 'EMAIL', configured: false }, { channel: 'SMS', configured: false }, { channel: 'MAX', configured: false }, { channel: 'TELEGRAM', configured: false },
      ]);
      await h.client.setChannelConfiguration({ organizationId: o.id, channel: 'EMAIL', configured: true });
      await h.client.setChannelConfiguration({ organizationId: o.id, channel: 'VIBER_2', configured: true });
      await h.client.setChannelConfiguration({ organizationId: o.id, channel: 'EMAIL', configured: false });
      await h.client.setChannelConfiguration({ organizationId: o.id, channel: 'SMS', configured: true });
      expect((await h.client.listChannelConfigurations({ organizationId: o.id })).channels).toEqual([
        { channel: 'EMAIL', configured: false }, { channel: 'SMS', configured: true }, { channel: 'MAX', configured: false }, { channel: 'TELEGRAM', configured: false }, { channel: 'VIBER_2', configured: true },
      ]);
    });

    it.each(['email', '1SMS', 'SMS-2', '', 'A'.repeat(33)])('refuses the channel key %j and stores nothing', async (channel) => {
      const o = await newOrg();
      expect(await failure(h.client.setChannelConfiguration({ organizationId: o.id, channel, configured: true }))).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(await count(h, 'channel_configurations', 'organization_id = $1', [o.id])).toBe(0);
    });
  });

  it('GetSendingProfile answers the organization, its effective templates and its channels', async () => {
    const o = await newOrg({ locale: 'ru', smsBalance: 7 });
    await h.client.setTemplate({ organizationId: o.id, channel: 'SMS', subject: '', body: 'Оцените: {{link}}' });
    await h.client.setChannelConfiguration({ organizationId: o.id, channel: 'SMS', configured: true });
    const p = await h.client.getSendingProfile({ organizationId: o.id });
    expect(p.organization).toMatchObject({ id: o.id, plan: 'standard', emailConfirmed: true, smsBalance: 7, locale: 'ru' });
    expect(p.templates.find((t) => t.channel === 'SMS')).toEqual({ channel: 'SMS', subject: '', body: 'Оцените: {{link}}', isDefault: false });
    expect(p.templates.find((t) => t.channel === 'EMAIL')!.isDefault).toBe(true);
    expect(p.channels).toContainEqual({ channel: 'SMS', configured: true });
    expect(p.channels).toContainEqual({ channel: 'EMAIL', configured: false });
    expect(await failure(h.client.getSendingProfile({ organizationId: '0190c3c4-0000-7000-8000-000000000000' }))).toMatchObject({ status: 404, code: 'not_found' });
  });

  describe('SMS balance', () => {
    const balanceOf = async (id: string) => (await h.client.getOrganization({ id })).organization!.smsBalance;
    const ledgerSum = async (id: string) => (await queryRows<{ s: number }>(h, 'SELECT coalesce(sum(delta), 0)::int AS s FROM contacts.sms_ledger WHERE organization_id = $1', [id]))[0].s;

    it('debits once per step: a repeat returns the first outcome', async () => {
      const o = await newOrg({ smsBalance: 5 });
      expect(await h.client.debitSmsBalance({ organizationId: o.id, stepId: 'step-a', parts: 2 })).toEqual({ debited: true, balance: 3 });
      expect(await h.client.debitSmsBalance({ organizationId: o.id, stepId: 'step-a', parts: 2 })).toEqual({ debited: true, balance: 3 });
      expect(await balanceOf(o.id)).toBe(3);
      expect(await ledgerSum(o.id)).toBe(3);
    });

    it('refuses a debit larger than the balance, changes nothing, and keeps refusing that step after a credit', async () => {
      const o = await newOrg({ smsBalance: 1 });
      expect(await h.client.debitSmsBalance({ organizationId: o.id, stepId: 'step-b', parts: 2 })).toEqual({ debited: false, balance: 1 });
      expect(await balanceOf(o.id)).toBe(1);
      expect(await h.client.creditSmsBalance({ organizationId: o.id, parts: 10, reason: 'invoice 7' })).toEqual({ balance: 11 });
      expect(await h.client.debitSmsBalance({ organizationId: o.id, stepId: 'step-b', parts: 2 })).toEqual({ debited: false, balance: 1 });
      expect(await balanceOf(o.id)).toBe(11);
      expect(await ledgerSum(o.id)).toBe(11);
    });

    it('never goes below zero under concurrent debits, and debits a concurrently repeated step once', async () => {
      const o = await newOrg({ smsBalance: 10 });
      const distinct = await Promise.all(Array.from({ length: 15 }, (_v, i) => h.client.debitSmsBalance({ organizationId: o.id, stepId: `c-${i}`, parts: 1 })));
      expect(distinct.filter((r) => r.debited)).toHaveLength(10);
      expect(await balanceOf(o.id)).toBe(0);
      await h.client.creditSmsBalance({ organizationId: o.id, parts: 5, reason: '' });
      const same = await Promise.all(Array.from({ length: 6 }, () => h.client.debitSmsBalance({ organizationId: o.id, stepId: 'same', parts: 3 })));
      expect(same.every((r) => r.debited && r.balance === 2)).toBe(true);
      expect(await balanceOf(o.id)).toBe(2);
      expect(await ledgerSum(o.id)).toBe(2);
    });

    it.each([
      ['zero parts', { stepId: 'z', parts: 0 }, '/parts'],
      ['an empty step id', { stepId: '', parts: 1 }, '/stepId'],
    ])('refuses a debit of %s with 400 and changes nothing', async (_l, req, pointer) => {
      const o = await newOrg({ smsBalance: 3 });
      const err = await failure(h.client.debitSmsBalance({ organizationId: o.id, ...req }));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request', details: { errors: [{ pointer }] } });
      expect(await balanceOf(o.id)).toBe(3);
      expect(await count(h, 'sms_ledger', "organization_id = $1 AND kind = 'debit'", [o.id])).toBe(0);
    });

    it('refuses a step id already debited for another organization', async () => {
      const a = await newOrg({ smsBalance: 3 });
      const b = await newOrg({ smsBalance: 3 });
      await h.client.debitSmsBalance({ organizationId: a.id, stepId: 'cross', parts: 1 });
      expect(await failure(h.client.debitSmsBalance({ organizationId: b.id, stepId: 'cross', parts: 1 }))).toMatchObject({ status: 409, code: 'step_id_reused' });
      expect(await balanceOf(b.id)).toBe(3);
    });

    it('refuses a credit of zero and unknown organizations', async () => {
      const o = await newOrg({ smsBalance: 3 });
      expect(await failure(h.client.creditSmsBalance({ organizationId: o.id, parts: 0, reason: '' }))).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(await balanceOf(o.id)).toBe(3);
      const unknown = '0190c3c4-0000-7000-8000-000000000000';
      expect(await failure(h.client.creditSmsBalance({ organizationId: unknown, parts: 1, reason: '' }))).toMatchObject({ status: 404, code: 'not_found' });
      expect(await failure(h.client.debitSmsBalance({ organizationId: unknown, stepId: 'u', parts: 1 }))).toMatchObject({ status: 404, code: 'not_found' });
    });
  });
});
