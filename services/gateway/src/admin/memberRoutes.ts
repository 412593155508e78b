import { z } from 'zod';
import { MEMBER_ROLES, type contactsV1 } from '@rrs/proto';
import type { GatewayClients } from '../clients';
import { acceptUrl, resetUrl, type SystemEmails } from '../account/systemEmails';
import { defineRoute, type Route } from '../http/route';
import { EXAMPLE_IDS } from '../routes/shapes';
import { OrgParams } from './routes';

export const Invitation = z.object({
  id: z.string(), email: z.string(), role: z.enum(MEMBER_ROLES), expiresAt: z.string(), createdAt: z.string(),
});
const EXAMPLE_INVITATION = { id: '0190e0e0-aaaa-7000-8000-00000000000a', email: 'owner@example.com', role: 'owner', expiresAt: '2026-05-08T09:00:00.000Z', createdAt: '2026-05-01T09:00:00.000Z' };

export const invitationJson = (i: contactsV1.Invitation) => ({
  id: i.id, email: i.email, role: i.role as (typeof MEMBER_ROLES)[number], expiresAt: i.expiresAt ? i.expiresAt.toISOString() : '', createdAt: i.createdAt ? i.createdAt.toISOString() : '',
});

/** The operator invites an organization's people (its first owner above all) to the console. */
export function memberRoutes(clients: GatewayClients, publicBaseUrl: string, systemEmails: SystemEmails): Route[] {
  const { contacts } = clients;
  return [
    defineRoute({
      method: 'POST', path: '/organizations/{organizationId}/invitations', operationId: 'inviteMember', summary: 'Invite a person to the console', tags: ['members'], auth: 'adminToken',
      description: 'The person opens `acceptUrl`, sets a name and password, and is signed in. The URL (its token) is in this response only; it works once, for 7 days. It is also emailed to the person (docs/channels.md, "System emails").',
      request: { params: OrgParams, body: z.strictObject({ email: z.string().min(3).max(254), role: z.enum(MEMBER_ROLES).optional().meta({ description: 'Default `owner`.' }) }) },
      responses: { 201: { description: 'The invitation and its link.', body: z.object({ invitation: Invitation, acceptUrl: z.string() }), example: { invitation: EXAMPLE_INVITATION, acceptUrl: 'https://reviews.example.com/app/#/accept/inv_8s0dKq2LmZ7xV3cN1pR4tY6wB9hJ5fG2aE0uQ7kT3oS' } } },
      errors: [{ status: 409, code: 'member_exists', description: 'This email already signs in to an organization.' }],
      example: { params: { organizationId: EXAMPLE_IDS.organization }, body: { email: 'owner@example.com', role: 'owner' } },
      handler: async ({ params, body, metadata }) => {
        const r = await contacts.inviteMember({ organizationId: params.organizationId, email: body.email, role: body.role ?? 'owner', invitedBy: '' }, { metadata });
        const { organization } = await contacts.getOrganization({ id: params.organizationId }, { metadata });
        await systemEmails.invitation({ invitation: r.invitation!, token: r.token, organization: { name: organization!.name, locale: organization!.locale } });
        return { body: { invitation: invitationJson(r.invitation!), acceptUrl: acceptUrl(publicBaseUrl, r.token) } };
      },
    }),
    defineRoute({
      method: 'POST', path: '/organizations/{organizationId}/members/{memberId}/password-reset', operationId: 'startPasswordReset', summary: "Make a member's password reset link", tags: ['members'], auth: 'adminToken',
      description: 'The member opens `resetUrl` and sets a new password; every session of theirs ends then. The link is in this response only, works once, for an hour. Hand it to the member yourself (it is not emailed yet, docs/console.md).',
      request: { params: z.object({ organizationId: OrgParams.shape.organizationId, memberId: z.string().min(1).max(64).meta({ examples: ['0190e0e0-9999-7000-8000-000000000009'] }) }) },
      responses: { 201: { description: 'The link.', body: z.object({ resetUrl: z.string(), expiresAt: z.string() }), example: { resetUrl: 'https://reviews.example.com/app/#/reset/rst_8s0dKq2LmZ7xV3cN1pR4tY6wB9hJ5fG2aE0uQ7kT3oS', expiresAt: '2026-05-01T10:00:00.000Z' } } },
      handler: async ({ params, metadata }) => {
        const r = await contacts.startPasswordReset({ organizationId: params.organizationId, memberId: params.memberId }, { metadata });
        return { body: { resetUrl: resetUrl(publicBaseUrl, r.token), expiresAt: r.expiresAt ? r.expiresAt.toISOString() : '' } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/organizations/{organizationId}/members', operationId: 'listMembers', summary: "An organization's console people", tags: ['members'], auth: 'adminToken',
      request: { params: OrgParams },
      responses: { 200: { description: 'Oldest first.', body: z.object({ members: z.array(z.object({ id: z.string(), email: z.string(), name: z.string(), role: z.enum(MEMBER_ROLES), createdAt: z.string() })) }), example: { members: [{ id: '0190e0e0-9999-7000-8000-000000000009', email: 'owner@example.com', name: 'Anna', role: 'owner', createdAt: '2026-05-01T09:00:00.000Z' }] } } },
      handler: async ({ params, metadata }) => ({
        body: { members: (await contacts.listMembers({ organizationId: params.organizationId }, { metadata })).members.map((m) => ({ id: m.id, email: m.email, name: m.name, role: m.role as (typeof MEMBER_ROLES)[number], createdAt: m.createdAt ? m.createdAt.toISOString() : '' })) },
      }),
    }),
  ];
}
