import { z } from 'zod';
import { MEMBER_ROLES, type contactsV1 } from '@rrs/proto';
import { ForbiddenError, type Logger } from '@rrs/runtime';
import type { GatewayClients } from '../clients';
import { Invitation, invitationJson } from '../admin/memberRoutes';
import type { SessionPrincipal } from '../http/auth';
import type { RouteError } from '../http/errorCodes';
import { defineRoute, type Route } from '../http/route';
import type { SignInThrottle } from './signInThrottle';
import type { SystemEmails } from './systemEmails';

/*
 * The organization's people, as its owners manage them from the console (docs/console.md): roles,
 * removal, pending invitations, password resets by email, and "Forgot password?" on the sign-in page.
 * The contacts service owns every rule (the last owner stays, a removed member's sessions end with the
 * member); the gateway adds who may call (owners only) and the email (account/systemEmails.ts).
 */

export interface MemberRouteDeps {
  clients: GatewayClients;
  signInThrottle: SignInThrottle;
  systemEmails: SystemEmails;
  /** Where a failed "Forgot password?" email is reported (it happens after the answer). */
  logger?: Logger;
}

const Role = z.enum(MEMBER_ROLES);
const Member = z.object({ id: z.string(), email: z.string(), name: z.string(), role: Role, createdAt: z.string() });
const MemberParams = z.object({ memberId: z.string().min(1).max(64).meta({ examples: ['0190e0e0-9999-7000-8000-000000000009'] }) });
const InvitationParams = z.object({ invitationId: z.string().min(1).max(64).meta({ examples: ['0190e0e0-aaaa-7000-8000-00000000000a'] }) });
const EXAMPLE_MEMBER = { id: '0190e0e0-9999-7000-8000-000000000009', email: 'anna@example.com', name: 'Anna', role: 'admin', createdAt: '2026-05-01T09:00:00.000Z' };
const EXAMPLE_INVITATION = { id: '0190e0e0-aaaa-7000-8000-00000000000a', email: 'boris@example.com', role: 'viewer', expiresAt: '2026-05-08T09:00:00.000Z', createdAt: '2026-05-01T09:00:00.000Z' };

export const OWNER_ONLY: RouteError = { status: 403, code: 'owner_only', description: "Only the organization's owners manage its people; nothing is changed." };
const LAST_OWNER: RouteError = { status: 409, code: 'last_owner', description: 'The organization keeps at least one owner: make another member an owner first. Nothing is changed.' };
const THROTTLED: RouteError = { status: 429, code: 'too_many_sign_in_attempts', description: 'Too many sign-ins or reset requests from this address (for this email, or overall); retry after `Retry-After` seconds.' };

const iso = (d: Date | undefined) => (d ? d.toISOString() : '');
const memberJson = (m: contactsV1.Member) => ({ id: m.id, email: m.email, name: m.name, role: m.role as z.infer<typeof Role>, createdAt: iso(m.createdAt) });

/** Managing people is the owners' only (an admin changes everything else). */
export function requireOwner(principal: SessionPrincipal): void {
  if (principal.member.role !== 'owner') throw new ForbiddenError('owner_only', "only the organization's owners manage its people");
}

