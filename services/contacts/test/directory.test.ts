import { count, failure, startHarness, type ContactsHarness } from './harness';

/** Organizations, API keys and locations through the real gRPC service against real PostgreSQL. */
describe('contacts directory over gRPC', () => {
  let h: ContactsHarness;
  beforeAll(async () => {
    h = await startHarness('contacts-directory');
  });
  afterAll(() => h.close());

  const newOrg = async (over: Record<string, unknown> = {}) =>
    (await h.client.createOrganization({ name: 'Acme', plan: 'standard', emailConfirmed: true, smsBalance: 0, timeZone: '', locale: '', defaultRegion: '', ...over })).organization!;

  describe('organizations', () => {
    it('are created with defaults for unset fields', async () => {
      const o = (await h.client.createOrganization({ name: 'Defaults', plan: '', emailConfirmed: false, smsBalance: 0, timeZone: '', locale: '', defaultRegion: '' })).organization!;
      expect(o).toMatchObject({ name: 'Defaults', plan: 'trial', emailConfirmed: false, smsBalance: 0, timeZone: 'UTC', locale: 'en', defaultRegion: 'RU' });
      expect(o.createdAt).toBeInstanceOf(Date);
      expect((await h.client.getOrganization({ id: o.id })).organization).toEqual(o);
    });

    it('record an opening SMS balance in the ledger', async () => {
      const o = await newOrg({ smsBalance: 250 });
      expect(o.smsBalance).toBe(250);
      expect(await count(h, 'sms_ledger', "organization_id = $1 AND kind = 'initial' AND delta = 250", [o.id])).toBe(1);
    });

    it.each([
      ['an empty name', { name: '' }, '/name'],
      ['an unknown plan', { plan: 'gold' }, '/plan'],
      ['an unknown locale', { locale: 'de' }, '/locale'],
      ['a bad time zone', { timeZone: 'Mars/Olympus' }, '/timeZone'],
      ['a region without phone numbers', { defaultRegion: 'XX' }, '/defaultRegion'],
      ['a negative balance', { smsBalance: -1 }, '/smsBalance'],
    ])('refuse %s with 400 naming the field, and create nothing', async (_l, over, pointer) => {
      const before = await count(h, 'organizations');
      const err = await failure(newOrg(over));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(err.details).toEqual({ errors: [expect.objectContaining({ pointer })] });
      expect(await count(h, 'organizations')).toBe(before);
    });

    it('are listed in pages in creation order', async () => {
      const made = [await newOrg({ name: 'P1' }), await newOrg({ name: 'P2' }), await newOrg({ name: 'P3' })];
      const all: string[] = [];
      let after = '';
      for (let i = 0; i < 50; i++) {
        const page = await h.client.listOrganizations({ limit: 2, after });
        expect(page.organizations.length).toBeLessThanOrEqual(2);
        all.push(...page.organizations.map((o) => o.id));
        if (!page.nextAfter) break;
        after = page.nextAfter;
      }
      const positions = made.map((o) => all.indexOf(o.id));
      expect(positions.every((p) => p >= 0)).toBe(true);
      expect([...positions].sort((a, b) => a - b)).toEqual(positions);
      expect(new Set(all).size).toBe(all.length);
    });

    it('refuse a page size out of range', async () => {
      expect(await failure(h.client.listOrganizations({ limit: 501, after: '' }))).toMatchObject({ status: 400, code: 'invalid_request' });
      expect(await failure(h.client.listOrganizations({ limit: 10, after: 'nope' }))).toMatchObject({ status: 400, code: 'invalid_request' });
    });

    it('answer 404 for unknown and malformed ids', async () => {
      expect(await failure(h.client.getOrganization({ id: '0190c3c4-0000-7000-8000-000000000000' }))).toMatchObject({ status: 404, code: 'not_found' });
      expect(await failure(h.client.getOrganization({ id: 'x' }))).toMatchObject({ status: 404, code: 'not_found' });
    });

    it('update only the fields given, and a new SMS balance becomes a ledger adjustment', async () => {
      const o = await newOrg({ name: 'Before', plan: 'trial', smsBalance: 10 });
      const u = (await h.client.updateOrganization({ id: o.id, name: 'After', plan: 'pro', smsBalance: 4 })).organization!;
      expect(u).toMatchObject({ id: o.id, name: 'After', plan: 'pro', smsBalance: 4, emailConfirmed: true, timeZone: 'UTC', locale: 'en' });
      expect(await count(h, 'sms_ledger', "organization_id = $1 AND kind = 'adjustment' AND delta = -6 AND balance_after = 4", [o.id])).toBe(1);
      const again = (await h.client.updateOrganization({ id: o.id, locale: 'ru', timeZone: 'Europe/Moscow', defaultRegion: 'KZ', emailConfirmed: false })).organization!;
      expect(again).toMatchObject({ name: 'After', locale: 'ru', timeZone: 'Europe/Moscow', defaultRegion: 'KZ', emailConfirmed: false, smsBalance: 4 });
    });

    it('refuse a bad update as a whole and change nothing', async () => {
      const o = await newOrg({ name: 'Stable' });
      const err = await failure(h.client.updateOrganization({ id: o.id, name: 'Changed', plan: 'gold' }));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request', details: { errors: [{ pointer: '/plan', detail: expect.any(String) }] } });
      expect((await h.client.getOrganization({ id: o.id })).organization!.name).toBe('Stable');
      expect(await failure(h.client.updateOrganization({ id: '0190c3c4-0000-7000-8000-000000000000', name: 'x' }))).toMatchObject({ status: 404, code: 'not_found' });
    });
  });

  describe('API keys', () => {
    it('are issued with the default scopes, listed without the secret, and authenticate', async () => {
      const o = await newOrg();
      const { apiKey, secret } = await h.client.issueApiKey({ organizationId: o.id, name: 'crm', scopes: [], secret: '' });
      expect(secret).toMatch(/^rrs_[0-9A-Za-z]{36}$/);
      expect(apiKey).toMatchObject({ organizationId: o.id, name: 'crm', prefix: secret.slice(0, 8), last4: secret.slice(-4), revokedAt: undefined });
      expect(apiKey!.scopes).toEqual(['locations:read', 'contacts:write', 'cascades:write', 'cascades:read', 'review-requests:write', 'webhooks:read', 'webhooks:write']);
      const listed = await h.client.listApiKeys({ organizationId: o.id });
      expect(listed.apiKeys).toEqual([apiKey]);
      expect(JSON.stringify(listed)).not.toContain(secret);
      const auth = await h.client.authenticate({ apiKey: secret });
      expect(auth).toMatchObject({ keyId: apiKey!.id, organization: { id: o.id } });
    });

    it('carry only the scopes asked for', async () => {
      const o = await newOrg();
      const { secret } = await h.client.issueApiKey({ organizationId: o.id, name: '', scopes: ['locations:read'], secret: '' });
      expect((await h.client.authenticate({ apiKey: secret })).scopes).toEqual(['locations:read']);
    });

    it('refuse an unknown scope and store nothing', async () => {
      const o = await newOrg();
      const err = await failure(h.client.issueApiKey({ organizationId: o.id, name: '', scopes: ['locations:read', 'everything'], secret: '' }));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request', details: { errors: [{ pointer: '/scopes/1', detail: expect.stringContaining('everything') }] } });
      expect(await count(h, 'api_keys', 'organization_id = $1', [o.id])).toBe(0);
    });

    it('are not issued for an unknown organization', async () => {
      expect(await failure(h.client.issueApiKey({ organizationId: '0190c3c4-0000-7000-8000-000000000000', name: '', scopes: [], secret: '' }))).toMatchObject({ status: 404, code: 'not_found' });
    });

    it('stop authenticating once revoked; a second revoke keeps the first time', async () => {
      const o = await newOrg();
      const { apiKey, secret } = await h.client.issueApiKey({ organizationId: o.id, name: '', scopes: [], secret: '' });
      const revoked = (await h.client.revokeApiKey({ organizationId: o.id, id: apiKey!.id })).apiKey!;
      expect(revoked.revokedAt).toBeInstanceOf(Date);
      expect(await failure(h.client.authenticate({ apiKey: secret }))).toMatchObject({ status: 401, code: 'invalid_api_key' });
      const again = (await h.client.revokeApiKey({ organizationId: o.id, id: apiKey!.id })).apiKey!;
      expect(again.revokedAt).toEqual(revoked.revokedAt);
      expect((await h.client.listApiKeys({ organizationId: o.id })).apiKeys[0].revokedAt).toEqual(revoked.revokedAt);
    });

    it("cannot be revoked through another organization: 404, and the key keeps working", async () => {
      const a = await newOrg();
      const b = await newOrg();
      const { apiKey, secret } = await h.client.issueApiKey({ organizationId: a.id, name: '', scopes: [], secret: '' });
      expect(await failure(h.client.revokeApiKey({ organizationId: b.id, id: apiKey!.id }))).toMatchObject({ status: 404, code: 'not_found' });
      expect((await h.client.authenticate({ apiKey: secret })).keyId).toBe(apiKey!.id);
      expect((await h.client.listApiKeys({ organizationId: b.id })).apiKeys).toEqual([]);
    });
  });

  describe('locations', () => {
    const links = [
      { provider: 'google', url: 'https://maps.google.com/?cid=1' },
      { provider: 'yandex', url: 'https://yandex.ru/maps/org/1/reviews/' },
      { provider: '2gis', url: 'https://2gis.ru/moscow/firm/1' },
    ];
    const create = (organizationId: string, over: Record<string, unknown> = {}) =>
      h.client.createLocation({ organizationId, name: 'Main st.', address: 'Main st. 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: links, ...over });

    it('are created, read, listed, updated and deleted', async () => {
      const o = await newOrg();
      const l = (await create(o.id)).location!;
      expect(l).toMatchObject({ organizationId: o.id, name: 'Main st.', address: 'Main st. 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: links });
      expect((await h.client.getLocation({ organizationId: o.id, id: l.id })).location).toEqual(l);
      expect((await h.client.listLocations({ organizationId: o.id })).locations).toEqual([l]);

      const u = (await h.client.updateLocation({ organizationId: o.id, id: l.id, name: 'Renamed', reviewLinks: [], replaceReviewLinks: false })).location!;
      expect(u).toMatchObject({ name: 'Renamed', address: 'Main st. 1', reviewLinks: links });
      const cleared = (await h.client.updateLocation({ organizationId: o.id, id: l.id, reviewLinks: [], replaceReviewLinks: true })).location!;
      expect(cleared.reviewLinks).toEqual([]);

      await h.client.deleteLocation({ organizationId: o.id, id: l.id });
      expect(await failure(h.client.getLocation({ organizationId: o.id, id: l.id }))).toMatchObject({ status: 404, code: 'not_found' });
      expect((await h.client.listLocations({ organizationId: o.id })).locations).toEqual([]);
      expect(await failure(h.client.deleteLocation({ organizationId: o.id, id: l.id }))).toMatchObject({ status: 404, code: 'not_found' });
      expect(await failure(h.client.updateLocation({ organizationId: o.id, id: l.id, name: 'x', reviewLinks: [], replaceReviewLinks: false }))).toMatchObject({ status: 404 });
    });

    it.each([
      ['an http review link', { reviewLinks: [{ provider: 'google', url: 'http://maps.google.com/' }] }, '/reviewLinks/0/url'],
      ['a relative review link', { reviewLinks: [{ provider: 'google', url: '/reviews' }] }, '/reviewLinks/0/url'],
      ['a javascript: review link', { reviewLinks: [{ provider: 'google', url: 'javascript:alert(1)' }] }, '/reviewLinks/0/url'],
      ['a bad provider name', { reviewLinks: [{ provider: 'Google Maps', url: 'https://maps.google.com/' }] }, '/reviewLinks/0/provider'],
      ['a provider twice', { reviewLinks: [links[0], links[0]] }, '/reviewLinks/1/provider'],
      ['an empty name', { name: '' }, '/name'],
      ['a bad time zone', { timeZone: 'Moscow' }, '/timeZone'],
    ])('refuse %s with 400 and create nothing', async (_l, over, pointer) => {
      const o = await newOrg();
      const err = await failure(create(o.id, over));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect((err.details as { errors: Array<{ pointer: string }> }).errors.map((e) => e.pointer)).toContain(pointer);
      expect(await count(h, 'locations', 'organization_id = $1', [o.id])).toBe(0);
    });

    it('refuse a bad update and change nothing', async () => {
      const o = await newOrg();
      const l = (await create(o.id)).location!;
      const err = await failure(h.client.updateLocation({ organizationId: o.id, id: l.id, name: 'New', reviewLinks: [{ provider: 'google', url: 'ftp://x' }], replaceReviewLinks: true }));
      expect(err).toMatchObject({ status: 400, code: 'invalid_request' });
      expect((await h.client.getLocation({ organizationId: o.id, id: l.id })).location).toEqual(l);
    });

    it("of another organization are 404 for get, update and delete, and stay untouched", async () => {
      const a = await newOrg();
      const b = await newOrg();
      const l = (await create(a.id)).location!;
      expect(await failure(h.client.getLocation({ organizationId: b.id, id: l.id }))).toMatchObject({ status: 404, code: 'not_found' });
      expect(await failure(h.client.updateLocation({ organizationId: b.id, id: l.id, name: 'Stolen', reviewLinks: [], replaceReviewLinks: false }))).toMatchObject({ status: 404, code: 'not_found' });
      expect(await failure(h.client.deleteLocation({ organizationId: b.id, id: l.id }))).toMatchObject({ status: 404, code: 'not_found' });
      expect((await h.client.getLocation({ organizationId: a.id, id: l.id })).location).toEqual(l);
      expect((await h.client.listLocations({ organizationId: b.id })).locations).toEqual([]);
    });

    it('are not created for an unknown organization', async () => {
      expect(await failure(create('0190c3c4-0000-7000-8000-000000000000'))).toMatchObject({ status: 404, code: 'not_found' });
    });
  });
});
