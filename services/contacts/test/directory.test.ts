import { count, failure, startHarness, type ContactsHarness } from './harness';

/** Organizations, API keys and locations through the real gRPC service against real PostgreSQL. */
describe('contacts directory over gRPC', () => {
  let harness: ContactsHarness;
  beforeAll(async () => {
    harness = await startHarness('contacts-directory');
  });
  afterAll(() => harness.close());

  const newOrg = async (over: Record<string, unknown> = {}) =>
    (await harness.client.createOrganization({ name: 'Acme', plan: 'standard', emailConfirmed: true, smsBalance: 0, timeZone: '', locale: '', defaultRegion: '', ...over })).organization!;

  describe('organizations', () => {
    it('are created with defaults for unset fields', async () => {
      const organization = (await harness.client.createOrganization({ name: 'Defaults', plan: '', emailConfirmed: false, smsBalance: 0, timeZone: '', locale: '', defaultRegion: '' })).organization!;
      expect(organization).toMatchObject({ name: 'Defaults', plan: 'trial', emailConfirmed: false, smsBalance: 0, timeZone: 'UTC', locale: 'en', defaultRegion: 'RU' });
      expect(organization.createdAt).toBeInstanceOf(Date);
      expect((await harness.client.getOrganization({ id: organization.id })).organization).toEqual(organization);
    });

    it('record an opening SMS balance in the ledger', async () => {
      const organization = await newOrg({ smsBalance: 250 });
      expect(organization.smsBalance).toBe(250);
      expect(await count(harness, 'sms_ledger', "organization_id = $1 AND kind = 'initial' AND delta = 250", [organization.id])).toBe(1);
    });

    it.each([
      ['an empty name', { name: '' }, '/name'],
      ['an unknown plan', { plan: 'gold' }, '/plan'],
      ['an unknown locale', { locale: 'de' }, '/locale'],
      ['a bad time zone', { timeZone: 'Mars/Olympus' }, '/timeZone'],
      ['a region without phone numbers', { defaultRegion: 'XX' }, '/defaultRegion'],
      ['a negative balance', { smsBalance: -1 }, '/smsBalance'],
    ])('refuse %s with 400 naming the field, and create nothing', async (_label, over, pointer) => {
      const before = await count(harness, 'organizations');
      const err = await failure(newOrg(over));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(err.details).toEqual({ errors: [expect.objectContaining({ pointer })] });
      expect(await count(harness, 'organizations')).toBe(before);
    });

    it('are listed in pages in creation order', async () => {
      const made = [await newOrg({ name: 'P1' }), await newOrg({ name: 'P2' }), await newOrg({ name: 'P3' })];
      const all: string[] = [];
      let after = '';
      for (let pageNumber = 0; pageNumber < 50; pageNumber++) {
        const page = await harness.client.listOrganizations({ limit: 2, after });
        expect(page.organizations.length).toBeLessThanOrEqual(2);
        all.push(...page.organizations.map((organization) => organization.id));
        if (!page.nextAfter) break;
        after = page.nextAfter;
      }
      const positions = made.map((organization) => all.indexOf(organization.id));
      expect(positions.every((p) => p >= 0)).toBe(true);
      expect([...positions].sort((left, right) => left - right)).toEqual(positions);
      expect(new Set(all).size).toBe(all.length);
    });

    it('refuse a page size out of range', async () => {
      expect(await failure(harness.client.listOrganizations({ limit: 501, after: '' }))).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(await failure(harness.client.listOrganizations({ limit: 10, after: 'nope' }))).toMatchObject({ status: 400, code: 'invalid_request' });
    });

    it('answer 404 for unknown and malformed ids', async () => {
      expect(await failure(harness.client.getOrganization({ id: '0190c3c4-0000-7000-8000-000000000000' }))).toMatchObject({ status: 404, code: 'not_found' });
      expect(await failure(harness.client.getOrganization({ id: 'x' }))).toMatchObject({ status: 404, code: 'not_found' });
    });

    it('update only the fields given, and a new SMS balance becomes a ledger adjustment', async () => {
      const organization = await newOrg({ name: 'Before', plan: 'trial', smsBalance: 10 });
      const updated = (await harness.client.updateOrganization({ id: organization.id, name: 'After', plan: 'pro', smsBalance: 4 })).organization!;
      expect(updated).toMatchObject({ id: organization.id, name: 'After', plan: 'pro', smsBalance: 4, emailConfirmed: true, timeZone: 'UTC', locale: 'en' });
      expect(await count(harness, 'sms_ledger', "organization_id = $1 AND kind = 'adjustment' AND delta = -6 AND balance_after = 4", [organization.id])).toBe(1);
      const again = (await harness.client.updateOrganization({ id: organization.id, locale: 'ru', timeZone: 'Europe/Moscow', defaultRegion: 'KZ', emailConfirmed: false })).organization!;
      expect(again).toMatchObject({ name: 'After', locale: 'ru', timeZone: 'Europe/Moscow', defaultRegion: 'KZ', emailConfirmed: false, smsBalance: 4 });
    });

    it('refuse a bad update as a whole and change nothing', async () => {
      const organization = await newOrg({ name: 'Stable' });
      const err = await failure(harness.client.updateOrganization({ id: organization.id, name: 'Changed', plan: 'gold' }));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request', details: { errors: [{ pointer: '/plan', detail: expect.any(String) }] } });
      expect((await harness.client.getOrganization({ id: organization.id })).organization!.name).toBe('Stable');
      expect(await failure(harness.client.updateOrganization({ id: '0190c3c4-0000-7000-8000-000000000000', name: 'x' }))).toMatchObject({ status: 404, code: 'not_found' });
    });
  });

  describe('API keys', () => {
    it('are issued with the default scopes, listed without the secret, and authenticate', async () => {
      const organization = await newOrg();
      const { apiKey, secret } = await harness.client.issueApiKey({ organizationId: organization.id, name: 'crm', scopes: [], secret: '' });
      expect(secret).toMatch(/^rrs_[0-9A-Za-z]{36}$/);
      expect(apiKey).toMatchObject({ organizationId: organization.id, name: 'crm', prefix: secret.slice(0, 8), last4: secret.slice(-4), revokedAt: undefined });
      expect(apiKey!.scopes).toEqual(['locations:read', 'contacts:write', 'cascades:write', 'cascades:read', 'review-requests:write', 'webhooks:read', 'webhooks:write']);
      const listed = await harness.client.listApiKeys({ organizationId: organization.id });
      expect(listed.apiKeys).toEqual([apiKey]);
      expect(JSON.stringify(listed)).not.toContain(secret);
      const auth = await harness.client.authenticate({ apiKey: secret });
      expect(auth).toMatchObject({ keyId: apiKey!.id, organization: { id: organization.id } });
    });

    it('carry only the scopes asked for', async () => {
      const organization = await newOrg();
      const { secret } = await harness.client.issueApiKey({ organizationId: organization.id, name: '', scopes: ['locations:read'], secret: '' });
      expect((await harness.client.authenticate({ apiKey: secret })).scopes).toEqual(['locations:read']);
    });

    it('refuse an unknown scope and store nothing', async () => {
      const organization = await newOrg();
      const err = await failure(harness.client.issueApiKey({ organizationId: organization.id, name: '', scopes: ['locations:read', 'everything'], secret: '' }));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request', details: { errors: [{ pointer: '/scopes/1', detail: expect.stringContaining('everything') }] } });
      expect(await count(harness, 'api_keys', 'organization_id = $1', [organization.id])).toBe(0);
    });

    it('are not issued for an unknown organization', async () => {
      expect(await failure(harness.client.issueApiKey({ organizationId: '0190c3c4-0000-7000-8000-000000000000', name: '', scopes: [], secret: '' }))).toMatchObject({ status: 404, code: 'not_found' });
    });

    it('stop authenticating once revoked; a second revoke keeps the first time', async () => {
      const organization = await newOrg();
      const { apiKey, secret } = await harness.client.issueApiKey({ organizationId: organization.id, name: '', scopes: [], secret: '' });
      const revoked = (await harness.client.revokeApiKey({ organizationId: organization.id, id: apiKey!.id })).apiKey!;
      expect(revoked.revokedAt).toBeInstanceOf(Date);
      expect(await failure(harness.client.authenticate({ apiKey: secret }))).toMatchObject({ status: 401, code: 'invalid_api_key' });
      const again = (await harness.client.revokeApiKey({ organizationId: organization.id, id: apiKey!.id })).apiKey!;
      expect(again.revokedAt).toEqual(revoked.revokedAt);
      expect((await harness.client.listApiKeys({ organizationId: organization.id })).apiKeys[0].revokedAt).toEqual(revoked.revokedAt);
    });

    it("cannot be revoked through another organization: 404, and the key keeps working", async () => {
      const owner = await newOrg();
      const other = await newOrg();
      const { apiKey, secret } = await harness.client.issueApiKey({ organizationId: owner.id, name: '', scopes: [], secret: '' });
      expect(await failure(harness.client.revokeApiKey({ organizationId: other.id, id: apiKey!.id }))).toMatchObject({ status: 404, code: 'not_found' });
      expect((await harness.client.authenticate({ apiKey: secret })).keyId).toBe(apiKey!.id);
      expect((await harness.client.listApiKeys({ organizationId: other.id })).apiKeys).toEqual([]);
    });
  });

  describe('locations', () => {
    const links = [
      { provider: 'google', url: 'https://maps.google.com/?cid=1' },
      { provider: 'yandex', url: 'https://yandex.ru/maps/org/1/reviews/' },
      { provider: '2gis', url: 'https://2gis.ru/moscow/firm/1' },
    ];
    const create = (organizationId: string, over: Record<string, unknown> = {}) =>
      harness.client.createLocation({ organizationId, name: 'Main st.', address: 'Main st. 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: links, ...over });

    it('are created, read, listed, updated and deleted', async () => {
      const organization = await newOrg();
      const location = (await create(organization.id)).location!;
      expect(location).toMatchObject({ organizationId: organization.id, name: 'Main st.', address: 'Main st. 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: links });
      expect((await harness.client.getLocation({ organizationId: organization.id, id: location.id })).location).toEqual(location);
      expect((await harness.client.listLocations({ organizationId: organization.id })).locations).toEqual([location]);

      const updated = (await harness.client.updateLocation({ organizationId: organization.id, id: location.id, name: 'Renamed', reviewLinks: [], replaceReviewLinks: false })).location!;
      expect(updated).toMatchObject({ name: 'Renamed', address: 'Main st. 1', reviewLinks: links });
      const cleared = (await harness.client.updateLocation({ organizationId: organization.id, id: location.id, reviewLinks: [], replaceReviewLinks: true })).location!;
      expect(cleared.reviewLinks).toEqual([]);

      await harness.client.deleteLocation({ organizationId: organization.id, id: location.id });
      expect(await failure(harness.client.getLocation({ organizationId: organization.id, id: location.id }))).toMatchObject({ status: 404, code: 'not_found' });
      expect((await harness.client.listLocations({ organizationId: organization.id })).locations).toEqual([]);
      expect(await failure(harness.client.deleteLocation({ organizationId: organization.id, id: location.id }))).toMatchObject({ status: 404, code: 'not_found' });
      expect(await failure(harness.client.updateLocation({ organizationId: organization.id, id: location.id, name: 'x', reviewLinks: [], replaceReviewLinks: false }))).toMatchObject({ status: 404 });
    });

    it.each([
      ['an http review link', { reviewLinks: [{ provider: 'google', url: 'http://maps.google.com/' }] }, '/reviewLinks/0/url'],
      ['a relative review link', { reviewLinks: [{ provider: 'google', url: '/reviews' }] }, '/reviewLinks/0/url'],
      ['a javascript: review link', { reviewLinks: [{ provider: 'google', url: 'javascript:alert(1)' }] }, '/reviewLinks/0/url'],
      ['a bad provider name', { reviewLinks: [{ provider: 'Google Maps', url: 'https://maps.google.com/' }] }, '/reviewLinks/0/provider'],
      ['a provider twice', { reviewLinks: [links[0], links[0]] }, '/reviewLinks/1/provider'],
      ['an empty name', { name: '' }, '/name'],
      ['a bad time zone', { timeZone: 'Moscow' }, '/timeZone'],
    ])('refuse %s with 400 and create nothing', async (_label, over, pointer) => {
      const organization = await newOrg();
      const err = await failure(create(organization.id, over));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect((err.details as { errors: Array<{ pointer: string }> }).errors.map((e) => e.pointer)).toContain(pointer);
      expect(await count(harness, 'locations', 'organization_id = $1', [organization.id])).toBe(0);
    });

    it('refuse a bad update and change nothing', async () => {
      const organization = await newOrg();
      const location = (await create(organization.id)).location!;
      const err = await failure(harness.client.updateLocation({ organizationId: organization.id, id: location.id, name: 'New', reviewLinks: [{ provider: 'google', url: 'ftp://x' }], replaceReviewLinks: true }));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect((await harness.client.getLocation({ organizationId: organization.id, id: location.id })).location).toEqual(location);
    });

    it("of another organization are 404 for get, update and delete, and stay untouched", async () => {
      const owner = await newOrg();
      const other = await newOrg();
      const location = (await create(owner.id)).location!;
      expect(await failure(harness.client.getLocation({ organizationId: other.id, id: location.id }))).toMatchObject({ status: 404, code: 'not_found' });
      expect(await failure(harness.client.updateLocation({ organizationId: other.id, id: location.id, name: 'Stolen', reviewLinks: [], replaceReviewLinks: false }))).toMatchObject({ status: 404, code: 'not_found' });
      expect(await failure(harness.client.deleteLocation({ organizationId: other.id, id: location.id }))).toMatchObject({ status: 404, code: 'not_found' });
      expect((await harness.client.getLocation({ organizationId: owner.id, id: location.id })).location).toEqual(location);
      expect((await harness.client.listLocations({ organizationId: other.id })).locations).toEqual([]);
    });

    it('are not created for an unknown organization', async () => {
      expect(await failure(create('0190c3c4-0000-7000-8000-000000000000'))).toMatchObject({ status: 404, code: 'not_found' });
    });
  });
});
