import { requestFingerprint } from '@rrs/idempotency';
import { historyScans, recordStatements, type StatementRecorder } from '@rrs/testkit';
import { SCHEMA } from '../src';
import { queryRows, startHarness, type ContactsHarness } from './harness';

/**
 * Costs that do not grow with history (issue 35): every statement the contacts service ran while serving
 * the API and the console (POST and GET /contacts, API keys and their lookup, locations, the sending
 * profile and SMS debits of the send path, the console's members, invitations, sessions and password
 * resets, an erasure) is EXPLAINed on a database seeded with a year of history for many organizations;
 * none may read a history table whole.
 */
const HISTORY_TABLES = [
  'contacts', 'sms_ledger', 'idempotency_keys', 'api_keys', 'members', 'member_sessions', 'member_invitations',
  'member_password_resets', 'organizations', 'locations',
];
// Exempt: message_templates and channel_configurations hold a row per organization and channel (config
// that does not grow with traffic), and are read by their primary key anyway.
const ORGANIZATIONS = 200;
const SEEDED = 120_000;

describe('history plans: no statement contacts runs for the API or the console reads a history table whole', () => {
  let harness: ContactsHarness;
  let recorder: StatementRecorder;

  beforeAll(async () => {
    recorder = recordStatements();
    harness = await startHarness('contacts-plans');
    recorder.start();
  });
  afterAll(async () => {
    recorder.restore();
    await harness.close();
  });

  /** A year of traffic over many organizations: contacts, SMS debits, console sessions, saved idempotent answers. */
  async function seedHistory(): Promise<void> {
    const seed = [
      `INSERT INTO organizations (id, name, created_at)
       SELECT gen_random_uuid(), 'Seeded ' || g, now() - interval '1 year' FROM generate_series(1, ${ORGANIZATIONS}) g`,
      `INSERT INTO locations (id, organization_id, name, created_at)
       SELECT gen_random_uuid(), o.id, 'Seeded', o.created_at FROM organizations o, generate_series(1, 5)`,
      `INSERT INTO api_keys (id, organization_id, key_hash, prefix, last4, scopes, created_at)
       SELECT gen_random_uuid(), o.id, sha256(gen_random_uuid()::text::bytea), 'rrs_live', 'abcd', '{}', o.created_at FROM organizations o, generate_series(1, 10)`,
      `INSERT INTO contacts (id, organization_id, external_id, name, email, phone, consent_at, created_at)
       SELECT gen_random_uuid(), o.id, 'seed-' || g, 'Seeded', 'seed' || g || '@example.com', '+7916' || lpad(g::text, 7, '0'), now(),
              now() - interval '1 year' + g * (interval '1 year' / ${SEEDED})
         FROM (SELECT id, row_number() OVER () AS n FROM organizations) o, generate_series(1, ${SEEDED}) g WHERE g % ${ORGANIZATIONS} = o.n - 1`,
      `INSERT INTO sms_ledger (id, organization_id, kind, step_id, parts, delta, debited, balance_after, created_at)
       SELECT gen_random_uuid(), organization_id, 'debit', 'seed-step-' || id, 1, -1, true, 0, created_at FROM contacts`,
      `INSERT INTO idempotency_keys (organization_id, key, fingerprint, response, created_at, expires_at)
       SELECT organization_id, 'seed-' || id, 'f', convert_to(email, 'UTF8'), created_at, created_at + interval '1 day' FROM contacts`,
      `INSERT INTO members (id, organization_id, email, role, password_hash, created_at)
       SELECT gen_random_uuid(), o.id, 'member' || g || '-' || o.id || '@example.com', 'admin', 'x', o.created_at FROM organizations o, generate_series(1, 10) g`,
      // A sign-in a day for every member over the year, nearly all expired.
      `INSERT INTO member_sessions (id, member_id, organization_id, token_hash, csrf_token, created_at, last_seen_at, expires_at)
       SELECT gen_random_uuid(), m.id, m.organization_id, sha256(gen_random_uuid()::text::bytea), 'c', now() - d * interval '1 day', now() - d * interval '1 day', now() - d * interval '1 day' + interval '12 hours'
         FROM members m, generate_series(1, 60) d`,
      `INSERT INTO member_invitations (id, organization_id, email, role, token_hash, created_at, expires_at, accepted_at)
       SELECT gen_random_uuid(), m.organization_id, m.email, 'admin', sha256(gen_random_uuid()::text::bytea), m.created_at, m.created_at + interval '7 days', m.created_at FROM members m, generate_series(1, 5)`,
      `INSERT INTO member_password_resets (id, member_id, token_hash, created_at, expires_at, used_at)
       SELECT gen_random_uuid(), m.id, sha256(gen_random_uuid()::text::bytea), m.created_at, m.created_at + interval '1 hour', m.created_at FROM members m, generate_series(1, 5)`,
      'ANALYZE',
    ];
    for (const statement of seed) await queryRows(harness, `SET search_path TO ${SCHEMA}, public; ${statement}`);
  }

  it('every statement recorded while serving reads history through an index', async () => {
    const { client } = harness;
    const org = (await client.createOrganization({ name: 'Plans', plan: 'standard', emailConfirmed: true, smsBalance: 100, timeZone: 'Europe/Moscow', locale: 'ru', defaultRegion: 'RU' })).organization!;
    await client.getOrganization({ id: org.id });
    await client.updateOrganization({ id: org.id, name: 'Plans Inc', smsBalance: 50 });
    await client.listOrganizations({ limit: 10, after: '' });
    const key = await client.issueApiKey({ organizationId: org.id, name: 'crm', scopes: [], secret: '' }, { metadata: { 'idempotency-key': 'key-1', 'idempotency-fingerprint': 'f-key' } });
    await client.authenticate({ apiKey: key.secret });
    await client.listApiKeys({ organizationId: org.id });
    const location = (await client.createLocation({ organizationId: org.id, name: 'Main', address: '', city: '', timeZone: '', reviewLinks: [] })).location!;
    await client.listLocations({ organizationId: org.id });
    await client.getLocation({ organizationId: org.id, id: location.id });
    await client.updateLocation({ organizationId: org.id, id: location.id, name: 'Renamed', reviewLinks: [], replaceReviewLinks: false });

    const submission = { externalId: 'plan-1', name: 'Anna', email: 'anna@example.com', phone: '+79161234567', locationId: location.id, consentAt: '2026-05-01T12:00:00Z' };
    const metadata = { 'idempotency-key': 'contact-1', 'idempotency-fingerprint': requestFingerprint('POST', '/contacts', submission) };
    const upserted = await client.upsertContact({ startCascade: false, flowId: '', organizationId: org.id, ...submission } as never, { metadata });
    await client.upsertContact({ startCascade: false, flowId: '', organizationId: org.id, ...submission } as never, { metadata });
    await client.upsertContact({ startCascade: false, flowId: '', organizationId: org.id, externalId: 'plan-1', name: 'Anna B' } as never);
    await client.getContact({ organizationId: org.id, id: upserted.contact!.id });

    await client.setTemplate({ organizationId: org.id, channel: 'EMAIL', subject: 'Rate {{location}}', body: 'Hi {{name}}: {{link}}' });
    await client.listTemplates({ organizationId: org.id });
    await client.setChannelConfiguration({ organizationId: org.id, channel: 'SMS', configured: true });
    await client.listChannelConfigurations({ organizationId: org.id });
    await client.getSendingProfile({ organizationId: org.id, locationId: location.id });
    await client.debitSmsBalance({ organizationId: org.id, stepId: 'plan-step-1', parts: 1 });
    await client.debitSmsBalances({ debits: [{ organizationId: org.id, stepId: 'plan-step-2', parts: 1 }, { organizationId: org.id, stepId: 'plan-step-1', parts: 1 }] });
    await client.creditSmsBalance({ organizationId: org.id, parts: 10, reason: 'invoice' });

    const owner = await client.inviteMember({ organizationId: org.id, email: 'owner@example.com', role: 'owner', invitedBy: '' });
    const accepted = await client.acceptInvitation({ token: owner.token, name: 'Owner', password: 'a-good-long-password' });
    const signedIn = await client.signIn({ email: 'owner@example.com', password: 'a-good-long-password' });
    await client.resolveSession({ sessionToken: signedIn.sessionToken });
    await client.listMembers({ organizationId: org.id });
    const admin = await client.inviteMember({ organizationId: org.id, email: 'admin@example.com', role: 'admin', invitedBy: accepted.member!.id });
    await client.listInvitations({ organizationId: org.id });
    await client.revokeInvitation({ organizationId: org.id, invitationId: admin.invitation!.id });
    const viewer = await client.inviteMember({ organizationId: org.id, email: 'viewer@example.com', role: 'viewer', invitedBy: accepted.member!.id });
    const viewerMember = (await client.acceptInvitation({ token: viewer.token, name: 'Viewer', password: 'a-good-long-password' })).member!;
    await client.updateMemberRole({ organizationId: org.id, memberId: viewerMember.id, role: 'admin' });
    const reset = await client.startPasswordReset({ organizationId: org.id, memberId: viewerMember.id });
    await client.completePasswordReset({ token: reset.token, password: 'another-long-password' });
    await client.requestPasswordReset({ email: 'viewer@example.com' });
    await client.removeMember({ organizationId: org.id, memberId: viewerMember.id });
    await client.endSession({ sessionToken: signedIn.sessionToken });
    await client.revokeApiKey({ organizationId: org.id, id: key.apiKey!.id });
    await client.deleteLocation({ organizationId: org.id, id: location.id });
    await client.erasePersonContacts({ organizationId: org.id, email: 'anna@example.com', phone: '', contactExternalId: '' });
    expect(recorder.statements.size).toBeGreaterThan(30);

    recorder.stop();
    await seedHistory();
    expect(await historyScans(harness.db.url, recorder.statements, HISTORY_TABLES, { searchPath: SCHEMA })).toEqual([]);
  });
});
