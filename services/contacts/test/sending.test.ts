import { contactsV1 } from '@rrs/proto';
import { createGrpcClient } from '@rrs/runtime';
import { testContext } from '@rrs/testkit';
import { startContacts } from '../src';
import { count, failure, queryRows, startHarness, type ContactsHarness } from './harness';

/** Templates, channel configuration, the sending profile and the SMS balance, over real gRPC and PostgreSQL. */
describe('sending setup over gRPC', () => {
  let harness: ContactsHarness;
  beforeAll(async () => {
    harness = await startHarness('contacts-sending');
  });
  afterAll(() => harness.close());

  const newOrg = async (over: Partial<contactsV1.CreateOrganizationRequest> = {}) =>
    (await harness.client.createOrganization({ name: 'Acme', plan: 'standard', emailConfirmed: true, smsBalance: 0, timeZone: '', locale: 'en', defaultRegion: '', ...over })).organization!;

  describe('templates', () => {
    it('default to the locale of the organization for every known channel', async () => {
      const en = (await harness.client.listTemplates({ organizationId: (await newOrg({ locale: 'en' })).id })).templates;
      const ru = (await harness.client.listTemplates({ organizationId: (await newOrg({ locale: 'ru' })).id })).templates;
      expect(en.map((template) => template.channel)).toEqual(['EMAIL', 'SMS', 'MAX', 'TELEGRAM']);
      expect(en.every((template) => template.isDefault && template.body.includes('{{link}}'))).toBe(true);
      expect(en[0].subject).toMatch(/visit/);
      expect(ru[0].subject).toMatch(/визит/);
      expect(ru[1]).toMatchObject({ channel: 'SMS', subject: '' });
      expect(ru[1].body).not.toContain('\n');
    });

    it('are set per channel, including channels added later, and reset to the default', async () => {
      const organization = await newOrg();
      const email = (await harness.client.setTemplate({ organizationId: organization.id, channel: 'EMAIL', subject: 'Rate {{location}}', body: 'Hi {{name}}: {{link}}' })).template;
      expect(email).toEqual({ channel: 'EMAIL', subject: 'Rate {{location}}', body: 'Hi {{name}}: {{link}}', isDefault: false });
      await harness.client.setTemplate({ organizationId: organization.id, channel: 'WHATSAPP', subject: '', body: 'Rate us {{link}}' });
      const list = (await harness.client.listTemplates({ organizationId: organization.id })).templates;
      expect(list.map((template) => [template.channel, template.isDefault])).toEqual([['EMAIL', false], ['SMS', true], ['MAX', true], ['TELEGRAM', true], ['WHATSAPP', false]]);
      const reset = (await harness.client.resetTemplate({ organizationId: organization.id, channel: 'EMAIL' })).template!;
      expect(reset.isDefault).toBe(true);
      expect((await harness.client.listTemplates({ organizationId: organization.id })).templates[0]).toEqual(reset);
    });

    it.each<[string, Partial<contactsV1.SetTemplateRequest>, string]>([
      ['an EMAIL template without a subject', { channel: 'EMAIL', subject: '', body: '{{link}}' }, '/subject'],
      ['a subject on an SMS template', { channel: 'SMS', subject: 'Hi', body: '{{link}}' }, '/subject'],
      ['a body without {{link}}', { channel: 'SMS', subject: '', body: 'Rate us please' }, '/body'],
      ['an unknown placeholder', { channel: 'SMS', subject: '', body: '{{link}} {{surname}}' }, '/body'],
      ['a body over 4000 characters', { channel: 'SMS', subject: '', body: `{{link}}${'x'.repeat(4000)}` }, '/body'],
      ['a lower-case channel key', { channel: 'sms', subject: '', body: '{{link}}' }, '/channel'],
      ['a MAX template (MAX sends the SMS text)', { channel: 'MAX', subject: '', body: 'Hi {{link}}' }, '/channel'],
      ['a TELEGRAM template (TELEGRAM sends the SMS text)', { channel: 'TELEGRAM', subject: '', body: 'Hi {{link}}' }, '/channel'],
    ])('refuse %s with 400 and store nothing', async (_label, template, pointer) => {
      const organization = await newOrg();
      const err = await failure(harness.client.setTemplate({ organizationId: organization.id, channel: 'SMS', subject: '', body: '', ...template }));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect((err.details as { errors: Array<{ pointer: string }> }).errors.map((e) => e.pointer)).toContain(pointer);
      expect(await count(harness, 'message_templates', 'organization_id = $1', [organization.id])).toBe(0);
    });

    it('show MAX and TELEGRAM the SMS template they send, the organization\'s own once set', async () => {
      const organization = await newOrg();
      const shown = async () => (await harness.client.listTemplates({ organizationId: organization.id })).templates.map((t) => [t.channel, t.body, t.isDefault]);
      const [, sms, max, telegram] = await shown();
      expect([max[1], telegram[1]]).toEqual([sms[1], sms[1]]);
      await harness.client.setTemplate({ organizationId: organization.id, channel: 'SMS', subject: '', body: 'Our text {{link}}' });
      expect((await shown()).slice(1)).toEqual([['SMS', 'Our text {{link}}', false], ['MAX', 'Our text {{link}}', false], ['TELEGRAM', 'Our text {{link}}', false]]);
    });

    it('are 404 for an unknown organization', async () => {
      expect(await failure(harness.client.setTemplate({ organizationId: '0190c3c4-0000-7000-8000-000000000000', channel: 'SMS', subject: '', body: '{{link}}' }))).toMatchObject({ status: 404, code: 'not_found' });
    });
  });

  describe('channel configuration', () => {
    it('starts with no channel configured and records each change', async () => {
      const organization = await newOrg();
      expect((await harness.client.listChannelConfigurations({ organizationId: organization.id })).channels).toEqual([
        { channel: 'EMAIL', configured: false }, { channel: 'SMS', configured: false }, { channel: 'MAX', configured: false }, { channel: 'TELEGRAM', configured: false },
      ]);
      await harness.client.setChannelConfiguration({ organizationId: organization.id, channel: 'EMAIL', configured: true });
      await harness.client.setChannelConfiguration({ organizationId: organization.id, channel: 'VIBER_2', configured: true });
      await harness.client.setChannelConfiguration({ organizationId: organization.id, channel: 'EMAIL', configured: false });
      await harness.client.setChannelConfiguration({ organizationId: organization.id, channel: 'SMS', configured: true });
      expect((await harness.client.listChannelConfigurations({ organizationId: organization.id })).channels).toEqual([
        { channel: 'EMAIL', configured: false }, { channel: 'SMS', configured: true }, { channel: 'MAX', configured: false }, { channel: 'TELEGRAM', configured: false }, { channel: 'VIBER_2', configured: true },
      ]);
    });

    it.each(['email', '1SMS', 'SMS-2', '', 'A'.repeat(33)])('refuses the channel key %j and stores nothing', async (channel) => {
      const organization = await newOrg();
      expect(await failure(harness.client.setChannelConfiguration({ organizationId: organization.id, channel, configured: true }))).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(await count(harness, 'channel_configurations', 'organization_id = $1', [organization.id])).toBe(0);
    });
  });

  it('GetSendingProfile with a location answers what the organization, list and location reads answer, and not_found for a location not there', async () => {
    const organization = await newOrg({ locale: 'en' });
    await harness.client.setTemplate({ organizationId: organization.id, channel: 'EMAIL', subject: 'Rate {{location}}', body: 'Hi {{name}}: {{link}}' });
    await harness.client.setTemplate({ organizationId: organization.id, channel: 'WHATSAPP', subject: '', body: 'Rate us {{link}}' });
    await harness.client.setChannelConfiguration({ organizationId: organization.id, channel: 'VIBER_2', configured: true });
    await harness.client.setChannelConfiguration({ organizationId: organization.id, channel: 'EMAIL', configured: true });
    const location = (await harness.client.createLocation({
      organizationId: organization.id, name: 'Main st.', address: 'Main st. 1', city: 'Moscow', timeZone: 'Europe/Moscow',
      reviewLinks: [{ provider: 'yandex', url: 'https://yandex.ru/maps/org/1' }], sendWindow: { window: { start: '09:00', end: '21:00', days: [], channels: [] } },
    })).location!;

    const profile = await harness.client.getSendingProfile({ organizationId: organization.id, locationId: location.id.toUpperCase() });
    expect(profile.organization).toEqual((await harness.client.getOrganization({ id: organization.id })).organization);
    expect(profile.templates).toEqual((await harness.client.listTemplates({ organizationId: organization.id })).templates);
    expect(profile.channels).toEqual((await harness.client.listChannelConfigurations({ organizationId: organization.id })).channels);
    expect(profile.location).toEqual((await harness.client.getLocation({ organizationId: organization.id, id: location.id })).location);
    expect((await harness.client.getSendingProfile({ organizationId: organization.id, locationId: '' })).location).toBeUndefined();

    const foreign = (await harness.client.createLocation({ organizationId: (await newOrg()).id, name: 'Theirs', address: '', city: '', timeZone: '', reviewLinks: [] })).location!;
    const gone = (await harness.client.createLocation({ organizationId: organization.id, name: 'Gone', address: '', city: '', timeZone: '', reviewLinks: [] })).location!;
    await harness.client.deleteLocation({ organizationId: organization.id, id: gone.id });
    for (const locationId of [foreign.id, gone.id, 'not-a-uuid']) {
      expect(await failure(harness.client.getSendingProfile({ organizationId: organization.id, locationId }))).toMatchObject({ status: 404, code: 'not_found', message: expect.stringContaining(`location ${locationId}`) });
    }
    expect(await failure(harness.client.getSendingProfile({ organizationId: '0190c3c4-0000-7000-8000-000000000000', locationId: location.id }))).toMatchObject({ status: 404, code: 'not_found', message: expect.stringContaining('organization') });
  });

  it('GetSendingProfile answers the organization, its effective templates and its channels', async () => {
    const organization = await newOrg({ locale: 'ru', smsBalance: 7 });
    await harness.client.setTemplate({ organizationId: organization.id, channel: 'SMS', subject: '', body: 'Оцените: {{link}}' });
    await harness.client.setChannelConfiguration({ organizationId: organization.id, channel: 'SMS', configured: true });
    const profile = await harness.client.getSendingProfile({ organizationId: organization.id, locationId: '' });
    expect(profile.organization).toMatchObject({ id: organization.id, plan: 'standard', emailConfirmed: true, smsBalance: 7, locale: 'ru' });
    expect(profile.templates.find((template) => template.channel === 'SMS')).toEqual({ channel: 'SMS', subject: '', body: 'Оцените: {{link}}', isDefault: false });
    expect(profile.templates.find((template) => template.channel === 'EMAIL')!.isDefault).toBe(true);
    expect(profile.channels).toContainEqual({ channel: 'SMS', configured: true });
    expect(profile.channels).toContainEqual({ channel: 'EMAIL', configured: false });
    expect(await failure(harness.client.getSendingProfile({ organizationId: '0190c3c4-0000-7000-8000-000000000000', locationId: '' }))).toMatchObject({ status: 404, code: 'not_found' });
  });

  describe('SMS balance', () => {
    const balanceOf = async (id: string) => (await harness.client.getOrganization({ id })).organization!.smsBalance;
    const ledgerSum = async (id: string) => (await queryRows<{ total: number }>(harness, 'SELECT coalesce(sum(delta), 0)::int AS total FROM contacts.sms_ledger WHERE organization_id = $1', [id]))[0].total;

    it('debits once per step: a repeat returns the first outcome', async () => {
      const organization = await newOrg({ smsBalance: 5 });
      expect(await harness.client.debitSmsBalance({ organizationId: organization.id, stepId: 'step-a', parts: 2 })).toEqual({ debited: true, balance: 3 });
      expect(await harness.client.debitSmsBalance({ organizationId: organization.id, stepId: 'step-a', parts: 2 })).toEqual({ debited: true, balance: 3 });
      expect(await balanceOf(organization.id)).toBe(3);
      expect(await ledgerSum(organization.id)).toBe(3);
    });

    it('refuses a debit larger than the balance, changes nothing, and keeps refusing that step after a credit', async () => {
      const organization = await newOrg({ smsBalance: 1 });
      expect(await harness.client.debitSmsBalance({ organizationId: organization.id, stepId: 'step-b', parts: 2 })).toEqual({ debited: false, balance: 1 });
      expect(await balanceOf(organization.id)).toBe(1);
      expect(await harness.client.creditSmsBalance({ organizationId: organization.id, parts: 10, reason: 'invoice 7' })).toEqual({ balance: 11 });
      expect(await harness.client.debitSmsBalance({ organizationId: organization.id, stepId: 'step-b', parts: 2 })).toEqual({ debited: false, balance: 1 });
      expect(await balanceOf(organization.id)).toBe(11);
      expect(await ledgerSum(organization.id)).toBe(11);
    });

    it('never goes below zero under concurrent debits, and debits a concurrently repeated step once', async () => {
      const organization = await newOrg({ smsBalance: 10 });
      const distinct = await Promise.all(Array.from({ length: 15 }, (_v, i) => harness.client.debitSmsBalance({ organizationId: organization.id, stepId: `c-${i}`, parts: 1 })));
      expect(distinct.filter((outcome) => outcome.debited)).toHaveLength(10);
      expect(await balanceOf(organization.id)).toBe(0);
      await harness.client.creditSmsBalance({ organizationId: organization.id, parts: 5, reason: '' });
      const same = await Promise.all(Array.from({ length: 6 }, () => harness.client.debitSmsBalance({ organizationId: organization.id, stepId: 'same', parts: 3 })));
      expect(same.every((outcome) => outcome.debited && outcome.balance === 2)).toBe(true);
      expect(await balanceOf(organization.id)).toBe(2);
      expect(await ledgerSum(organization.id)).toBe(2);
    });

    it.each([
      ['zero parts', { stepId: 'z', parts: 0 }, '/parts'],
      ['an empty step id', { stepId: '', parts: 1 }, '/stepId'],
    ])('refuses a debit of %s with 400 and changes nothing', async (_label, req, pointer) => {
      const organization = await newOrg({ smsBalance: 3 });
      const err = await failure(harness.client.debitSmsBalance({ organizationId: organization.id, ...req }));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request', details: { errors: [{ pointer }] } });
      expect(await balanceOf(organization.id)).toBe(3);
      expect(await count(harness, 'sms_ledger', "organization_id = $1 AND kind = 'debit'", [organization.id])).toBe(0);
    });

    it('refuses a step id already debited for another organization', async () => {
      const first = await newOrg({ smsBalance: 3 });
      const second = await newOrg({ smsBalance: 3 });
      await harness.client.debitSmsBalance({ organizationId: first.id, stepId: 'cross', parts: 1 });
      expect(await failure(harness.client.debitSmsBalance({ organizationId: second.id, stepId: 'cross', parts: 1 }))).toMatchObject({ status: 409, code: 'step_id_reused' });
      expect(await balanceOf(second.id)).toBe(3);
    });

    it('answers each of concurrent debits on its own: one failing call (unknown organization, step id of another) fails alone', async () => {
      const first = await newOrg({ smsBalance: 4 });
      const second = await newOrg({ smsBalance: 2 });
      await harness.client.debitSmsBalance({ organizationId: first.id, stepId: 'mixed-taken', parts: 1 });
      const unknown = '0190c3c4-0000-7000-8000-000000000001';
      const calls = [
        harness.client.debitSmsBalance({ organizationId: first.id, stepId: 'mixed-1', parts: 2 }),
        harness.client.debitSmsBalance({ organizationId: unknown, stepId: 'mixed-2', parts: 1 }),
        harness.client.debitSmsBalance({ organizationId: second.id, stepId: 'mixed-taken', parts: 1 }),
        harness.client.debitSmsBalance({ organizationId: second.id, stepId: 'mixed-3', parts: 2 }),
        harness.client.debitSmsBalance({ organizationId: second.id, stepId: 'mixed-4', parts: 1 }),
        harness.client.debitSmsBalance({ organizationId: first.id, stepId: 'mixed-5', parts: 1 }),
      ].map((call) => call.then((answer) => ({ answer }), async (err: unknown) => ({ err: await failure(Promise.reject(err)) })));
      const [one, two, three, four, five, six] = await Promise.all(calls);
      expect(one).toEqual({ answer: { debited: true, balance: expect.any(Number) } });
      expect(two).toMatchObject({ err: { status: 404, code: 'not_found' } });
      expect(three).toMatchObject({ err: { status: 409, code: 'step_id_reused' } });
      // The second organization has 2 parts: whichever of mixed-3 (2) and mixed-4 (1) comes first is debited.
      expect([four, five].filter((r) => 'answer' in r && r.answer.debited)).toHaveLength(1);
      expect(six).toEqual({ answer: { debited: true, balance: expect.any(Number) } });
      expect(await balanceOf(first.id)).toBe(0);
      expect(await ledgerSum(first.id)).toBe(0);
      expect(await balanceOf(second.id)).toBe(await ledgerSum(second.id));
      expect(await count(harness, 'sms_ledger', "step_id = 'mixed-2'", [])).toBe(0);
      expect(await count(harness, 'sms_ledger', "step_id = 'mixed-taken'", [])).toBe(1);
    });

    it('applies several debits in one DebitSmsBalances call, each answered in order with its own outcome or error', async () => {
      const first = await newOrg({ smsBalance: 3 });
      const second = await newOrg({ smsBalance: 5 });
      await harness.client.debitSmsBalance({ organizationId: first.id, stepId: 'many-taken', parts: 1 });
      await harness.client.debitSmsBalance({ organizationId: first.id, stepId: 'many-earlier', parts: 1 });
      const unknown = '0190c3c4-0000-7000-8000-000000000002';
      const { outcomes } = await harness.client.debitSmsBalances({
        debits: [
          { organizationId: first.id, stepId: 'many-1', parts: 1 },
          { organizationId: unknown, stepId: 'many-2', parts: 1 },
          { organizationId: second.id, stepId: 'many-taken', parts: 1 },
          { organizationId: first.id, stepId: 'many-3', parts: 2 },
          { organizationId: second.id, stepId: 'many-4', parts: 0 },
          { organizationId: first.id, stepId: 'many-earlier', parts: 1 },
          { organizationId: second.id, stepId: 'many-5', parts: 4 },
        ],
      });
      expect(outcomes.map((o) => o.outcome)).toEqual([
        { $case: 'debit', debit: { debited: true, balance: 0 } },
        { $case: 'error', error: expect.objectContaining({ kind: 'not_found', code: 'not_found' }) },
        { $case: 'error', error: expect.objectContaining({ kind: 'conflict', code: 'step_id_reused' }) },
        // In the call's order: many-1 took the last part.
        { $case: 'debit', debit: { debited: false, balance: 0 } },
        { $case: 'error', error: expect.objectContaining({ kind: 'invalid', code: 'invalid_request' }) },
        // A repeat of a step debited earlier answers the first outcome.
        { $case: 'debit', debit: { debited: true, balance: 1 } },
        { $case: 'debit', debit: { debited: true, balance: 1 } },
      ]);
      expect(await balanceOf(first.id)).toBe(0);
      expect(await balanceOf(second.id)).toBe(1);
      expect(await ledgerSum(first.id)).toBe(0);
      expect(await ledgerSum(second.id)).toBe(1);
      // The same call again debits nothing more.
      const again = await harness.client.debitSmsBalances({ debits: [{ organizationId: first.id, stepId: 'many-1', parts: 1 }, { organizationId: second.id, stepId: 'many-5', parts: 4 }] });
      expect(again.outcomes.map((o) => o.outcome)).toEqual([{ $case: 'debit', debit: { debited: true, balance: 0 } }, { $case: 'debit', debit: { debited: true, balance: 1 } }]);
      expect(await balanceOf(second.id)).toBe(1);
    });

    it('decides the debits of a batch in order against the running balance: a refused large one lets a later small one through', async () => {
      const organization = await newOrg({ smsBalance: 2 });
      const { outcomes } = await harness.client.debitSmsBalances({
        debits: [3, 1, 2, 1, 1].map((parts, i) => ({ organizationId: organization.id, stepId: `run-${i}`, parts })),
      });
      expect(outcomes.map((o) => (o.outcome?.$case === 'debit' ? o.outcome.debit : o.outcome))).toEqual([
        { debited: false, balance: 2 },
        { debited: true, balance: 1 },
        { debited: false, balance: 1 },
        { debited: true, balance: 0 },
        { debited: false, balance: 0 },
      ]);
      expect(await balanceOf(organization.id)).toBe(0);
      expect(await ledgerSum(organization.id)).toBe(0);
      expect(await count(harness, 'sms_ledger', "organization_id = $1 AND kind = 'debit'", [organization.id])).toBe(5);
    });

    it('never debits a step twice when two contacts replicas debit the same steps at once', async () => {
      const organization = await newOrg({ smsBalance: 1_000 });
      const ctx = testContext('contacts-replica');
      const replica = await startContacts({ databaseUrl: harness.db.url, grpcHost: '127.0.0.1', grpcPort: 0 }, ctx);
      const other = createGrpcClient(contactsV1.ContactsServiceClient, `127.0.0.1:${replica.grpcPort}`);
      try {
        const round = (r: number) => Array.from({ length: 20 }, (_v, i) => ({ organizationId: organization.id, stepId: `race-${r}-${i}`, parts: 1 + (i % 3) }));
        const answers: Array<{ stepId: string; debited: boolean; balance: number }> = [];
        for (let r = 0; r < 10; r++) {
          const debits = round(r);
          // The same steps at both replicas at once, and some again in calls of their own: a batch that
          // loses the race to the other replica's runs again and answers that replica's debit.
          const calls = [harness.client, other.client, harness.client, other.client].map(async (client, c) => {
            const sent = c < 2 ? debits : debits.slice(c * 5);
            const { outcomes } = await client.debitSmsBalances({ debits: sent });
            outcomes.forEach((o, i) => {
              if (o.outcome?.$case !== 'debit') throw new Error(`debit ${sent[i].stepId} failed: ${JSON.stringify(o.outcome)}`);
              answers.push({ stepId: sent[i].stepId, ...o.outcome.debit });
            });
          });
          await Promise.all(calls);
        }
        const ledger = await queryRows<{ stepId: string; debited: boolean; balanceAfter: number; n: number }>(
          harness,
          `SELECT step_id AS "stepId", bool_and(debited) AS debited, min(balance_after)::int AS "balanceAfter", count(*)::int AS n FROM contacts.sms_ledger WHERE organization_id = $1 AND kind = 'debit' GROUP BY step_id`,
          [organization.id],
        );
        expect(ledger.every((entry) => entry.n === 1)).toBe(true);
        const byStep = new Map(ledger.map((entry) => [entry.stepId, entry]));
        for (const answer of answers) expect(byStep.get(answer.stepId)).toMatchObject({ debited: answer.debited, balanceAfter: answer.balance });
        expect(await balanceOf(organization.id)).toBe(await ledgerSum(organization.id));
        expect(answers).toHaveLength(10 * (20 + 20 + 10 + 5));
      } finally {
        other.close();
        await ctx.stop();
      }
    });

    it.each([
      ['no debits', () => []],
      ['a step id twice', (org: string) => [{ organizationId: org, stepId: 'twice', parts: 1 }, { organizationId: org, stepId: 'twice', parts: 1 }]],
      ['more than 500 debits', (org: string) => Array.from({ length: 501 }, (_v, i) => ({ organizationId: org, stepId: `over-${i}`, parts: 1 }))],
    ])('refuses a DebitSmsBalances call with %s as a whole, changing nothing', async (_label, debits) => {
      const organization = await newOrg({ smsBalance: 1_000 });
      expect(await failure(harness.client.debitSmsBalances({ debits: debits(organization.id) }))).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(await count(harness, 'sms_ledger', "organization_id = $1 AND kind = 'debit'", [organization.id])).toBe(0);
    });

    it('refuses a credit of zero and unknown organizations', async () => {
      const organization = await newOrg({ smsBalance: 3 });
      expect(await failure(harness.client.creditSmsBalance({ organizationId: organization.id, parts: 0, reason: '' }))).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(await balanceOf(organization.id)).toBe(3);
      const unknown = '0190c3c4-0000-7000-8000-000000000000';
      expect(await failure(harness.client.creditSmsBalance({ organizationId: unknown, parts: 1, reason: '' }))).toMatchObject({ status: 404, code: 'not_found' });
      expect(await failure(harness.client.debitSmsBalance({ organizationId: unknown, stepId: 'u', parts: 1 }))).toMatchObject({ status: 404, code: 'not_found' });
    });
  });
});
