import { count, failure, startHarness, type ContactsHarness } from './harness';

// Counts the argon2 hashes the members module makes: a guessed link must cost none.
jest.mock('@node-rs/argon2', () => {
  const actual = jest.requireActual('@node-rs/argon2');
  return { ...actual, hash: jest.fn(actual.hash) };
});
const argon2 = jest.requireMock('@node-rs/argon2') as { hash: jest.Mock };

/** Invitation and reset links (issue 29, "Low"): an unknown or used one is refused before any password is hashed. */
describe('console links: a guess costs no password hash', () => {
  let harness: ContactsHarness;
  let organizationId: string;

  beforeAll(async () => {
    harness = await startHarness('contacts-member-links');
    organizationId = (await harness.service.directory.createOrganization({ name: 'Links' })).id;
  });
  afterAll(async () => {
    await harness.close();
  });
  beforeEach(() => argon2.hash.mockClear());

  it('refuses an unknown invitation token with invalid_invitation without hashing the password, and creates nothing', async () => {
    const refused = await failure(harness.client.acceptInvitation({ token: 'inv_guessed0123456789', name: 'Guess', password: 'a-good-long-password' }));
    expect([refused.status, refused.code]).toEqual([401, 'invalid_invitation']);
    expect(argon2.hash).not.toHaveBeenCalled();
    expect(await count(harness, 'members')).toBe(0);
  });

  it('refuses an unknown or used reset token with invalid_reset_token without hashing the password', async () => {
    const refused = await failure(harness.client.completePasswordReset({ token: 'rst_guessed0123456789', password: 'a-good-long-password' }));
    expect([refused.status, refused.code]).toEqual([401, 'invalid_reset_token']);
    expect(argon2.hash).not.toHaveBeenCalled();

    const { token } = await harness.client.inviteMember({ organizationId, email: 'reset-me@example.com', role: 'admin', invitedBy: '' });
    const { member } = await harness.client.acceptInvitation({ token, name: 'Reset', password: 'first-password-123' });
    const reset = await harness.client.startPasswordReset({ organizationId, memberId: member!.id });
    await harness.client.completePasswordReset({ token: reset.token, password: 'second-password-123' });
    argon2.hash.mockClear();
    const used = await failure(harness.client.completePasswordReset({ token: reset.token, password: 'third-password-123' }));
    expect([used.status, used.code]).toEqual([401, 'invalid_reset_token']);
    expect(argon2.hash).not.toHaveBeenCalled();
  });

  it('hashes the password once for a valid invitation', async () => {
    const { token } = await harness.client.inviteMember({ organizationId, email: 'valid-link@example.com', role: 'viewer', invitedBy: '' });
    argon2.hash.mockClear();
    await harness.client.acceptInvitation({ token, name: 'Valid', password: 'a-good-long-password' });
    expect(argon2.hash).toHaveBeenCalledTimes(1);
  });
});
