/**
 * The account console's people (docs/console.md): the roles, the password rule and the lifetimes the
 * contacts service (which owns members and sessions) and the gateway (which serves the console) share.
 */

/** owner: everything; admin: everything but the organization's people and plan; viewer: reads only. */
export const MEMBER_ROLES = ['owner', 'admin', 'viewer'] as const;
export type MemberRole = (typeof MEMBER_ROLES)[number];

/** Roles that may change anything (every state-changing account call); a viewer gets 403 `read_only_role`. */
export const WRITING_ROLES: ReadonlySet<string> = new Set<MemberRole>(['owner', 'admin']);

export const PASSWORD_MIN_LENGTH = 10;
/** argon2 hashes whatever it is given; the bound keeps one sign-in from costing more than another. */
export const PASSWORD_MAX_LENGTH = 256;

/** A session ends after this long without a request. */
export const SESSION_IDLE_MS = 12 * 60 * 60 * 1000;
/** ...and at the latest this long after sign-in, however busy. */
export const SESSION_ABSOLUTE_MS = 14 * 24 * 60 * 60 * 1000;

export const INVITATION_TTL_MS = 7 * 24 * 60 * 60 * 1000;

export const PASSWORD_RESET_TTL_MS = 60 * 60 * 1000;
