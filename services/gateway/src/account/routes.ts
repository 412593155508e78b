import { z } from 'zod';
import { CASCADE_STATUSES, MEMBER_ROLES, PASSWORD_MAX_LENGTH, SCOPES, SESSION_ABSOLUTE_MS, type contactsV1, type schedulerV1 } from '@rrs/proto';
import { DomainError, ForbiddenError, RateLimitedError, type Logger } from '@rrs/runtime';
import { createFailureLimiters, type FailureLimiter } from '../addressLimits';
import type { ChannelCatalogSource } from '../catalog/channelCatalog';
import type { GatewayClients } from '../clients';
import { Invitation, invitationJson } from '../admin/memberRoutes';
import { ApiKey, apiKeyJson, EXAMPLE_API_KEY, EXAMPLE_FLOW, EXAMPLE_LOCATION, Flow, flowJson, idOf, Location, locationJson } from '../admin/routes';
import { sessionCookie, type SessionPrincipal } from '../http/auth';
import type { RouteError } from '../http/errorCodes';
import { defineRoute, type Route } from '../http/route';
import { SENDING_ERRORS } from '../http/sending';
import type { RateLimiter } from '../rateLimit';
import { cascadeJson, EXAMPLE_CASCADE, EXAMPLE_START_RESPONSE, GetCascadeResponse, RecipientJson, StartCascadeBody, startCascadeJson, StartCascadeResponse } from '../routes/cascades';
import { CascadeStatus, Scope } from '../routes/enums';
import { EXAMPLE_IDS } from '../routes/shapes';
import { startCascade } from '../useCases/cascades';
import type { SignInThrottle } from './signInThrottle';
import type { SystemEmails } from './systemEmails';

/*
 * The account API (`/account/v1`): what the console calls, as a signed-in member of one organization.
 * Every call is scoped to the session's organization: no route takes an organization id, and an id of
 * another organization's object is 404 as on the public API. Transport only, like the admin API: the
 * same gRPC operations, the same JSON shapes (admin/routes.ts, routes/cascades.ts).
 */

export interface AccountRouteDeps {
  clients: GatewayClients;
  /** Where the links the console hands out (invitations) point. */
  publicBaseUrl: string;
  signInThrottle: SignInThrottle;
  /** The public API's per-plan quota, counted per organization for the console's sends. */
  rateLimiter: RateLimiter;
  /** Invitations and password reset links by email (channel-email). */
  systemEmails: SystemEmails;
  /** Reports what fails after an answer (the "Forgot password?" email). */
  logger?: Logger;
  /** Unknown, expired or used invitation and reset links, counted per client address; unset = in memory. */
  tokenFailures?: FailureLimiter;
  /** The live channel catalog: which channels report deliveries (the overview's funnel). */
  channelCatalog?: ChannelCatalogSource;
}

const TOKEN_GUESSES: RouteError = {
  status: 429,
  code: 'too_many_auth_failures',
  description: 'Too many unknown, expired or used invitation or reset links came from this client address; every such request from it is refused, the right link too, until `Retry-After` seconds have passed.',
};

/**
 * An invitation or reset link is tried once per request: each refused one counts against the client
 * address (ADDRESS_FAILURE_RULES.accountToken), and past the limit the address is refused before any
 * look-up, whatever link it brings (docs/security.md, "Per-address limits").
 */
async function withLinkToken<T>(failures: FailureLimiter, address: string, use: () => Promise<T>): Promise<T> {
  const blocked = await failures.blockedFor(address);
  if (blocked > 0) throw new RateLimitedError('too_many_auth_failures', `too many unknown or used links from this address; retry in ${blocked} s`, blocked);
  try {
    return await use();
  } catch (err) {
    if (err instanceof DomainError && (err.code === 'invalid_invitation' || err.code === 'invalid_reset_token')) await failures.fail(address);
    throw err;
  }
}

