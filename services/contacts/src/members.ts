import { createHash, randomBytes } from 'node:crypto';
import { hash as argon2Hash, verify as argon2Verify } from '@node-rs/argon2';
import { runIdempotent, secretReplay, type Codec, type IdempotencyRequest } from '@rrs/idempotency';
import { ConflictError, inTransaction, NotFoundError, randomBase62, UnauthenticatedError, uuidv7, type Pool, type PoolClient } from '@rrs/runtime';
import { INVITATION_TTL_MS, MEMBER_ROLES, PASSWORD_RESET_TTL_MS, PASSWORD_MAX_LENGTH, PASSWORD_MIN_LENGTH, SESSION_ABSOLUTE_MS, SESSION_IDLE_MS, type MemberRole } from '@rrs/proto';
import type { Directory, Organization } from './directory';
import { asUuid, checkText, FieldErrors } from './validation';

/**
 * The organization's people (the account console): members, their sessions and the invitations that
 * bring them in. Passwords are hashed with argon2id; session and invitation tokens carry 256 random
 * bits, so a SHA-256 of them is enough and lets a token be looked up by its hash.
 */

export interface Member {
  id: string;
  organizationId: string;
  email: string;
  name: string;
  role: MemberRole;
  createdAt: Date;
}

export interface Invitation {
  id: string;
  organizationId: string;
  email: string;
  role: MemberRole;
  expiresAt: Date;
  createdAt: Date;
}

export interface Session {
  id: string;
  memberId: string;
  organizationId: string;
  csrfToken: string;
  expiresAt: Date;
}

/** A signed-in person: the session's token goes into the cookie and is never stored. */
export interface OpenedSession {
  member: Member;
  session: Session;
  sessionToken: string;
}

/** OWASP's argon2id settings (19 MiB, 2 passes, 1 lane); the parameters are kept in each hash. */
const ARGON2 = { algorithm: 2 /* Algorithm.Argon2id (a const enum the compiler may not inline) */, memoryCost: 19_456, timeCost: 2, parallelism: 1 } as const;
const EMAIL = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]+$/;
const MEMBER_COLUMNS = `id, organization_id AS "organizationId", email, name, role, created_at AS "createdAt"`;
const INVITATION_COLUMNS = `id, organization_id AS "organizationId", email, role, expires_at AS "expiresAt", created_at AS "createdAt"`;
const SESSION_COLUMNS = `id, member_id AS "memberId", organization_id AS "organizationId", csrf_token AS "csrfToken", expires_at AS "expiresAt"`;
/** last_seen_at is written at most this often per session, not on every request. */
const SEEN_RESOLUTION_MS = 60_000;

const newToken = (prefix: string) => `${prefix}${randomBase62(43)}`;
const tokenHash = (token: string) => createHash('sha256').update(token).digest();
const INVALID_CREDENTIALS = () => new UnauthenticatedError('invalid_credentials', 'the email or the password is not right');
const INVALID_SESSION = () => new UnauthenticatedError('invalid_session', 'sign in again: the session is unknown, expired or ended');
const INVALID_RESET_TOKEN = () => new UnauthenticatedError('invalid_reset_token', 'the password reset link is unknown, expired or already used; ask for a new one');
const INVALID_INVITATION = () => new UnauthenticatedError('invalid_invitation', 'the invitation is unknown, expired or already used; ask for a new one');

export const normalizeEmail = (email: string) => email.trim().toLowerCase();

/** A saved invitation: the record (dates revived on replay) and its token sealed under the Idempotency-Key. */
const invitationCodec: Codec<{ invitation: Invitation; sealedToken: string }> = {
  encode: (made) => Buffer.from(JSON.stringify(made)),
  decode: (bytes) => {
    const saved = JSON.parse(Buffer.from(bytes).toString('utf8')) as { invitation: Invitation & { expiresAt: string; createdAt: string }; sealedToken: string };
    return { invitation: { ...saved.invitation, expiresAt: new Date(saved.invitation.expiresAt), createdAt: new Date(saved.invitation.createdAt) }, sealedToken: saved.sealedToken };
  },
};

function checkPassword(errors: FieldErrors, password: string): void {
  if (password.length < PASSWORD_MIN_LENGTH || password.length > PASSWORD_MAX_LENGTH) errors.add('/password', `must be ${PASSWORD_MIN_LENGTH} to ${PASSWORD_MAX_LENGTH} characters`);
}

