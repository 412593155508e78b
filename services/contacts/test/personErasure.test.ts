import { requestFingerprint } from '@rrs/idempotency';
import type { contactsV1 } from '@rrs/proto';
import { count, startHarness, type ContactsHarness } from './harness';

/** ErasePersonContacts (the contacts' part of an erasure; docs/customer-respect.md, "Erasure of a person") against real PostgreSQL. */
describe('ErasePersonContacts over gRPC', () => {
  let harness: ContactsHarness;
  let org: contactsV1.Organization;
  let other: contactsV1.Organization;

  beforeAll(async () => {
    harness = await startHarness('contacts-erasure');
    const create = async (name: string) => (await harness.client.createOrganization({ name, plan: 'standard', emailConfirmed: true, smsBalance: 0, timeZone: 'Europe/Moscow', locale: 'ru', defaultRegion: 'RU' })).organization!;
    org = await create('Acme');
    other = await create('Other');
  });
  afterAll(() => harness.close());

  const upsert = (organizationId: string, sub: Partial<contactsV1.UpsertContactRequest>, key?: string) =>
    harness.client.upsertContact({ startCascade: false, flowId: '', ...sub, organizationId } as contactsV1.UpsertContactRequest, {
      metadata: key ? { 'idempotency-key': key, 'idempotency-fingerprint': requestFingerprint('POST', '/contacts', sub) } : undefined,
    });
  const erase = (organizationId: string, by: { email?: string; phone?: string; contactExternalId?: string }) =>
    harness.client.erasePersonContacts({ organizationId, email: '', phone: '', contactExternalId: '', ...by });

  it('deletes the contacts with the email (any case), the phone or the external id, with their consent and saved answers; hands back their addresses; idempotent', async () => {
    await upsert(org.id, { externalId: 'e-1', name: 'Olga', email: 'Olga@Example.com', phone: '+7 916 000-00-51', consentAt: '2026-05-01T12:00:00+03:00' }, 'key-olga');
    await upsert(org.id, { externalId: 'e-2', name: 'Olga again', phone: '+79160000052' });
    await upsert(org.id, { externalId: 'e-3', name: 'Kept', email: 'kept@example.com' });
    await upsert(other.id, { externalId: 'e-1', name: 'Olga elsewhere', email: 'olga@example.com' });

    const byEmail = await erase(org.id, { email: 'olga@example.com' });
    expect(byEmail).toEqual({ contacts: 1, idempotencyKeys: 1, addresses: ['olga@example.com', '+79160000051'] });
    expect(await erase(org.id, { phone: '+79160000052' })).toEqual({ contacts: 1, idempotencyKeys: 0, addresses: ['+79160000052'] });
    expect(await erase(org.id, { contactExternalId: 'e-3' })).toEqual({ contacts: 1, idempotencyKeys: 0, addresses: ['kept@example.com'] });
    expect(await count(harness, 'contacts', 'organization_id = $1', [org.id])).toBe(0);
    // Another organization's contact with the same email and external id is untouched.
    expect(await count(harness, 'contacts', 'organization_id = $1', [other.id])).toBe(1);
    expect(await erase(org.id, { email: 'olga@example.com' })).toEqual({ contacts: 0, idempotencyKeys: 0, addresses: [] });
  });
});