const Role = z.enum(MEMBER_ROLES).meta({ id: 'MemberRole', description: '`owner` and `admin` may change things; a `viewer` only looks (403 `read_only_role`).' });
const Member = z.object({ id: z.string(), email: z.string(), name: z.string(), role: Role, createdAt: z.string() }).meta({ id: 'Member' });
const AccountOrganization = z.object({ id: z.string(), name: z.string(), plan: z.string(), emailConfirmed: z.boolean(), locale: z.string(), timeZone: z.string() });
const SessionBody = z.object({
  member: Member,
  organization: AccountOrganization,
  csrfToken: z.string().meta({ description: 'Send as `X-CSRF-Token` on every state-changing call of this session.' }),
});
const SignedIn = z.object({ member: Member, csrfToken: z.string().meta({ description: 'Send as `X-CSRF-Token` on every state-changing call of this session.' }) });
const Password = z.string().min(1).max(PASSWORD_MAX_LENGTH);

export const EXAMPLE_MEMBER = { id: '0190e0e0-9999-7000-8000-000000000009', email: 'owner@example.com', name: 'Anna', role: 'owner', createdAt: '2026-05-01T09:00:00.000Z' };
const EXAMPLE_CSRF = 'Qm3xY7cP0aLk2sV9dN4fR8tZ1wE6hJ5uB3gT0yKqX2o';
const EXAMPLE_ORG = { id: EXAMPLE_IDS.organization, name: 'Acme Dental', plan: 'standard', emailConfirmed: true, locale: 'ru', timeZone: 'Europe/Moscow' };

const INVALID_CREDENTIALS: RouteError = { status: 401, code: 'invalid_credentials', description: 'The email or the password is not right (one answer for both); nothing is created.' };
const THROTTLED: RouteError = { status: 429, code: 'too_many_sign_in_attempts', description: 'Too many failed sign-ins from this address (for this email, or overall); retry after `Retry-After` seconds.' };
const INVALID_INVITATION: RouteError = { status: 401, code: 'invalid_invitation', description: 'The invitation is unknown, expired or already used.' };
const INVALID_RESET_TOKEN: RouteError = { status: 401, code: 'invalid_reset_token', description: 'The password reset link is unknown, expired or already used.' };
const MEMBER_EXISTS = { status: 409, code: 'member_exists', description: 'This email already signs in to an organization.' };
const OWNER_ONLY: RouteError = { status: 403, code: 'owner_only', description: "Only the organization's owners manage its people." };
const CONSOLE_QUOTA: RouteError = { status: 429, code: 'rate_limited', description: "The organization's request quota (its plan's, as on the public API) is used up; retry after `Retry-After` seconds." };

const FunnelCounts = z.object({
  requests: z.number().int().meta({ description: 'Review requests made.' }),
  sent: z.number().int().meta({ description: '…with at least one step sent.' }),
  delivered: z.number().int().nullable().meta({ description: '…with a step the provider reported delivered; null ("not reported") when a channel that sent has no delivery receipts, or fewer were reported delivered than opened the form.' }),
  opened: z.number().int().meta({ description: '…whose form was opened.' }),
  rated: z.number().int(),
  publicLinksShown: z.number().int().meta({ description: '…shown the public review links (after rating).' }),
  publicLinkClicked: z.number().int().meta({ description: '…that clicked one of them (the redirect `/r/<token>/go/<n>` records it): left a public review.' }),
}).meta({ id: 'FunnelCounts' });
const DAY_MS = 24 * 60 * 60 * 1000;
/** GET /api/v1/cascades/{id}'s shape, with when each recipient opened the form (the console's timeline). */
const AccountCascade = GetCascadeResponse.extend({
  recipients: z.array(RecipientJson.extend({ openedAt: z.string().nullable().meta({ description: 'When the recipient first opened the review form; null until then.' }) })),
});
const Day = z.string().regex(/^\d{4}-\d{2}-\d{2}$/);
export const SEARCH_DAYS = {
  from: Day.optional().meta({ description: "First day, YYYY-MM-DD, in the organization's time zone (default: no lower bound)." }),
  to: Day.optional().meta({ description: 'Last day, YYYY-MM-DD, included (default: no upper bound).' }),
};
const iso = (d: Date | undefined) => (d ? d.toISOString() : '');
const memberJson = (m: contactsV1.Member) => ({ id: m.id, email: m.email, name: m.name, role: m.role as z.infer<typeof Role>, createdAt: iso(m.createdAt) });
const organizationJson = (o: SessionPrincipal['organization']) => ({ id: o.id, name: o.name, plan: o.plan, emailConfirmed: o.emailConfirmed, locale: o.locale, timeZone: o.timeZone });
const SESSION_MAX_AGE_SECONDS = Math.floor(SESSION_ABSOLUTE_MS / 1000);