function checkRole(errors: FieldErrors, role: string): void {
  if (!(MEMBER_ROLES as readonly string[]).includes(role)) errors.add('/role', `must be one of ${MEMBER_ROLES.join(', ')}`);
}

function checkEmail(errors: FieldErrors, email: string): void {
  if (email.length > 254 || !EMAIL.test(email)) errors.add('/email', 'must be an email address');
}

export class Members {
  /** Verified when the email is unknown, so a wrong email takes as long as a wrong password. */
  private decoyHash: Promise<string> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly directory: Directory,
  ) {}

  /**
   * An invitation for `email` to join with `role`; `member_exists` only when that email is already a
   * member of this organization (its owners see their members anyway). A member of another organization
   * is invited like anyone, so the answer never tells whether a person has an account elsewhere; they
   * learn it themselves on accepting (`member_exists`: an email signs in to one organization).
   * With an Idempotency-Key a repeat answers the first invitation and its token, creating none; the
   * token is saved sealed under the Idempotency-Key (`secretReplay`).
   */
  async invite(input: { organizationId: string; email: string; role: string; invitedBy?: string }, idempotency?: IdempotencyRequest): Promise<{ invitation: Invitation; token: string; replayed: boolean }> {
    const email = normalizeEmail(input.email);
    const errors = new FieldErrors();
    checkEmail(errors, email);
    checkRole(errors, input.role);
    errors.throwIfAny();
    await this.directory.getOrganization(input.organizationId);
    const replay = secretReplay(idempotency);
    const token = newToken('inv_');
    const { result, replayed } = await runIdempotent(this.pool, replay.request, invitationCodec, async (client) => {
      const { rows: existing } = await client.query(`SELECT 1 FROM members WHERE lower(email) = $1 AND organization_id = $2`, [email, input.organizationId]);
      if (existing.length > 0) throw new ConflictError('member_exists', `${email} is already a member of this organization`);
      const { rows } = await client.query<Invitation>(
        `INSERT INTO member_invitations (id, organization_id, email, role, token_hash, invited_by, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, now() + $7 * interval '1 millisecond')
         RETURNING ${INVITATION_COLUMNS}`,
        [uuidv7(), input.organizationId, email, input.role, tokenHash(token), input.invitedBy || null, INVITATION_TTL_MS],
      );
      return { invitation: rows[0], sealedToken: replay.seal(token) };
    });
    return { invitation: result.invitation, token: replayed ? replay.open(result.sealedToken) : token, replayed };
  }

  /** Makes the invited person a member with this name and password, and signs them in. The invitation is used once. */
  async acceptInvitation(input: { token: string; name: string; password: string }): Promise<OpenedSession> {
    const errors = new FieldErrors();
    checkText(errors, '/name', input.name, { max: 200 });
    checkPassword(errors, input.password);
    errors.throwIfAny();
    // A guessed token costs one indexed look-up, never an argon2 hash (19 MiB, tens of ms of CPU).
    const { rowCount: live } = await this.pool.query(`SELECT 1 FROM member_invitations WHERE token_hash = $1 AND accepted_at IS NULL AND expires_at > now()`, [tokenHash(input.token)]);
    if (!live) throw INVALID_INVITATION();
    const passwordHash = await argon2Hash(input.password, ARGON2);
    return inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<{ id: string; organizationId: string; email: string; role: MemberRole }>(
        `SELECT id, organization_id AS "organizationId", email, role FROM member_invitations
          WHERE token_hash = $1 AND accepted_at IS NULL AND expires_at > now() FOR UPDATE`,
        [tokenHash(input.token)],
      );
      const invitation = rows[0];
      if (!invitation) throw INVALID_INVITATION();
      const member = await insertMember(client, { organizationId: invitation.organizationId, email: invitation.email, name: input.name.trim(), role: invitation.role, passwordHash });
      await client.query(`UPDATE member_invitations SET accepted_at = now() WHERE id = $1`, [invitation.id]);
      return { member, ...(await openSession(client, member)) };
    });
  }

  /**
   * A member added directly, without an invitation: the all-in-one's demo person. An existing member
   * with that email keeps their id and gets this password and role.
   */
  async ensureMember(input: { organizationId: string; email: string; name?: string; role: MemberRole; password: string }): Promise<Member> {
    const email = normalizeEmail(input.email);
    const errors = new FieldErrors();
    checkEmail(errors, email);
    checkPassword(errors, input.password);
    checkRole(errors, input.role);
    errors.throwIfAny();
    const passwordHash = await argon2Hash(input.password, ARGON2);
    const { rows } = await this.pool.query<Member>(
      `UPDATE members SET password_hash = $3, role = $4, updated_at = now() WHERE lower(email) = $1 AND organization_id = $2 RETURNING ${MEMBER_COLUMNS}`,
      [email, input.organizationId, passwordHash, input.role],
    );
    if (rows[0]) return rows[0];
    return insertMember(this.pool, { organizationId: input.organizationId, email, name: input.name ?? '', role: input.role, passwordHash });
  }

  /** Email + password → a new session; `invalid_credentials` for an unknown email and a wrong password alike. */
  async signIn(input: { email: string; password: string }): Promise<OpenedSession> {
    const email = normalizeEmail(input.email);
    // Nothing longer than the rule allows is hashed (and no such password was ever set).
    if (input.password.length > PASSWORD_MAX_LENGTH || email.length > 254) throw INVALID_CREDENTIALS();
    const { rows } = await this.pool.query<Member & { passwordHash: string }>(`SELECT ${MEMBER_COLUMNS}, password_hash AS "passwordHash" FROM members WHERE lower(email) = $1`, [email]);
    const found = rows[0];
    const stored = found?.passwordHash ?? (await this.decoy());
    const matches = await argon2Verify(stored, input.password).catch(() => false);
    if (!found || !matches) throw INVALID_CREDENTIALS();
    const { passwordHash: _secret, ...member } = found;
    return { member, ...(await openSession(this.pool, member)) };
  }

  /** The live session of a token, its member and organization; the idle expiry moves on. */
  async resolveSession(sessionToken: string): Promise<{ member: Member; session: Session; organization: Organization }> {
    if (!sessionToken) throw INVALID_SESSION();
    const { rows } = await this.pool.query<Session & { lastSeenAt: Date; createdAt: Date; member: Member }>(
      `SELECT s.id, s.member_id AS "memberId", s.organization_id AS "organizationId", s.csrf_token AS "csrfToken", s.expires_at AS "expiresAt",
              s.last_seen_at AS "lastSeenAt", s.created_at AS "createdAt",
              json_build_object('id', m.id, 'organizationId', m.organization_id, 'email', m.email, 'name', m.name, 'role', m.role, 'createdAt', m.created_at) AS member
         FROM member_sessions s JOIN members m ON m.id = s.member_id
        WHERE s.token_hash = $1 AND s.ended_at IS NULL AND s.expires_at > now() AND s.last_seen_at > now() - $2 * interval '1 millisecond'`,
      [tokenHash(sessionToken), SESSION_IDLE_MS],
    );
    const row = rows[0];
    if (!row) throw INVALID_SESSION();
    if (Date.now() - row.lastSeenAt.getTime() > SEEN_RESOLUTION_MS) await this.pool.query(`UPDATE member_sessions SET last_seen_at = now() WHERE id = $1`, [row.id]);
    const member = { ...row.member, createdAt: new Date(row.member.createdAt) };
    const organization = await this.directory.getOrganization(row.organizationId);
    return { member, session: { id: row.id, memberId: row.memberId, organizationId: row.organizationId, csrfToken: row.csrfToken, expiresAt: row.expiresAt }, organization };
  }

  async endSession(sessionToken: string): Promise<void> {
    if (!sessionToken) return;
    await this.pool.query(`UPDATE member_sessions SET ended_at = now() WHERE token_hash = $1 AND ended_at IS NULL`, [tokenHash(sessionToken)]);
  }

  /** A one-time reset token for a member of this organization (another organization's member is not found). */
  async startPasswordReset(input: { organizationId: string; memberId: string }): Promise<{ token: string; expiresAt: Date; member: Member }> {
    const member = await this.memberOf(this.pool, input.organizationId, input.memberId);
    return { ...(await this.newReset(member.id)), member };
  }

  /**
   * "Forgot password?": a reset for whoever signs in with this email, or `found: false` with nothing
   * created. The caller must answer both alike (no account enumeration).
   */
  async requestPasswordReset(email: string): Promise<{ found: false } | { found: true; token: string; expiresAt: Date; member: Member }> {
    const normalized = normalizeEmail(email);
    if (normalized.length > 254 || !EMAIL.test(normalized)) return { found: false };
    const { rows } = await this.pool.query<Member>(`SELECT ${MEMBER_COLUMNS} FROM members WHERE lower(email) = $1`, [normalized]);
    if (!rows[0]) return { found: false };
    return { found: true, ...(await this.newReset(rows[0].id)), member: rows[0] };
  }

  private async newReset(memberId: string): Promise<{ token: string; expiresAt: Date }> {
    const token = newToken('rst_');
    const { rows } = await this.pool.query<{ expiresAt: Date }>(
      `INSERT INTO member_password_resets (id, member_id, token_hash, expires_at) VALUES ($1, $2, $3, now() + $4 * interval '1 millisecond') RETURNING expires_at AS "expiresAt"`,
      [uuidv7(), memberId, tokenHash(token), PASSWORD_RESET_TTL_MS],
    );
    return { token, expiresAt: rows[0].expiresAt };
  }

  /**
   * A new role. The organization's owners are locked while counted, so two owners demoting each other
   * at once cannot leave it without one (the second waits, then finds the last owner).
   */
  async updateRole(input: { organizationId: string; memberId: string; role: string }): Promise<Member> {
    const errors = new FieldErrors();
    checkRole(errors, input.role);
    errors.throwIfAny();
    return inTransaction(this.pool, async (client) => {
      const { member, owners } = await this.lockForPeopleChange(client, input.organizationId, input.memberId);
      if (input.role !== 'owner') keepAnOwner(owners, member);
      const { rows } = await client.query<Member>(`UPDATE members SET role = $2, updated_at = now() WHERE id = $1 RETURNING ${MEMBER_COLUMNS}`, [member.id, input.role]);
      return rows[0];
    });
  }

  /** Removes a member; their sessions and reset links go with the row (ON DELETE CASCADE), so they are out at once. */
  async remove(input: { organizationId: string; memberId: string }): Promise<Member> {
    return inTransaction(this.pool, async (client) => {
      const { member, owners } = await this.lockForPeopleChange(client, input.organizationId, input.memberId);
      keepAnOwner(owners, member);
      await client.query(`DELETE FROM members WHERE id = $1`, [member.id]);
      return member;
    });
  }

  /** Invitations not accepted and not expired, newest first. */
  async listInvitations(organizationId: string): Promise<Invitation[]> {
    await this.directory.getOrganization(organizationId);
    const { rows } = await this.pool.query<Invitation>(
      `SELECT ${INVITATION_COLUMNS} FROM member_invitations
        WHERE organization_id = $1 AND accepted_at IS NULL AND expires_at > now() ORDER BY created_at DESC, id DESC`,
      [asUuid(organizationId, 'organization')],
    );
    return rows;
  }

  /** Deletes a pending invitation, so its link is unknown from now on. */
  async revokeInvitation(input: { organizationId: string; invitationId: string }): Promise<Invitation> {
    const { rows } = await this.pool.query<Invitation>(
      `DELETE FROM member_invitations WHERE id = $1 AND organization_id = $2 AND accepted_at IS NULL AND expires_at > now() RETURNING ${INVITATION_COLUMNS}`,
      [asUuid(input.invitationId, 'invitation'), asUuid(input.organizationId, 'organization')],
    );
    if (!rows[0]) throw new NotFoundError(`invitation ${input.invitationId}`);
    return rows[0];
  }

  /**
   * Locks the organization's owners, always first and in id order so that concurrent changes queue
   * instead of deadlocking, then the member changed (another organization's is not found).
   */
  private async lockForPeopleChange(client: PoolClient, organizationId: string, memberId: string): Promise<{ member: Member; owners: string[] }> {
    const { rows } = await client.query<{ id: string }>(`SELECT id FROM members WHERE organization_id = $1 AND role = 'owner' ORDER BY id FOR UPDATE`, [asUuid(organizationId, 'organization')]);
    return { member: await this.memberOf(client, organizationId, memberId), owners: rows.map((row) => row.id) };
  }

  /** A member of this organization, locked for the transaction; another organization's is not found. */
  private async memberOf(client: Pool | PoolClient, organizationId: string, memberId: string): Promise<Member> {
    const { rows } = await client.query<Member>(`SELECT ${MEMBER_COLUMNS} FROM members WHERE id = $1 AND organization_id = $2 FOR UPDATE`, [
      asUuid(memberId, 'member'),
      asUuid(organizationId, 'organization'),
    ]);
    if (!rows[0]) throw new NotFoundError(`member ${memberId}`);
    return rows[0];
  }

  /** The new password; every session of the member ends (whoever had it is out) and a new one opens. */
  async completePasswordReset(input: { token: string; password: string }): Promise<OpenedSession> {
    const errors = new FieldErrors();
    checkPassword(errors, input.password);
    errors.throwIfAny();
    // As for invitations: an unknown or used link is refused before any password is hashed.
    const { rowCount: live } = await this.pool.query(`SELECT 1 FROM member_password_resets WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()`, [tokenHash(input.token)]);
    if (!live) throw INVALID_RESET_TOKEN();
    const passwordHash = await argon2Hash(input.password, ARGON2);
    return inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<{ id: string; memberId: string }>(
        `SELECT id, member_id AS "memberId" FROM member_password_resets WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now() FOR UPDATE`,
        [tokenHash(input.token)],
      );
      const reset = rows[0];
      if (!reset) throw INVALID_RESET_TOKEN();
      await client.query(`UPDATE member_password_resets SET used_at = now() WHERE member_id = $1 AND used_at IS NULL`, [reset.memberId]);
      await client.query(`UPDATE member_sessions SET ended_at = now() WHERE member_id = $1 AND ended_at IS NULL`, [reset.memberId]);
      const { rows: members } = await client.query<Member>(`UPDATE members SET password_hash = $2, updated_at = now() WHERE id = $1 RETURNING ${MEMBER_COLUMNS}`, [reset.memberId, passwordHash]);
      return { member: members[0], ...(await openSession(client, members[0])) };
    });
  }

  async listMembers(organizationId: string): Promise<Member[]> {
    await this.directory.getOrganization(organizationId);
    const { rows } = await this.pool.query<Member>(`SELECT ${MEMBER_COLUMNS} FROM members WHERE organization_id = $1 ORDER BY created_at, id`, [asUuid(organizationId, 'organization')]);
    return rows;
  }

  private decoy(): Promise<string> {
    this.decoyHash ??= argon2Hash(randomBytes(16).toString('hex'), ARGON2);
    return this.decoyHash;
  }
}