export function accountMemberRoutes(deps: MemberRouteDeps): Route[] {
  const { contacts } = deps.clients;
  return [
    defineRoute({
      method: 'PATCH', path: '/members/{memberId}', operationId: 'updateMemberRole', summary: "Change a member's role", tags: ['members'], auth: 'session',
      description: "An owner changes a member's role (their own too, while another owner remains). Takes effect on the member's next request.",
      request: { params: MemberParams, body: z.strictObject({ role: Role }) },
      responses: { 200: { description: 'The member as changed.', body: z.object({ member: Member }), example: { member: EXAMPLE_MEMBER } } },
      errors: [OWNER_ONLY, LAST_OWNER],
      example: { params: { memberId: EXAMPLE_MEMBER.id }, body: { role: 'admin' } },
      handler: async ({ params, body, principal, metadata }) => {
        requireOwner(principal);
        const r = await contacts.updateMemberRole({ organizationId: principal.organization.id, memberId: params.memberId, role: body.role }, { metadata });
        return { body: { member: memberJson(r.member!) } };
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/members/{memberId}', operationId: 'removeMember', summary: 'Remove a member', tags: ['members'], auth: 'session',
      description: 'An owner removes a person from the organization: every session of theirs ends at once and they can no longer sign in.',
      request: { params: MemberParams },
      responses: { 204: { description: 'Removed.' } },
      errors: [OWNER_ONLY, LAST_OWNER],
      example: { params: { memberId: EXAMPLE_MEMBER.id } },
      handler: async ({ params, principal, metadata }) => {
        requireOwner(principal);
        await contacts.removeMember({ organizationId: principal.organization.id, memberId: params.memberId }, { metadata });
        return {};
      },
    }),
    defineRoute({
      method: 'POST', path: '/members/{memberId}/password-reset', operationId: 'emailPasswordReset', summary: 'Email a member a password reset link', tags: ['members'], auth: 'session',
      description: 'An owner has a one-time reset link (one hour) emailed to the member. The link itself is never answered: only the member, in their mailbox, gets it.',
      request: { params: MemberParams },
      responses: { 202: { description: 'The link is on its way (`emailed: false`: it could not be queued now; try again).', body: z.object({ emailed: z.boolean(), expiresAt: z.string() }), example: { emailed: true, expiresAt: '2026-05-01T10:00:00.000Z' } } },
      errors: [OWNER_ONLY],
      example: { params: { memberId: EXAMPLE_MEMBER.id } },
      handler: async ({ params, principal, metadata }) => {
        requireOwner(principal);
        const r = await contacts.startPasswordReset({ organizationId: principal.organization.id, memberId: params.memberId }, { metadata });
        const emailed = await deps.systemEmails.passwordReset({ member: r.member!, token: r.token, expiresAt: r.expiresAt, organization: principal.organization });
        return { body: { emailed, expiresAt: iso(r.expiresAt) } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/members/invitations', operationId: 'listInvitations', summary: 'Pending invitations', tags: ['members'], auth: 'session',
      description: 'Invitations not accepted yet and not expired, newest first.',
      responses: { 200: { description: 'The pending invitations.', body: z.object({ invitations: z.array(Invitation) }), example: { invitations: [EXAMPLE_INVITATION] } } },
      handler: async ({ principal, metadata }) => ({ body: { invitations: (await contacts.listInvitations({ organizationId: principal.organization.id }, { metadata })).invitations.map(invitationJson) } }),
    }),
    defineRoute({
      method: 'DELETE', path: '/invitations/{invitationId}', operationId: 'revokeInvitation', summary: 'Revoke an invitation', tags: ['members'], auth: 'session',
      description: "An owner revokes a pending invitation: its link stops working at once. An accepted or expired invitation is 404.",
      request: { params: InvitationParams },
      responses: { 204: { description: 'Revoked.' } },
      errors: [OWNER_ONLY],
      example: { params: { invitationId: EXAMPLE_INVITATION.id } },
      handler: async ({ params, principal, metadata }) => {
        requireOwner(principal);
        await contacts.revokeInvitation({ organizationId: principal.organization.id, invitationId: params.invitationId }, { metadata });
        return {};
      },
    }),
    defineRoute({
      method: 'POST', path: '/password-reset/request', operationId: 'requestPasswordReset', summary: 'Forgot password: email a reset link', tags: ['session'], auth: 'visitor',
      description:
        'When a member signs in with this email, a one-time reset link (one hour) is emailed to it. The answer is the same, and comes as soon, whether or not the email is known (the lookup and the email happen after it), so it tells nobody who has an account; each request counts against the sign-in throttle of the email and the address.',
      request: { body: z.strictObject({ email: z.string().min(1).max(254) }) },
      responses: { 202: { description: 'Accepted: if the email belongs to a member, the link is on its way.', body: z.object({}) , example: {} } },
      errors: [THROTTLED],
      example: { body: { email: 'owner@example.com' } },
      handler: async ({ body, principal, metadata }) => {
        await deps.signInThrottle.check(body.email, principal.ip);
        await deps.signInThrottle.failed(body.email, principal.ip);
        // After the answer: how long the lookup and the email take must not tell whether the email is known.
        const emailLink = async () => {
          const r = await contacts.requestPasswordReset({ email: body.email }, { metadata });
          if (!r.found || !r.member) return;
          const { organization } = await contacts.getOrganization({ id: r.member.organizationId }, { metadata });
          await deps.systemEmails.passwordReset({ member: r.member, token: r.token, expiresAt: r.expiresAt, organization: { name: organization!.name, locale: organization!.locale } });
        };
        setImmediate(() => emailLink().catch((err: unknown) => deps.logger?.error({ err }, 'forgot-password email not sent')));
        return { body: {} };
      },
    }),
  ];
}
