import { requestFingerprint } from '@rrs/idempotency';
import type { contactsV1 } from '@rrs/proto';
import { asRefusal, count, failure, queryRows, startHarness, type ContactsHarness } from './harness';

/** UpsertContact (POST /contacts) through gRPC against real PostgreSQL. */
describe('UpsertContact over gRPC', () => {
  let harness: ContactsHarness;
  let org: contactsV1.Organization;
  let location: contactsV1.Location;

  beforeAll(async () => {
    harness = await startHarness('contacts-upsert');
    org = (await harness.client.createOrganization({ name: 'Acme', plan: 'standard', emailConfirmed: true, smsBalance: 0, timeZone: 'Europe/Moscow', locale: 'ru', defaultRegion: 'RU' })).organization!;
    location = (await harness.client.createLocation({ organizationId: org.id, name: 'Main', address: '', city: '', timeZone: '', reviewLinks: [] })).location!;
  });
  afterAll(() => harness.close());

  type Sub = Partial<contactsV1.UpsertContactRequest>;
  const upsert = (sub: Sub, options: { key?: string; organizationId?: string } = {}) => {
    const req = { startCascade: false, flowId: '', ...sub, organizationId: options.organizationId ?? org.id } as contactsV1.UpsertContactRequest;
    const metadata = options.key ? { 'idempotency-key': options.key, 'idempotency-fingerprint': requestFingerprint('POST', '/contacts', sub) } : undefined;
    return harness.client.upsertContact(req, { metadata });
  };
  const contactsOf = (organizationId = org.id) => count(harness, 'contacts', 'organization_id = $1', [organizationId]);

  it('creates a contact with a normalized phone and the given fields', async () => {
    const response = await upsert({ externalId: 'c-1', name: 'Анна', email: 'anna@example.com', phone: '8 (916) 123-45-67', locationId: location.id, consentAt: '2026-05-01T12:00:00+03:00', attributesJson: '{"orderId":42}' });
    expect(response.created).toBe(true);
    expect(response.idempotentReplayed).toBe(false);
    expect(response.contact).toMatchObject({ externalId: 'c-1', name: 'Анна', email: 'anna@example.com', phone: '+79161234567', locationId: location.id, attributesJson: '{"orderId":42}' });
    expect(response.contact!.consentAt!.toISOString()).toBe('2026-05-01T09:00:00.000Z');
  });

  it('updates the same contact on a second submission with the same externalId, keeping fields not sent', async () => {
    const first = await upsert({ externalId: 'c-2', name: 'Ivan', email: 'ivan@example.com', phone: '+7 916 000-00-01' });
    const second = await upsert({ externalId: 'c-2', email: 'ivan.new@example.com', attributesJson: '{"tier":"gold"}' });
    expect(second.created).toBe(false);
    expect(second.contact!.id).toBe(first.contact!.id);
    expect(second.contact).toMatchObject({ name: 'Ivan', email: 'ivan.new@example.com', phone: '+79160000001', attributesJson: '{"tier":"gold"}' });
    expect(await count(harness, 'contacts', 'organization_id = $1 AND external_id = $2', [org.id, 'c-2'])).toBe(1);
  });

  it('makes one contact of concurrent first submissions of one externalId', async () => {
    const results = await Promise.all(Array.from({ length: 10 }, (_v, i) => upsert({ externalId: 'race', name: `n${i}` })));
    expect(new Set(results.map((response) => response.contact!.id)).size).toBe(1);
    expect(results.filter((response) => response.created)).toHaveLength(1);
    expect(await count(harness, 'contacts', 'organization_id = $1 AND external_id = $2', [org.id, 'race'])).toBe(1);
  });

  it('clears a field sent as an empty string', async () => {
    await upsert({ externalId: 'c-3', name: 'Olga', phone: '+79160000002' });
    const response = await upsert({ externalId: 'c-3', phone: '' });
    expect(response.contact!.phone).toBeUndefined();
    expect(response.contact!.name).toBe('Olga');
  });

  it('creates a new contact every time when there is no externalId', async () => {
    const before = await contactsOf();
    const oneWalkIn = await upsert({ name: 'Walk-in' });
    const anotherWalkIn = await upsert({ name: 'Walk-in' });
    expect(oneWalkIn.contact!.id).not.toBe(anotherWalkIn.contact!.id);
    expect(oneWalkIn.contact!.externalId).toBeUndefined();
    expect(await contactsOf()).toBe(before + 2);
  });

  it("reads local numbers with the organization's default region", async () => {
    const us = (await harness.client.createOrganization({ name: 'US', plan: 'standard', emailConfirmed: true, smsBalance: 0, timeZone: '', locale: 'en', defaultRegion: 'US' })).organization!;
    const response = await upsert({ externalId: 'u', phone: '(415) 555-2671' }, { organizationId: us.id });
    expect(response.contact!.phone).toBe('+14155552671');
  });

  it('keeps two organizations with the same externalId apart', async () => {
    const other = (await harness.client.createOrganization({ name: 'Other', plan: 'standard', emailConfirmed: true, smsBalance: 0, timeZone: '', locale: '', defaultRegion: '' })).organization!;
    const mine = await upsert({ externalId: 'shared', name: 'Mine' });
    const theirs = await upsert({ externalId: 'shared', name: 'Theirs' }, { organizationId: other.id });
    expect(theirs.contact!.id).not.toBe(mine.contact!.id);
    expect((await harness.client.getContact({ organizationId: org.id, id: mine.contact!.id })).contact!.name).toBe('Mine');
    expect(await failure(harness.client.getContact({ organizationId: other.id, id: mine.contact!.id }))).toMatchObject({ status: 404, code: 'not_found' });
  });

  it.each<[string, Sub, string]>([
    ['an invalid email', { email: 'not-an-email' }, '/email'],
    ['an unparseable phone', { phone: 'call me' }, '/phone'],
    ['a phone too short to be real', { phone: '123' }, '/phone'],
    ['a consentAt without an offset', { consentAt: '2026-05-01T12:00:00' }, '/consentAt'],
    ['a consentAt that is only a date', { consentAt: '2026-05-01' }, '/consentAt'],
    ['a consentAt that is no date', { consentAt: '2026-13-45T99:00:00Z' }, '/consentAt'],
    ['attributes that are an array', { attributesJson: '[1,2]' }, '/attributes'],
    ['attributes with too many keys', { attributesJson: JSON.stringify(Object.fromEntries(Array.from({ length: 51 }, (_v, i) => [`k${i}`, i]))) }, '/attributes'],
    ['attributes over 8 KB', { attributesJson: JSON.stringify({ big: 'x'.repeat(9000) }) }, '/attributes'],
    ['an externalId over 200 characters', { externalId: 'x'.repeat(201) }, '/externalId'],
    ['a flowId without startCascade', { flowId: '0190c3c4-0000-7000-8000-000000000000' }, '/flowId'],
  ])('refuses %s with 400 naming the field, and creates nothing', async (_label, sub, pointer) => {
    const before = await contactsOf();
    const err = await failure(upsert({ externalId: 'bad', ...sub }));
    expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
    expect((err.details as { errors: Array<{ pointer: string }> }).errors.map((e) => e.pointer)).toEqual([pointer]);
    expect(await contactsOf()).toBe(before);
  });

  it('lists every offending field at once', async () => {
    const err = await failure(upsert({ email: 'x', phone: 'y', consentAt: 'z' }));
    expect((err.details as { errors: Array<{ pointer: string }> }).errors.map((e) => e.pointer).sort()).toEqual(['/consentAt', '/email', '/phone']);
  });

  it('answers 404 for an unknown, malformed, deleted or foreign locationId, and creates nothing', async () => {
    const other = (await harness.client.createOrganization({ name: 'Foreign', plan: 'standard', emailConfirmed: true, smsBalance: 0, timeZone: '', locale: '', defaultRegion: '' })).organization!;
    const foreign = (await harness.client.createLocation({ organizationId: other.id, name: 'Theirs', address: '', city: '', timeZone: '', reviewLinks: [] })).location!;
    const gone = (await harness.client.createLocation({ organizationId: org.id, name: 'Gone', address: '', city: '', timeZone: '', reviewLinks: [] })).location!;
    await harness.client.deleteLocation({ organizationId: org.id, id: gone.id });
    const before = await contactsOf();
    for (const locationId of ['0190c3c4-0000-7000-8000-000000000000', 'nope', gone.id, foreign.id]) {
      expect(await failure(upsert({ externalId: 'loc', locationId }))).toMatchObject({ status: 404, code: 'not_found', details: { errors: [{ pointer: '/locationId' }] } });
    }
    expect(await contactsOf()).toBe(before);
  });

  describe('startCascade', () => {
    it('leaves the sending rule to the scheduler (one admission decision): a trial or unconfirmed organization is refused only for what contacts owns', async () => {
      // 402 plan_required / 409 email_not_confirmed come from the scheduler's admission pre-check, run before it
      // calls this (its StartCascade with a contact; services/gateway/test/contactsCascade.test.ts checks them end to end).
      const trial = (await harness.client.createOrganization({ name: 'Trial', plan: 'trial', emailConfirmed: true, smsBalance: 0, timeZone: '', locale: '', defaultRegion: '' })).organization!;
      const unconfirmed = (await harness.client.createOrganization({ name: 'Unconfirmed', plan: 'standard', emailConfirmed: false, smsBalance: 0, timeZone: '', locale: '', defaultRegion: '' })).organization!;
      for (const organizationId of [trial.id, unconfirmed.id]) {
        expect(await failure(upsert({ externalId: 't', email: 'a@example.com', startCascade: true }, { organizationId }))).toMatchObject({ status: 400, code: 'invalid_request' });
        expect(await contactsOf(organizationId)).toBe(0);
      }
    });

    it('needs a location: 400 naming /locationId when neither the request nor the stored contact has one, and saves nothing', async () => {
      const before = await contactsOf();
      expect(await failure(upsert({ externalId: 'sc', email: 'a@example.com', startCascade: true }))).toMatchObject({ status: 400, code: 'invalid_request', details: { errors: [{ pointer: '/locationId' }] } });
      expect(await failure(upsert({ externalId: 'sc', email: 'a@example.com', locationId: '', startCascade: true }))).toMatchObject({ status: 400, details: { errors: [{ pointer: '/locationId' }] } });
      expect(await contactsOf()).toBe(before);
      // A stored contact keeps its location when the request leaves it out; clearing it is refused.
      await upsert({ externalId: 'sc-stored', email: 'b@example.com', locationId: location.id });
      expect(await failure(upsert({ externalId: 'sc-stored', name: 'Cleared', locationId: '', startCascade: true }))).toMatchObject({ status: 400, details: { errors: [{ pointer: '/locationId' }] } });
      const kept = await upsert({ externalId: 'sc-stored', name: 'Kept', startCascade: true });
      expect(kept.contact).toMatchObject({ name: 'Kept', locationId: location.id });
      // The stored location is the cascade's, answered with the contact.
      expect(kept.location).toMatchObject({ id: location.id, name: location.name });
      expect(await contactsOf()).toBe(before + 1);
    });

    it('saves the contact with its location and answers that location (a replay too); without startCascade no location is answered', async () => {
      const response = await upsert({ externalId: 'sc-new', email: 'c@example.com', locationId: location.id, startCascade: true }, { key: 'sc-new-key' });
      expect(response.created).toBe(true);
      expect(response.contact).toMatchObject({ externalId: 'sc-new', locationId: location.id });
      expect(response.location).toMatchObject({ id: location.id, name: location.name, address: location.address, city: location.city });
      const replayed = await upsert({ externalId: 'sc-new', email: 'c@example.com', locationId: location.id, startCascade: true }, { key: 'sc-new-key' });
      expect(replayed).toMatchObject({ idempotentReplayed: true, location: { id: location.id } });
      expect((await upsert({ externalId: 'sc-new', name: 'Plain' })).location).toBeUndefined();
    });
  });

  describe('with an Idempotency-Key', () => {
    it('answers a replay with the first response and creates nothing more', async () => {
      const sub = { name: 'No external id', email: 'replay@example.com' };
      const before = await contactsOf();
      const first = await upsert(sub, { key: 'idem-1' });
      const again = await upsert(sub, { key: 'idem-1' });
      expect(first.idempotentReplayed).toBe(false);
      expect(again.idempotentReplayed).toBe(true);
      expect(again.contact).toEqual(first.contact);
      expect(again.created).toBe(true);
      expect(await contactsOf()).toBe(before + 1);
    });

    it('refuses the same key with another body with 409 idempotency_key_reused, changing nothing', async () => {
      await upsert({ externalId: 'k2', name: 'First' }, { key: 'idem-2' });
      expect(await failure(upsert({ externalId: 'k2', name: 'Second' }, { key: 'idem-2' }))).toMatchObject({ status: 409, code: 'idempotency_key_reused' });
      const rows = await queryRows(harness, 'SELECT name FROM contacts.contacts WHERE external_id = $1', ['k2']);
      expect(rows).toEqual([{ name: 'First' }]);
    });

    it('does not save a refused request: the key can be used again once the request is valid', async () => {
      expect(await failure(upsert({ phone: 'bad' }, { key: 'idem-3' }))).toMatchObject({ status: 400 });
      const ok = await upsert({ phone: '+79160000003' }, { key: 'idem-3' });
      expect(ok.idempotentReplayed).toBe(false);
    });

    it('runs concurrent duplicates exactly once', async () => {
      const before = await contactsOf();
      const sub = { name: 'Concurrent' };
      const results = await Promise.allSettled(Array.from({ length: 8 }, () => upsert(sub, { key: 'idem-4' })));
      const ok = results.filter((outcome): outcome is PromiseFulfilledResult<contactsV1.UpsertContactResponse> => outcome.status === 'fulfilled');
      const refused = results.filter((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
      expect(ok.length).toBeGreaterThanOrEqual(1);
      for (const rejection of refused) expect(asRefusal(rejection.reason)).toMatchObject({ status: 409, code: 'idempotency_key_in_use' });
      expect(new Set(ok.map((outcome) => outcome.value.contact!.id)).size).toBe(1);
      expect(await contactsOf()).toBe(before + 1);
      expect((await upsert(sub, { key: 'idem-4' })).idempotentReplayed).toBe(true);
    });

    it('is scoped to the organization', async () => {
      const other = (await harness.client.createOrganization({ name: 'Scoped', plan: 'standard', emailConfirmed: true, smsBalance: 0, timeZone: '', locale: '', defaultRegion: '' })).organization!;
      const sub = { name: 'Same key elsewhere' };
      await upsert(sub, { key: 'idem-5' });
      const theirs = await upsert(sub, { key: 'idem-5', organizationId: other.id });
      expect(theirs.idempotentReplayed).toBe(false);
      expect(await contactsOf(other.id)).toBe(1);
    });

    it('survives a restart of the service', async () => {
      const sub = { externalId: 'restart', name: 'Before restart' };
      const first = await upsert(sub, { key: 'idem-6' });
      await harness.restart();
      const again = await upsert(sub, { key: 'idem-6' });
      expect(again.idempotentReplayed).toBe(true);
      expect(again.contact).toEqual(first.contact);
    });
  });
});
