import type { RunningContacts } from '@rrs/contacts';
import { openApiChecker, type OpenApiChecker } from '@rrs/testkit';
import { startDirectoryStack, type DirectoryStack } from './directoryStack';

/** POST /api/v1/contacts and GET /api/v1/locations over real HTTP → gateway → gRPC → contacts → PostgreSQL. */
describe('contacts and locations through the gateway', () => {
  let stack: DirectoryStack;
  let contacts: RunningContacts;
  let base: string;
  let api: OpenApiChecker;
  const keys: Record<'paid' | 'other' | 'trial' | 'unconfirmed', string> = { paid: '', other: '', trial: '', unconfirmed: '' };
  const orgs: Record<keyof typeof keys, string> = { paid: '', other: '', trial: '', unconfirmed: '' };
  let locationId: string;
  let foreignLocationId: string;

  beforeAll(async () => {
    stack = await startDirectoryStack('gateway-contacts');
    ({ contacts, base } = stack);
    const setups = {
      paid: { name: 'Acme', plan: 'standard', emailConfirmed: true },
      other: { name: 'Other', plan: 'pro', emailConfirmed: true },
      trial: { name: 'Trial', plan: 'trial', emailConfirmed: true },
      unconfirmed: { name: 'Unconfirmed', plan: 'standard', emailConfirmed: false },
    } as const;
    for (const [k, s] of Object.entries(setups) as Array<[keyof typeof keys, (typeof setups)[keyof typeof setups]]>) {
      const org = await contacts.directory.createOrganization({ ...s, locale: 'ru', defaultRegion: 'RU', sendWindow: null, cooldownDays: 0 });
      orgs[k] = org.id;
      keys[k] = (await contacts.directory.issueApiKey({ organizationId: org.id })).secret;
    }
    locationId = (await contacts.directory.createLocation({ organizationId: orgs.paid, name: 'Tverskaya', address: 'Tverskaya st. 1', city: 'Moscow', timeZone: 'Europe/Moscow', reviewLinks: [{ provider: 'google', url: 'https://maps.google.com/?cid=1' }] })).id;
    foreignLocationId = (await contacts.directory.createLocation({ organizationId: orgs.other, name: 'Theirs', address: 'Elsewhere 2', city: 'Kazan' })).id;
    api = await openApiChecker(`${base}/api/v1/openapi.json`);
  });
  afterAll(() => stack.close());

  const post = (body: unknown, who: keyof typeof keys = 'paid', headers: Record<string, string> = {}) =>
    api.fetch(`${base}/api/v1/contacts`, { method: 'POST', headers: { authorization: `Bearer ${keys[who]}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const stored = (who: keyof typeof keys = 'paid') => contacts.contacts.count(orgs[who]);
  const pointers = (body: unknown) => ((body as { errors?: Array<{ pointer: string }> }).errors ?? []).map((e) => e.pointer);

  describe('GET /api/v1/locations', () => {
    it("answers exactly {locations:[{id,name,address,city}]} of the key's organization", async () => {
      const res = await api.fetch(`${base}/api/v1/locations`, { headers: { authorization: `Bearer ${keys.paid}` } });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ locations: [{ id: locationId, name: 'Tverskaya', address: 'Tverskaya st. 1', city: 'Moscow' }] });
      const theirs = await api.fetch(`${base}/api/v1/locations`, { headers: { authorization: `Bearer ${keys.other}` } });
      expect(theirs.body).toEqual({ locations: [{ id: foreignLocationId, name: 'Theirs', address: 'Elsewhere 2', city: 'Kazan' }] });
    });

    it('needs the locations:read scope', async () => {
      const { secret } = await contacts.directory.issueApiKey({ organizationId: orgs.paid, scopes: ['contacts:write'] });
      const res = await api.fetch(`${base}/api/v1/locations`, { headers: { authorization: `Bearer ${secret}` } });
      expect(res.status).toBe(403);
      expect(res.body).toMatchObject({ code: 'insufficient_scope', requiredScope: 'locations:read' });
    });
  });

  describe('POST /api/v1/contacts', () => {
    it('creates a contact, normalizing the phone, and answers {contact, cascade: null}', async () => {
      const res = await post({ externalId: 'crm-1', name: 'Анна', email: 'anna@example.com', phone: '8 (916) 123-45-67', locationId, consentAt: '2026-05-01T12:00:00+03:00', attributes: { orderId: 'A-1' } });
      expect(res.status).toBe(200);
      expect(res.headers.get('idempotent-replayed')).toBeNull();
      expect(res.body).toEqual({
        contact: {
          id: expect.any(String), externalId: 'crm-1', name: 'Анна', email: 'anna@example.com', phone: '+79161234567', locationId,
          consentAt: '2026-05-01T09:00:00.000Z', attributes: { orderId: 'A-1' }, createdAt: expect.any(String), updatedAt: expect.any(String),
        },
        cascade: null,
      });
    });

    it('updates the same contact when the externalId comes again; null clears a field, absent keeps it', async () => {
      const first = (await post({ externalId: 'crm-2', name: 'Ivan', email: 'ivan@example.com', phone: '+79160000001' })).body as { contact: { id: string } };
      const before = await stored();
      const second = await post({ externalId: 'crm-2', phone: null, attributes: { visits: 2 } });
      expect(second.status).toBe(200);
      expect(second.body).toMatchObject({ contact: { id: first.contact.id, name: 'Ivan', email: 'ivan@example.com', phone: null, attributes: { visits: 2 } } });
      expect(await stored()).toBe(before);
    });

    it('creates a new contact on every call without an externalId', async () => {
      const before = await stored();
      const a = (await post({ name: 'Walk-in' })).body as { contact: { id: string; externalId: null } };
      const b = (await post({ name: 'Walk-in' })).body as { contact: { id: string } };
      expect(a.contact.id).not.toBe(b.contact.id);
      expect(a.contact.externalId).toBeNull();
      expect(await stored()).toBe(before + 2);
    });

    it.each<[string, unknown, string]>([
      ['an unparseable phone (checked by the service)', { externalId: 'bad', phone: 'call me maybe' }, '/phone'],
      ['an invalid email', { externalId: 'bad', email: 'anna@' }, '/email'],
      ['a consentAt without an offset', { externalId: 'bad', consentAt: '2026-05-01T12:00:00' }, '/consentAt'],
      ['attributes that are not an object', { externalId: 'bad', attributes: ['a'] }, '/attributes'],
      ['attributes with 51 keys (checked by the service)', { externalId: 'bad', attributes: Object.fromEntries(Array.from({ length: 51 }, (_v, i) => [`k${i}`, i])) }, '/attributes'],
      ['attributes over 8 KB (checked by the service)', { externalId: 'bad', attributes: { notes: 'x'.repeat(9000) } }, '/attributes'],
      ['an unknown field', { externalId: 'bad', phoneNumber: '+79160000000' }, '/phoneNumber'],
      ['a startCascade that is not a boolean', { externalId: 'bad', startCascade: 'yes' }, '/startCascade'],
    ])('answers 400 invalid_request for %s, naming the field, and creates nothing', async (_l, body, pointer) => {
      const before = await stored();
      const res = await post(body);
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(res.body).toMatchObject({ code: 'invalid_request', status: 400 });
      expect(pointers(res.body)).toEqual([pointer]);
      expect(await stored()).toBe(before);
    });

    it('answers 404 not_found for an unknown locationId and for another organization\'s, and creates nothing', async () => {
      const before = await stored();
      for (const id of ['0190c3c4-0000-7000-8000-000000000000', foreignLocationId, 'loc_1']) {
        const res = await post({ externalId: 'crm-404', locationId: id });
        expect(res.status).toBe(404);
        expect(res.body).toMatchObject({ code: 'not_found' });
      }
      expect(await stored()).toBe(before);
    });

    // With `startCascade` on a trial plan (402) or an unconfirmed email (409) the scheduler's dry run refuses
    // before this service saves anything: contactsCascade.test.ts (no scheduler listens in this stack).
    it('lets a trial plan save a contact without startCascade', async () => {
      expect((await post({ externalId: 'trial-2', email: 'a@example.com' }, 'trial')).status).toBe(200);
    });

    it('answers a repeat with the same Idempotency-Key from the saved response, creating nothing', async () => {
      const before = await stored();
      const body = { name: 'Idempotent', email: 'i@example.com' };
      const first = await post(body, 'paid', { 'idempotency-key': 'crm-hook-1' });
      const again = await post(body, 'paid', { 'idempotency-key': '"crm-hook-1"' });
      expect(again.status).toBe(200);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.body).toEqual(first.body);
      expect(await stored()).toBe(before + 1);
    });

    it('answers 409 idempotency_key_reused for the same key with another body, changing nothing', async () => {
      await post({ externalId: 'idem-2', name: 'First' }, 'paid', { 'idempotency-key': 'crm-hook-2' });
      const res = await post({ externalId: 'idem-2', name: 'Second' }, 'paid', { 'idempotency-key': 'crm-hook-2' });
      expect(res.status).toBe(409);
      expect(res.body).toMatchObject({ code: 'idempotency_key_reused' });
      const again = await post({ externalId: 'idem-2' }, 'paid');
      expect(again.body).toMatchObject({ contact: { name: 'First' } });
    });

    it('runs concurrent duplicates with one Idempotency-Key once: one contact, the others 409 in use or replays', async () => {
      const before = await stored();
      const body = { name: 'Concurrent webhook' };
      const all = await Promise.all(Array.from({ length: 6 }, () => post(body, 'paid', { 'idempotency-key': 'crm-hook-3' })));
      const ids = new Set<string>();
      for (const r of all) {
        if (r.status === 200) ids.add((r.body as { contact: { id: string } }).contact.id);
        else {
          expect(r.status).toBe(409);
          expect(r.body).toMatchObject({ code: 'idempotency_key_in_use' });
          expect(r.headers.get('retry-after')).toEqual(expect.any(String));
        }
      }
      expect(ids.size).toBe(1);
      expect(await stored()).toBe(before + 1);
      const replay = await post(body, 'paid', { 'idempotency-key': 'crm-hook-3' });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect((replay.body as { contact: { id: string } }).contact.id).toBe([...ids][0]);
    });

    it('keeps organizations apart: the same externalId in another organization is another contact', async () => {
      const mine = (await post({ externalId: 'shared-1', name: 'Mine' })).body as { contact: { id: string } };
      const theirs = (await post({ externalId: 'shared-1', name: 'Theirs' }, 'other')).body as { contact: { id: string } };
      expect(theirs.contact.id).not.toBe(mine.contact.id);
      expect((await post({ externalId: 'shared-1' })).body).toMatchObject({ contact: { name: 'Mine' } });
    });
  });
});