/** Refuses to take `owner` away from the organization's last owner; `owners` are the locked owners' ids. */
function keepAnOwner(owners: readonly string[], leaving: Member): void {
  if (leaving.role === 'owner' && !owners.some((id) => id !== leaving.id)) throw new ConflictError('last_owner', 'an organization keeps at least one owner: make another member an owner first');
}

async function insertMember(client: Pool | PoolClient, input: { organizationId: string; email: string; name: string; role: MemberRole; passwordHash: string }): Promise<Member> {
  const { rows } = await client.query<Member>(
    `INSERT INTO members (id, organization_id, email, name, role, password_hash) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (lower(email)) DO NOTHING RETURNING ${MEMBER_COLUMNS}`,
    [uuidv7(), input.organizationId, input.email, input.name, input.role, input.passwordHash],
  );
  if (!rows[0]) throw new ConflictError('member_exists', `${input.email} is already a member of an organization`);
  return rows[0];
}

async function openSession(client: Pool | PoolClient, member: Member): Promise<{ session: Session; sessionToken: string }> {
  const sessionToken = newToken('rss_');
  const { rows } = await client.query<Session>(
    `INSERT INTO member_sessions (id, member_id, organization_id, token_hash, csrf_token, expires_at)
     VALUES ($1, $2, $3, $4, $5, now() + $6 * interval '1 millisecond') RETURNING ${SESSION_COLUMNS}`,
    [uuidv7(), member.id, member.organizationId, tokenHash(sessionToken), randomBase62(43), SESSION_ABSOLUTE_MS],
  );
  return { session: rows[0], sessionToken };
}