export function accountRoutes(deps: AccountRouteDeps): Route[] {
  const { contacts, scheduler } = deps.clients;
  const tokenFailures = deps.tokenFailures ?? createFailureLimiters({ keyPrefix: '' }).accountToken;
  /** The console's sends count against the organization's plan quota, like an API key's requests. */
  const consumeQuota = async (principal: SessionPrincipal) => {
    const d = await deps.rateLimiter.consume({ keyId: `console:${principal.organization.id}`, organization: principal.organization });
    if (!d.allowed) throw new RateLimitedError('rate_limited', `the organization's quota of ${d.limit} requests per ${d.windowSeconds} s is used up; retry in ${d.resetSeconds} s`, d.resetSeconds);
  };

  return [
    // Session
    defineRoute({
      method: 'POST', path: '/session', operationId: 'signIn', summary: 'Sign in', tags: ['session'], auth: 'visitor',
      description: 'Checks the email and password and sets the session cookie (HttpOnly, SameSite=Lax, Secure over TLS). Failed attempts are counted per email and address: past the limit, 429 until `Retry-After`.',
      request: { body: z.strictObject({ email: z.string().min(1).max(254), password: Password }) },
      responses: { 200: { description: 'Signed in; the cookie is set.', body: SignedIn, example: { member: EXAMPLE_MEMBER, csrfToken: EXAMPLE_CSRF } } },
      errors: [INVALID_CREDENTIALS, THROTTLED],
      example: { body: { email: 'owner@example.com', password: 'correct horse battery staple' } },
      handler: async ({ body, principal, metadata }) => {
        await deps.signInThrottle.check(body.email, principal.ip);
        let opened: contactsV1.SignInResponse;
        try {
          opened = await contacts.signIn({ email: body.email, password: body.password }, { metadata });
        } catch (err) {
          if ((err as { code?: string }).code === 'invalid_credentials') await deps.signInThrottle.failed(body.email, principal.ip);
          throw err;
        }
        await deps.signInThrottle.succeeded(body.email, principal.ip);
        return {
          headers: { 'set-cookie': sessionCookie(opened.sessionToken, { secure: principal.secure, maxAgeSeconds: SESSION_MAX_AGE_SECONDS }) },
          body: { member: memberJson(opened.member!), csrfToken: opened.session!.csrfToken },
        };
      },
    }),
    defineRoute({
      method: 'GET', path: '/session', operationId: 'getSession', summary: 'Who is signed in', tags: ['session'], auth: 'session',
      responses: { 200: { description: 'The member, their organization and the CSRF token of the session.', body: SessionBody, example: { member: EXAMPLE_MEMBER, organization: EXAMPLE_ORG, csrfToken: EXAMPLE_CSRF } } },
      handler: async ({ principal, metadata }) => {
        const { members } = await contacts.listMembers({ organizationId: principal.organization.id }, { metadata });
        const me = members.find((m) => m.id === principal.member.id);
        return { body: { member: me ? memberJson(me) : { ...principal.member, role: principal.member.role as z.infer<typeof Role>, createdAt: '' }, organization: organizationJson(principal.organization), csrfToken: principal.csrfToken } };
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/session', operationId: 'signOut', summary: 'Sign out', tags: ['session'], auth: 'visitor',
      description: 'Ends the session of the cookie, if any, and clears the cookie. Any role may sign out.',
      responses: { 204: { description: 'Signed out.' } },
      handler: async ({ principal, metadata }) => {
        if (principal.sessionToken) await contacts.endSession({ sessionToken: principal.sessionToken }, { metadata });
        return { headers: { 'set-cookie': sessionCookie('', { secure: principal.secure, maxAgeSeconds: 0 }) } };
      },
    }),
    defineRoute({
      method: 'POST', path: '/invitations/accept', operationId: 'acceptInvitation', summary: 'Accept an invitation', tags: ['session'], auth: 'visitor',
      description: 'The invited person sets their name and password; they are then signed in (the cookie is set). An invitation is used once.',
      request: { body: z.strictObject({ token: z.string().min(1).max(200), name: z.string().max(200), password: Password.meta({ description: 'At least 10 characters.' }) }) },
      responses: { 201: { description: 'A member now, and signed in.', body: SignedIn, example: { member: EXAMPLE_MEMBER, csrfToken: EXAMPLE_CSRF } } },
      errors: [INVALID_INVITATION, MEMBER_EXISTS, TOKEN_GUESSES],
      example: { body: { token: 'inv_8s0dKq2LmZ7xV3cN1pR4tY6wB9hJ5fG2aE0uQ7kT3oS', name: 'Anna', password: 'correct horse battery staple' } },
      handler: async ({ body, principal, metadata }) => {
        const opened = await withLinkToken(tokenFailures, principal.ip, () => contacts.acceptInvitation(body, { metadata }));
        return {
          headers: { 'set-cookie': sessionCookie(opened.sessionToken, { secure: principal.secure, maxAgeSeconds: SESSION_MAX_AGE_SECONDS }) },
          body: { member: memberJson(opened.member!), csrfToken: opened.session!.csrfToken },
        };
      },
    }),
    defineRoute({
      method: 'POST', path: '/password-reset', operationId: 'resetPassword', summary: 'Set a new password with a reset link', tags: ['session'], auth: 'visitor',
      description: "Sets the member's new password from a one-time reset link, ends every session of theirs and signs them in (the cookie is set).",
      request: { body: z.strictObject({ token: z.string().min(1).max(200), password: Password.meta({ description: 'At least 10 characters.' }) }) },
      responses: { 200: { description: 'The new password is set; signed in.', body: SignedIn, example: { member: EXAMPLE_MEMBER, csrfToken: EXAMPLE_CSRF } } },
      errors: [INVALID_RESET_TOKEN, TOKEN_GUESSES],
      example: { body: { token: 'rst_8s0dKq2LmZ7xV3cN1pR4tY6wB9hJ5fG2aE0uQ7kT3oS', password: 'correct horse battery staple' } },
      handler: async ({ body, principal, metadata }) => {
        const opened = await withLinkToken(tokenFailures, principal.ip, () => contacts.completePasswordReset(body, { metadata }));
        return {
          headers: { 'set-cookie': sessionCookie(opened.sessionToken, { secure: principal.secure, maxAgeSeconds: SESSION_MAX_AGE_SECONDS }) },
          body: { member: memberJson(opened.member!), csrfToken: opened.session!.csrfToken },
        };
      },
    }),
    defineRoute({
      method: 'GET', path: '/members', operationId: 'listMembers', summary: "The organization's people", tags: ['members'], auth: 'session',
      responses: { 200: { description: 'Oldest first.', body: z.object({ members: z.array(Member) }), example: { members: [EXAMPLE_MEMBER] } } },
      handler: async ({ principal, metadata }) => ({ body: { members: (await contacts.listMembers({ organizationId: principal.organization.id }, { metadata })).members.map(memberJson) } }),
    }),

    defineRoute({
      method: 'POST', path: '/members/invitations', operationId: 'inviteMember', summary: 'Invite a person', tags: ['members'], auth: 'session',
      description:
        "An owner invites a person into the organization with a role. The link the person opens is emailed to them (`emailed`: queued for the email channel) and never answered: only the person, in their mailbox, gets it (it works for 7 days). The answer is the same whether or not the email already signs in to another organization (that person learns it on accepting); only a member of this organization is 409. An `Idempotency-Key` makes a repeat answer the first invitation (its email sent once).",
      request: { body: z.strictObject({ email: z.string().min(3).max(254), role: Role }) },
      responses: { 201: { description: 'The invitation.', body: z.object({ invitation: Invitation, emailed: z.boolean().meta({ description: 'false: the email could not be queued now; repeat the request with the same Idempotency-Key, or revoke the invitation and invite again.' }) }), example: { invitation: { id: '0190e0e0-aaaa-7000-8000-00000000000a', email: 'anna@example.com', role: 'admin', expiresAt: '2026-05-08T09:00:00.000Z', createdAt: '2026-05-01T09:00:00.000Z' }, emailed: true } } },
      errors: [OWNER_ONLY, { ...MEMBER_EXISTS, description: 'This email is already a member of the organization; nothing is created.' }],
      example: { body: { email: 'anna@example.com', role: 'admin' } },
      handler: async ({ body, principal, metadata }) => {
        if (principal.member.role !== 'owner') throw new ForbiddenError('owner_only', "only the organization's owners manage its people");
        const r = await contacts.inviteMember({ organizationId: principal.organization.id, email: body.email, role: body.role, invitedBy: principal.member.id }, { metadata });
        // A replay queues the same email again: it carries the invitation's id, so it is sent once.
        const emailed = await deps.systemEmails.invitation({ invitation: r.invitation!, token: r.token, organization: principal.organization });
        return { status: 201, body: { invitation: invitationJson(r.invitation!), emailed }, replayed: r.idempotentReplayed };
      },
    }),

    // Developer: API keys
    defineRoute({
      method: 'GET', path: '/api-keys', operationId: 'listApiKeys', summary: 'List API keys', tags: ['api-keys'], auth: 'session',
      description: 'Revoked keys included; only the prefix and the last 4 characters of each key are shown.',
      responses: { 200: { description: 'The keys.', body: z.object({ apiKeys: z.array(ApiKey) }), example: { apiKeys: [EXAMPLE_API_KEY] } } },
      handler: async ({ principal, metadata }) => ({ body: { apiKeys: (await contacts.listApiKeys({ organizationId: principal.organization.id }, { metadata })).apiKeys.map(apiKeyJson) } }),
    }),
    defineRoute({
      method: 'POST', path: '/api-keys', operationId: 'issueApiKey', summary: 'Issue an API key', tags: ['api-keys'], auth: 'session',
      description: 'The key (`secret`) is in this response only (and in a replay of its `Idempotency-Key`, which issues no other key). Without `scopes` the key gets every scope.',
      request: { body: z.strictObject({ name: z.string().max(200).optional(), scopes: z.array(Scope).min(1).max(SCOPES.length).optional() }) },
      responses: { 201: { description: 'The key and its secret.', body: z.object({ apiKey: ApiKey, secret: z.string() }), example: { apiKey: EXAMPLE_API_KEY, secret: 'rrs_live_3f9aT2kq8ZsVn4LrW0pYd6HcJmBx7Qe' } } },
      example: { body: { name: 'CRM', scopes: ['locations:read', 'cascades:write'] } },
      handler: async ({ body, principal, metadata }) => {
        const r = await contacts.issueApiKey({ organizationId: principal.organization.id, name: body.name ?? '', scopes: body.scopes ?? [], secret: '' }, { metadata });
        return { status: 201, body: { apiKey: apiKeyJson(r.apiKey!), secret: r.secret }, replayed: r.idempotentReplayed };
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/api-keys/{keyId}', operationId: 'revokeApiKey', summary: 'Revoke an API key', tags: ['api-keys'], auth: 'session',
      description: 'The key stops working within 5 seconds.',
      request: { params: z.object({ keyId: idOf(EXAMPLE_API_KEY.id) }) },
      responses: { 200: { description: 'The revoked key.', body: z.object({ apiKey: ApiKey }), example: { apiKey: { ...EXAMPLE_API_KEY, revokedAt: '2026-05-02T09:00:00.000Z' } } } },
      handler: async ({ params, principal, metadata }) => ({ body: { apiKey: apiKeyJson((await contacts.revokeApiKey({ organizationId: principal.organization.id, id: params.keyId }, { metadata })).apiKey!) } }),
    }),

    // What a send names
    defineRoute({
      method: 'GET', path: '/locations', operationId: 'listLocations', summary: 'List locations', tags: ['locations'], auth: 'session',
      responses: { 200: { description: 'The live locations.', body: z.object({ locations: z.array(Location) }), example: { locations: [EXAMPLE_LOCATION] } } },
      handler: async ({ principal, metadata }) => ({ body: { locations: (await contacts.listLocations({ organizationId: principal.organization.id }, { metadata })).locations.map(locationJson) } }),
    }),
    defineRoute({
      method: 'GET', path: '/flows', operationId: 'listFlows', summary: 'List flows', tags: ['flows'], auth: 'session',
      responses: { 200: { description: 'The flows, the default first.', body: z.object({ flows: z.array(Flow) }), example: { flows: [EXAMPLE_FLOW] } } },
      handler: async ({ principal, metadata }) => ({ body: { flows: (await scheduler.listFlows({ organizationId: principal.organization.id }, { metadata })).flows.map(flowJson) } }),
    }),

    // Overview
    defineRoute({
      method: 'GET', path: '/overview', operationId: 'getOverview', summary: 'The funnel and the ratings over a date range', tags: ['overview'], auth: 'session',
      description:
        "Over the review requests made from `from` to `to` (days, both included, in the organization's time zone; default the last 30 days, at most 366): how many had a step sent, delivered, the form opened, rated, the public review links shown and one of them clicked, in all and by location; steps by the channel that carried them, and requests opened, rated and clicked by the channel of the last step sent before that event; the ratings' distribution, average and average by day.",
      request: {
        query: z.object({
          from: z.string().regex(/^\d{4}-\d{2}-\d{2}$/).optional().meta({ description: 'First day, YYYY-MM-DD (default 29 days before `to`).' }),
          to: z.string().regex(/^\d{4}-\d{2}-\d{2}$/).optional().meta({ description: 'Last day, YYYY-MM-DD (default today).' }),
        }),
      },
      responses: {
        200: {
          description: 'The overview.',
          body: z.object({
            from: z.string(), to: z.string(),
            total: FunnelCounts,
            byLocation: z.array(z.object({ locationId: z.string(), counts: FunnelCounts })),
            kpis: z.object({
              requests: z.number().int(),
              responseRate: z.number().nullable().meta({ description: 'Rated ÷ requests (0 to 1); null without requests.' }),
              averageRating: z.number().nullable(),
              openItems: z.number().int().meta({ description: 'Now, whatever the range: low ratings and feedback not resolved.' }),
              overdueItems: z.number().int().meta({ description: 'Now: open items past their response target.' }),
            }),
            byChannel: z.array(z.object({
              channel: z.string(), sent: z.number().int().meta({ description: 'Steps sent through the channel.' }),
              delivered: z.number().int().nullable().meta({ description: 'null ("not reported"): the channel\'s sender reports no deliveries (no `delivery_receipts` capability).' }),
              receipts: z.boolean().meta({ description: 'The channel reports deliveries.' }),
              opened: z.number().int().meta({ description: 'Requests whose form was opened after a step of this channel was their last one sent.' }),
              rated: z.number().int().meta({ description: 'Requests rated after a step of this channel was their last one sent.' }),
              clicked: z.number().int().meta({ description: 'Requests whose first public link click came after a step of this channel was their last one sent.' }),
            })),
            ratings: z.object({
              counts: z.array(z.number().int()).meta({ description: 'How many ratings of 1, 2, 3, 4 and 5, in that order.' }),
              average: z.number().nullable(),
              byDay: z.array(z.object({ day: z.string(), ratings: z.number().int(), average: z.number() })),
            }),
          }),
          example: {
            from: '2026-04-02', to: '2026-05-01',
            total: { requests: 120, sent: 118, delivered: 110, opened: 64, rated: 41, publicLinksShown: 41, publicLinkClicked: 17 },
            kpis: { requests: 120, responseRate: 0.34, averageRating: 4.34, openItems: 3, overdueItems: 1 },
            byLocation: [{ locationId: EXAMPLE_IDS.location, counts: { requests: 120, sent: 118, delivered: 110, opened: 64, rated: 41, publicLinksShown: 41, publicLinkClicked: 17 } }],
            byChannel: [{ channel: 'EMAIL', sent: 118, delivered: 110, receipts: true, opened: 50, rated: 30, clicked: 12 }, { channel: 'SMS', sent: 40, delivered: 39, receipts: true, opened: 14, rated: 11, clicked: 5 }],
            ratings: { counts: [2, 1, 3, 10, 25], average: 4.34, byDay: [{ day: '2026-05-01', ratings: 3, average: 4.67 }] },
          },
        },
      },
      example: { query: { from: '2026-04-02', to: '2026-05-01' } },
      handler: async ({ query, principal, metadata }) => {
        const timeZone = principal.organization.timeZone || 'UTC';
        const to = query.to ?? new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());
        const from = query.from ?? new Date(Date.parse(`${to}T00:00:00Z`) - 29 * DAY_MS).toISOString().slice(0, 10);
        const r = await scheduler.getOverview({ organizationId: principal.organization.id, fromDay: from, toDay: to, timeZone }, { metadata });
        const rated = r.ratingCounts.reduce((a, b) => a + b, 0);
        const average = rated === 0 ? null : Math.round(r.ratingAverage * 100) / 100;
        // Deliveries are reported only by senders with receipts: a channel without them has no "delivered",
        // and a funnel over such a channel (or with fewer reported delivered than opened) shows none rather than one that rises.
        const withReceipts = new Set((deps.channelCatalog?.list() ?? []).filter((entry) => entry.capabilities.includes('delivery_receipts')).map((entry) => entry.key));
        const allReport = r.byChannel.every((c) => c.sent === 0 || withReceipts.has(c.channel));
        const funnel = (counts: schedulerV1.FunnelCounts) => ({ ...counts, delivered: allReport && counts.delivered >= counts.opened ? counts.delivered : null });
        return {
          body: {
            from, to,
            total: funnel(r.total!),
            kpis: { requests: r.total!.requests, responseRate: r.total!.requests === 0 ? null : Math.round((r.total!.rated / r.total!.requests) * 1000) / 1000, averageRating: average, openItems: r.openItems, overdueItems: r.overdueItems },
            byLocation: r.byLocation.map((l) => ({ locationId: l.locationId, counts: funnel(l.counts!) })),
            byChannel: r.byChannel.map((c) => ({ channel: c.channel, sent: c.sent, delivered: withReceipts.has(c.channel) ? c.delivered : null, receipts: withReceipts.has(c.channel), opened: c.opened, rated: c.rated, clicked: c.clicked })),
            ratings: { counts: r.ratingCounts, average, byDay: r.ratingDays.map((d) => ({ day: d.day, ratings: d.ratings, average: Math.round(d.average * 100) / 100 })) },
          },
        };
      },
    }),

    // Cascades
    defineRoute({
      method: 'GET', path: '/cascades', operationId: 'listCascades', summary: 'List cascades', tags: ['cascades'], auth: 'session',
      description: 'Newest first, one page at a time: pass `nextAfter` as `after` for the next page.',
      request: {
        query: z.object({
          externalId: z.string().max(200).optional().meta({ description: 'Only the cascades with this externalId (exact).' }),
          status: z.enum(CASCADE_STATUSES).optional(),
          locationId: z.string().max(64).optional().meta({ description: 'Only the cascades into this location.' }),
          ...SEARCH_DAYS,
          limit: z.coerce.number().int().min(1).max(100).optional().meta({ description: 'Page size, 1 to 100 (default 50).' }),
          after: z.string().max(64).optional().meta({ description: '`nextAfter` of the previous page.' }),
        }),
      },
      responses: {
        200: {
          description: 'One page of cascades.',
          body: z.object({
            cascades: z.array(z.object({
              id: z.string(), status: CascadeStatus, externalId: z.string().nullable(), name: z.string(), locationId: z.string(), flowId: z.string().nullable(), channel: z.string().nullable(),
              recipients: z.number().int(), skipped: z.number().int(), createdAt: z.string(), finishedAt: z.string().nullable(),
            })),
            nextAfter: z.string().nullable(),
          }),
          example: {
            cascades: [{ id: EXAMPLE_IDS.cascade, status: 'running', externalId: 'order-1042', name: '', locationId: EXAMPLE_IDS.location, flowId: EXAMPLE_IDS.flow, channel: null, recipients: 1, skipped: 0, createdAt: '2026-05-01T12:00:00.000Z', finishedAt: null }],
            nextAfter: null,
          },
        },
      },
      example: { query: { status: 'running', externalId: 'order-1042', locationId: EXAMPLE_IDS.location, from: '2026-04-01', to: '2026-05-01', limit: '50', after: EXAMPLE_IDS.cascade } },
      handler: async ({ query, principal, metadata }) => {
        const r = await scheduler.listCascades(
          {
            organizationId: principal.organization.id, externalId: query.externalId ?? '', status: query.status ?? '', limit: query.limit ?? 0, after: query.after ?? '',
            locationId: query.locationId ?? '', fromDay: query.from ?? '', toDay: query.to ?? '', timeZone: principal.organization.timeZone || 'UTC',
            createdFrom: undefined, createdTo: undefined, withCounts: false,
          },
          { metadata },
        );
        return {
          body: {
            cascades: r.cascades.map((c) => ({
              id: c.id, status: c.status as (typeof CASCADE_STATUSES)[number], externalId: c.externalId || null, name: c.name, locationId: c.locationId, flowId: c.flowId || null, channel: c.channel || null,
              recipients: c.recipients, skipped: c.skipped, createdAt: iso(c.createdAt), finishedAt: c.finishedAt ? c.finishedAt.toISOString() : null,
            })),
            nextAfter: r.nextAfter || null,
          },
        };
      },
    }),
    defineRoute({
      method: 'GET', path: '/cascades/{cascadeId}', operationId: 'getCascade', summary: 'A cascade with its recipients and steps', tags: ['cascades'], auth: 'session',
      request: { params: z.object({ cascadeId: idOf(EXAMPLE_IDS.cascade) }) },
      responses: {
        200: {
          description: 'The cascade, as GET /api/v1/cascades/{id} shows it, and when each recipient opened the review form (`openedAt`).',
          body: AccountCascade,
          example: { ...EXAMPLE_CASCADE, recipients: EXAMPLE_CASCADE.recipients.map((r, i) => ({ ...r, openedAt: i === 0 ? '2026-05-01T12:30:00.000Z' : null })) },
        },
      },
      handler: async ({ params, principal, metadata }) => {
        const cascade = (await scheduler.getCascade({ organizationId: principal.organization.id, id: params.cascadeId }, { metadata })).cascade!;
        const json = cascadeJson(cascade);
        return { body: { ...json, recipients: json.recipients.map((r, i) => ({ ...r, openedAt: cascade.recipients[i].openedAt?.toISOString() ?? null })) } };
      },
    }),
    defineRoute({
      method: 'POST', path: '/cascades/check', operationId: 'checkCascade', summary: 'Check a send by hand without sending', tags: ['cascades'], auth: 'session',
      dryRunOf: '/cascades',
      description:
        "Checks a body of POST /cascades as a start would (the scheduler's dry run: the recipients' addresses, the location, the flow, the sending rule, the organization's recipient budget as it is now) and answers without creating or sending anything, nor taking from the budget. With the `Idempotency-Key` of a send already made (the same body to POST /cascades), it answers 200 as that send's replay would, whatever the budget now. The console checks every part of a large CSV file with it, under the part's key, before it sends the first part.",
      request: { body: StartCascadeBody },
      responses: { 200: { description: 'Every recipient is right; nothing was sent.', body: z.object({ recipients: z.number().int() }), example: { recipients: 1 } } },
      errors: [...SENDING_ERRORS, 'channel_not_configured', 'recipient_quota_exceeded'],
      example: { body: { locationId: EXAMPLE_IDS.location, externalId: 'order-1042', recipients: [{ name: 'Anna', email: 'anna@example.com' }] } },
      handler: async ({ body, principal, metadata }) => {
        await startCascade(deps.clients, { ...body, organizationId: principal.organization.id, dryRun: true }, metadata);
        return { body: { recipients: body.recipients.length } };
      },
    }),
    defineRoute({
      method: 'POST', path: '/cascades', operationId: 'startCascade', summary: 'Send review requests by hand', tags: ['cascades'], auth: 'session',
      description:
        "The body and the rules of POST /api/v1/cascades: the sending rule (402/409), the plan's request quota (counted per organization), the organization's recipient budget (429 `recipient_quota_exceeded`, the same budget as the API's and the CRM connectors'), skips (opted out, cooldown, consent) and an optional `Idempotency-Key` (the console sends one per submitted form, so a double submit starts one cascade).",
      request: { body: StartCascadeBody },
      responses: { 202: { description: 'Accepted; the steps run in the background.', body: StartCascadeResponse, example: EXAMPLE_START_RESPONSE } },
      errors: [...SENDING_ERRORS, CONSOLE_QUOTA, 'recipient_quota_exceeded', 'channel_not_configured', 'invalid_idempotency_key', 'idempotency_key_reused', 'idempotency_key_in_use'],
      example: { body: { locationId: EXAMPLE_IDS.location, externalId: 'order-1042', recipients: [{ name: 'Anna', email: 'anna@example.com' }] } },
      handler: async ({ body, principal, metadata }) => {
        await consumeQuota(principal);
        const r = await startCascade(deps.clients, { ...body, organizationId: principal.organization.id }, metadata);
        return { body: startCascadeJson(r), replayed: r.idempotentReplayed, recipientBudget: r.recipientBudget };
      },
    }),
  ];
}
