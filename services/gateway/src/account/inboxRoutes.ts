import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import {
  ALERT_EMAIL_CHOICES, BOT_CHANNELS, botDeepLink, defaultAlertChoice, MAX_NOTE_LENGTH, MAX_REPLY_LENGTH, MAX_REPLY_SUBJECT_LENGTH, MAX_RESPONSE_TARGET_MINUTES,
  RATING_ACTIONS, RATING_HISTORY_KINDS, RATING_STATUS_FILTERS, RATING_STATUSES, type schedulerV1,
} from '@rrs/proto';
import { ConflictError, NotFoundError } from '@rrs/runtime';
import { idOf } from '../admin/routes';
import type { ChannelCatalogSource } from '../catalog/channelCatalog';
import type { GatewayClients } from '../clients';
import type { RouteError } from '../http/errorCodes';
import { defineRoute, type Route } from '../http/route';
import { EXAMPLE_IDS } from '../routes/shapes';
import { EXAMPLE_MEMBER, SEARCH_DAYS } from './routes';

/*
 * The ratings inbox as a workflow, rating alerts and staff chats, and stopping a cascade, for the
 * session's organization (docs/console.md, "The ratings inbox", "Rating alerts"). Transport only: the
 * scheduler owns the workflow, the alerts and their settings (RPCs GetRating … UnlinkStaffChat); the
 * session gate lets every member read and only owners and admins change (403 `read_only_role`).
 */

export interface InboxRouteDeps {
  clients: GatewayClients;
  /** The live channel catalog: which official bots can take a staff chat. */
  channelCatalog?: ChannelCatalogSource;
}

const RatingStatus = z.enum(RATING_STATUSES);
export const RatingJson = z.object({
  reviewRequestId: z.string(), rating: z.number().int(), feedback: z.string().nullable(), ratedAt: z.string(), customerName: z.string().nullable(), contact: z.string().nullable(),
  locationId: z.string(), cascadeId: z.string().nullable(), externalId: z.string().nullable(),
  handledAt: z.string().nullable().meta({ description: 'When it was resolved (marked handled); null while open.' }),
  handledBy: z.string().nullable().meta({ description: 'The id of the member who resolved it.' }),
  status: RatingStatus.meta({ description: '`new`, `in_progress` (a member has it) or `resolved`.' }),
  assignedTo: z.string().nullable().meta({ description: 'The id of the member working on it.' }),
  actionable: z.boolean().meta({ description: 'A low rating (at or under the alert threshold) or one with private feedback: an item of the workflow with a response target.' }),
  respondBy: z.string().nullable().meta({ description: "When the response target falls (the organization's target, counted in its working hours)." }),
  overdue: z.boolean().meta({ description: 'Not resolved and past `respondBy`.' }),
  resolutionNote: z.string().nullable(),
}).meta({ id: 'RatingEntry' });
const EXAMPLE_RATING = {
  reviewRequestId: EXAMPLE_IDS.reviewRequest, rating: 2, feedback: 'The coffee was cold.', ratedAt: '2026-05-01T13:00:00.000Z', customerName: 'Anna', contact: 'anna@example.com',
  locationId: EXAMPLE_IDS.location, cascadeId: EXAMPLE_IDS.cascade, externalId: 'order-1042', handledAt: null, handledBy: null,
  status: 'in_progress', assignedTo: EXAMPLE_MEMBER.id, actionable: true, respondBy: '2026-05-01T15:00:00.000Z', overdue: false, resolutionNote: null,
};
export const ratingJson = (x: schedulerV1.RatingEntry): z.infer<typeof RatingJson> => ({
  reviewRequestId: x.reviewRequestId, rating: x.rating, feedback: x.feedback || null, ratedAt: x.ratedAt ? x.ratedAt.toISOString() : '', customerName: x.customerName || null, contact: x.contact || null,
  locationId: x.locationId, cascadeId: x.cascadeId || null, externalId: x.externalId || null, handledAt: x.handledAt ? x.handledAt.toISOString() : null, handledBy: x.handledBy || null,
  status: (RATING_STATUSES as readonly string[]).includes(x.status) ? (x.status as z.infer<typeof RatingStatus>) : 'new', assignedTo: x.assignedTo || null, actionable: x.actionable,
  respondBy: x.respondBy ? x.respondBy.toISOString() : null, overdue: x.overdue, resolutionNote: x.resolutionNote || null,
});
const RatingAnswer = z.object({ rating: RatingJson });
const HistoryEntry = z.object({
  at: z.string(),
  memberId: z.string().nullable().meta({ description: 'Who; null for the service (feedback received, alerts sent).' }),
  kind: z.enum(RATING_HISTORY_KINDS),
  text: z.string().nullable().meta({ description: 'The feedback, a note, a resolution note or a reply.' }),
  target: z.string().nullable().meta({ description: '`assigned`: the member id; `replied`: the email address; `alerted`: `email:<address>` or `<CHANNEL>:<chat id>`.' }),
}).meta({ id: 'RatingHistoryEntry' });

const ReviewRequestParams = z.object({ reviewRequestId: idOf(EXAMPLE_IDS.reviewRequest) });
const Note = z.string().trim().min(1).max(MAX_NOTE_LENGTH);

const RATING_RESOLVED: RouteError = { status: 409, code: 'rating_resolved', description: 'The rating is resolved: reopen it first. Nothing changed.' };
const RATING_NOT_RESOLVED: RouteError = { status: 409, code: 'rating_not_resolved', description: 'Only a resolved rating is reopened. Nothing changed.' };
const NO_EMAIL: RouteError = { status: 409, code: 'customer_has_no_email', description: 'The customer left no email address: there is nowhere to reply. Nothing was sent.' };
const OPTED_OUT: RouteError = { status: 409, code: 'customer_opted_out', description: 'The customer opted out (the opt-out ledger covers every channel): nothing more is sent to them. Nothing was sent.' };
const BOT_NOT_CONFIGURED: RouteError = { status: 409, code: 'bot_not_configured', description: "The channel's official bot is not running: no chat can be linked through it." };

const WorkingHours = z.strictObject({
  start: z.string().meta({ description: 'HH:MM local.', examples: ['09:00'] }),
  end: z.string().meta({ description: 'HH:MM local; before `start` = crossing midnight.', examples: ['21:00'] }),
  days: z.array(z.number().int()).max(7).meta({ description: 'ISO weekdays, 1 (Monday) to 7; empty = every day.' }),
});
const AlertSettingsBody = z.strictObject({
  threshold: z.number().int().meta({ description: 'Ratings up to this (0 to 5) alert and are items of the workflow; 0 = only private feedback. Default 3.' }),
  locationThresholds: z.array(z.strictObject({ locationId: z.string().max(64), threshold: z.number().int() })).max(500).meta({ description: "Locations with a threshold of their own; the others use `threshold`. Replaces the list." }),
  responseTargetMinutes: z.number().int().meta({ description: `Minutes of working hours to respond to an item, 1 to ${MAX_RESPONSE_TARGET_MINUTES}. Default 120.` }),
  workingHours: WorkingHours.meta({ description: "The hours the target counts in, in the organization's time zone. Default 09:00–21:00 every day." }),
  replyTo: z.string().max(254).meta({ description: "Reply-To of the replies to customers; empty = the replying member's email." }),
});
const MemberAlerts = z.object({
  memberId: z.string(), name: z.string(), email: z.string(), role: z.string(),
  alerts: z.enum(ALERT_EMAIL_CHOICES).meta({ description: '`instant`: each alert by email; `digest`: one email each local morning about the day before; `off`.' }),
  chosen: z.boolean().meta({ description: "false: the role's default (owners and admins `instant`, viewers `off`)." }),
});
const StaffChatJson = z.object({ channel: z.enum(BOT_CHANNELS), chatId: z.string(), linkedBy: z.string(), linkedAt: z.string() });
const AlertsAnswer = z.object({
  settings: AlertSettingsBody.extend({ workingHours: WorkingHours }),
  members: z.array(MemberAlerts),
  chats: z.array(StaffChatJson),
  bots: z.array(z.enum(BOT_CHANNELS)).meta({ description: 'The official bots running now: a staff chat can be linked through these.' }),
}).meta({ id: 'AlertSettings' });
const EXAMPLE_ALERTS = {
  settings: { threshold: 3, locationThresholds: [{ locationId: EXAMPLE_IDS.location, threshold: 4 }], responseTargetMinutes: 120, workingHours: { start: '09:00', end: '21:00', days: [] }, replyTo: 'care@example.com' },
  members: [{ memberId: EXAMPLE_MEMBER.id, name: 'Anna', email: 'owner@example.com', role: 'owner', alerts: 'instant', chosen: false }],
  chats: [{ channel: 'TELEGRAM', chatId: '4242', linkedBy: EXAMPLE_MEMBER.id, linkedAt: '2026-05-01T09:00:00.000Z' }],
  bots: ['TELEGRAM'],
};

/** The reply's id: the same Idempotency-Key (a double submit) names the same reply, which is sent once. */
function replyIdOf(organizationId: string, memberId: string, key: string | undefined): string {
  if (!key) return randomUUID();
  const hex = createHash('sha256').update(`${organizationId}\n${memberId}\n${key}`).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

export function inboxRoutes(deps: InboxRouteDeps): Route[] {
  const { contacts, scheduler } = deps.clients;
  const runningBots = () => (deps.channelCatalog?.list() ?? []).filter((entry) => entry.botLink && (BOT_CHANNELS as readonly string[]).includes(entry.key));

  const alertsOf = async (organizationId: string, metadata: Record<string, string>) => {
    const [{ settings }, { members }, { chats }] = await Promise.all([
      scheduler.getAlertSettings({ organizationId }, { metadata }),
      contacts.listMembers({ organizationId }, { metadata }),
      scheduler.listStaffChats({ organizationId }, { metadata }),
    ]);
    const s = settings!;
    const chosen = new Map(s.members.map((m) => [m.memberId, m.email]));
    return {
      settings: {
        threshold: s.threshold, locationThresholds: s.locationThresholds.map((l) => ({ locationId: l.locationId, threshold: l.threshold })), responseTargetMinutes: s.responseTargetMinutes,
        workingHours: { start: s.workStart, end: s.workEnd, days: s.workDays }, replyTo: s.replyTo,
      },
      members: members.map((m) => ({
        memberId: m.id, name: m.name, email: m.email, role: m.role, alerts: (chosen.get(m.id) ?? defaultAlertChoice(m.role)) as (typeof ALERT_EMAIL_CHOICES)[number], chosen: chosen.has(m.id),
      })),
      chats: chats.map((c) => ({ channel: c.channel as (typeof BOT_CHANNELS)[number], chatId: c.chatId, linkedBy: c.linkedBy, linkedAt: c.linkedAt ? c.linkedAt.toISOString() : '' })),
      bots: runningBots().map((entry) => entry.key as (typeof BOT_CHANNELS)[number]),
    };
  };

  const action = (options: { method: 'PUT' | 'DELETE' | 'POST'; path: string; operationId: string; summary: string; description: string; body?: z.ZodType; errors?: RouteError[]; example?: unknown; request: (body: any) => { action: (typeof RATING_ACTIONS)[number]; assigneeId?: string; note?: string } }) =>
    defineRoute({
      method: options.method, path: options.path, operationId: options.operationId, summary: options.summary, tags: ['ratings'], auth: 'session', description: options.description,
      request: { params: ReviewRequestParams, ...(options.body ? { body: options.body } : {}) },
      responses: { 200: { description: 'The rating as the inbox shows it now.', body: RatingAnswer, example: { rating: EXAMPLE_RATING } } },
      errors: options.errors ?? [],
      ...(options.example ? { example: { body: options.example } } : {}),
      handler: async ({ params, body, principal, metadata }) => {
        const change = options.request(body);
        const r = await scheduler.updateRating(
          { organizationId: principal.organization.id, reviewRequestId: params.reviewRequestId, memberId: principal.member.id, action: change.action, assigneeId: change.assigneeId ?? '', note: change.note ?? '' },
          { metadata },
        );
        return { body: { rating: ratingJson(r.rating!) } };
      },
    });

  return [
    defineRoute({
      method: 'GET', path: '/ratings', operationId: 'listRatings', summary: 'The ratings inbox', tags: ['ratings'], auth: 'session',
      description: 'Ratings with the private feedback left with them and their place in the workflow, newest first, one page at a time: pass `nextAfter` as `after` for the next page.',
      request: {
        query: z.object({
          maxRating: z.coerce.number().int().min(1).max(5).optional().meta({ description: 'Only ratings up to this value, e.g. 3 for the low ones.' }),
          withFeedback: z.enum(['true', 'false']).optional().meta({ description: '`true`: only ratings that came with private feedback.' }),
          locationId: z.string().max(64).optional(),
          handled: z.enum(['handled', 'unhandled']).optional().meta({ description: '`handled`: only resolved ratings; `unhandled`: only the others.' }),
          status: z.enum(RATING_STATUS_FILTERS).optional().meta({ description: '`new`, `in_progress`, `resolved`; `open`: items (low or with feedback) not resolved; `overdue`: open items past their target.' }),
          assignedTo: z.string().max(64).optional().meta({ description: 'Only the ratings this member is working on.' }),
          ...SEARCH_DAYS,
          limit: z.coerce.number().int().min(1).max(100).optional().meta({ description: 'Page size, 1 to 100 (default 50).' }),
          after: z.string().max(64).optional().meta({ description: '`nextAfter` of the previous page.' }),
        }),
      },
      responses: { 200: { description: 'One page of ratings.', body: z.object({ ratings: z.array(RatingJson), nextAfter: z.string().nullable() }), example: { ratings: [EXAMPLE_RATING], nextAfter: null } } },
      example: { query: { maxRating: '3', withFeedback: 'true', locationId: EXAMPLE_IDS.location, handled: 'unhandled', status: 'open', assignedTo: EXAMPLE_MEMBER.id, from: '2026-04-01', to: '2026-05-01', limit: '50', after: EXAMPLE_IDS.reviewRequest } },
      handler: async ({ query, principal, metadata }) => {
        const r = await scheduler.listRatings(
          {
            organizationId: principal.organization.id, maxRating: query.maxRating ?? 0, withFeedback: query.withFeedback === 'true', locationId: query.locationId ?? '', limit: query.limit ?? 0, after: query.after ?? '',
            handled: query.handled ?? '', fromDay: query.from ?? '', toDay: query.to ?? '', timeZone: principal.organization.timeZone || 'UTC', status: query.status ?? '', assignedTo: query.assignedTo ?? '',
          },
          { metadata },
        );
        return { body: { ratings: r.ratings.map(ratingJson), nextAfter: r.nextAfter || null } };
      },
    }),
    defineRoute({
      method: 'GET', path: '/ratings/{reviewRequestId}', operationId: 'getRating', summary: 'A rating with its history', tags: ['ratings'], auth: 'session',
      description: 'The rating, every change of its life in the inbox (feedback received, alerts sent, assigned, notes, replies, resolved, reopened) with who and when, and whether a reply by email is possible.',
      request: { params: ReviewRequestParams },
      responses: {
        200: {
          description: 'The rating and its history, oldest first.',
          body: z.object({ rating: RatingJson, history: z.array(HistoryEntry), canReply: z.boolean(), replyRefusal: z.enum(['customer_has_no_email', 'customer_opted_out']).nullable() }),
          example: { rating: EXAMPLE_RATING, history: [{ at: '2026-05-01T13:00:30.000Z', memberId: null, kind: 'alerted', text: null, target: 'email:owner@example.com' }], canReply: true, replyRefusal: null },
        },
      },
      handler: async ({ params, principal, metadata }) => {
        const r = await scheduler.getRating({ organizationId: principal.organization.id, reviewRequestId: params.reviewRequestId }, { metadata });
        return {
          body: {
            rating: ratingJson(r.rating!),
            history: r.history.map((h) => ({ at: h.at ? h.at.toISOString() : '', memberId: h.memberId || null, kind: h.kind as (typeof RATING_HISTORY_KINDS)[number], text: h.text || null, target: h.target || null })),
            canReply: r.canReply,
            replyRefusal: (r.replyRefusal || null) as 'customer_has_no_email' | 'customer_opted_out' | null,
          },
        };
      },
    }),
    ...[true, false].map((handled) =>
      defineRoute({
        method: handled ? 'PUT' : 'DELETE', path: '/ratings/{reviewRequestId}/handled', operationId: handled ? 'markRatingHandled' : 'clearRatingHandled',
        summary: handled ? 'Mark a rating handled' : "Clear a rating's handled mark", tags: ['ratings'], auth: 'session',
        description: handled
          ? 'Owners and admins mark a rating handled (resolved, without a note; a viewer: 403 `read_only_role`). Marking it again keeps the first mark (its time and member).'
          : 'Owners and admins clear the mark (reopened; a viewer: 403 `read_only_role`); clearing an unmarked rating changes nothing.',
        request: { params: ReviewRequestParams },
        responses: { 200: { description: 'The rating as the inbox shows it now.', body: RatingAnswer, example: { rating: handled ? { ...EXAMPLE_RATING, status: 'resolved', handledAt: '2026-05-01T14:00:00.000Z', handledBy: EXAMPLE_MEMBER.id } : EXAMPLE_RATING } } },
        handler: async ({ params, principal, metadata }) => {
          const r = await scheduler.setRatingHandled({ organizationId: principal.organization.id, reviewRequestId: params.reviewRequestId, handled, memberId: principal.member.id }, { metadata });
          return { body: { rating: ratingJson(r.rating!) } };
        },
      }),
    ),
    action({
      method: 'PUT', path: '/ratings/{reviewRequestId}/assignee', operationId: 'assignRating', summary: 'Assign a rating to a member',
      description: 'Owners and admins give the rating to a member of the organization (in progress). A resolved rating is reopened first (409 `rating_resolved`).',
      body: z.strictObject({ memberId: z.string().min(1).max(64) }), errors: [RATING_RESOLVED], example: { memberId: EXAMPLE_MEMBER.id },
      request: (body: { memberId: string }) => ({ action: 'assign', assigneeId: body.memberId }),
    }),
    action({
      method: 'DELETE', path: '/ratings/{reviewRequestId}/assignee', operationId: 'unassignRating', summary: "Take a rating back from its member",
      description: 'Back to `new`.', errors: [RATING_RESOLVED], request: () => ({ action: 'unassign' }),
    }),
    action({
      method: 'POST', path: '/ratings/{reviewRequestId}/resolve', operationId: 'resolveRating', summary: 'Resolve a rating with a note',
      description: 'What was done, in a note (1 to 2 000 characters).', body: z.strictObject({ note: Note }), errors: [RATING_RESOLVED], example: { note: 'Called the customer, apologised, offered a free coffee.' },
      request: (body: { note: string }) => ({ action: 'resolve', note: body.note }),
    }),
    action({
      method: 'POST', path: '/ratings/{reviewRequestId}/reopen', operationId: 'reopenRating', summary: 'Reopen a resolved rating',
      description: 'Back to `new` (or `in_progress` when it still has its member).', errors: [RATING_NOT_RESOLVED], request: () => ({ action: 'reopen' }),
    }),
    action({
      method: 'POST', path: '/ratings/{reviewRequestId}/notes', operationId: 'addRatingNote', summary: 'Add a note to a rating',
      description: 'A note in the history (1 to 2 000 characters).', body: z.strictObject({ note: Note }), example: { note: 'Asked the shift manager what happened.' },
      request: (body: { note: string }) => ({ action: 'note', note: body.note }),
    }),
    defineRoute({
      method: 'POST', path: '/ratings/{reviewRequestId}/replies', operationId: 'replyToRating', summary: 'Reply to the customer by email', tags: ['ratings'], auth: 'session',
      description:
        "Owners and admins write to the customer: sent by email through the email channel from the service's address with the organization's Reply-To (else the member's email), and shown in the history. Refused when the customer left no email or opted out (nothing sent). The same `Idempotency-Key` sends one reply.",
      request: { params: ReviewRequestParams, body: z.strictObject({ subject: z.string().max(MAX_REPLY_SUBJECT_LENGTH).optional(), text: z.string().trim().min(1).max(MAX_REPLY_LENGTH) }) },
      responses: {
        202: { description: 'Queued for the email channel.', body: z.object({ to: z.string(), sent: z.boolean().meta({ description: 'false: this reply (its Idempotency-Key) was already sent.' }), rating: RatingJson }), example: { to: 'anna@example.com', sent: true, rating: EXAMPLE_RATING } },
      },
      errors: [NO_EMAIL, OPTED_OUT],
      example: { body: { subject: 'About your visit', text: 'We are sorry about the cold coffee. The next one is on us.' } },
      handler: async ({ params, body, principal, metadata, idempotency }) => {
        const r = await scheduler.replyToRating(
          {
            organizationId: principal.organization.id, reviewRequestId: params.reviewRequestId, memberId: principal.member.id, memberEmail: principal.member.email,
            replyId: replyIdOf(principal.organization.id, principal.member.id, idempotency?.key), subject: body.subject ?? '', text: body.text,
          },
          { metadata },
        );
        return { body: { to: r.to, sent: r.sent, rating: ratingJson(r.rating!) } };
      },
    }),

    // Alerts
    defineRoute({
      method: 'GET', path: '/alerts', operationId: 'getAlerts', summary: 'Rating alerts: settings, who gets them, staff chats', tags: ['alerts'], auth: 'session',
      responses: { 200: { description: "The organization's alert settings, each member's choice, the linked staff chats and the bots running.", body: AlertsAnswer, example: EXAMPLE_ALERTS } },
      handler: async ({ principal, metadata }) => ({ body: await alertsOf(principal.organization.id, metadata) }),
    }),
    defineRoute({
      method: 'PUT', path: '/alerts/settings', operationId: 'setAlertSettings', summary: 'Set the alert threshold, the response target and working hours', tags: ['alerts'], auth: 'session',
      description: 'Owners and admins. Every problem is answered at once by pointer; nothing changes when one is wrong. A location must be the organization\'s.',
      request: { body: AlertSettingsBody },
      responses: { 200: { description: 'The alerts as they are now.', body: AlertsAnswer, example: EXAMPLE_ALERTS } },
      example: { body: EXAMPLE_ALERTS.settings },
      handler: async ({ body, principal, metadata }) => {
        await scheduler.setAlertSettings(
          {
            settings: {
              organizationId: principal.organization.id, threshold: body.threshold, locationThresholds: body.locationThresholds, responseTargetMinutes: body.responseTargetMinutes,
              workStart: body.workingHours.start, workEnd: body.workingHours.end, workDays: body.workingHours.days, replyTo: body.replyTo.trim(), members: [],
            },
          },
          { metadata },
        );
        return { body: await alertsOf(principal.organization.id, metadata) };
      },
    }),
    defineRoute({
      method: 'PUT', path: '/alerts/members/{memberId}', operationId: 'setMemberAlerts', summary: "Choose a member's email alerts", tags: ['alerts'], auth: 'session',
      description: 'Owners and admins choose who gets alerts by email: `instant`, `digest` (each local morning, about the day before) or `off`.',
      request: { params: z.object({ memberId: z.string().min(1).max(64).meta({ examples: [EXAMPLE_MEMBER.id] }) }), body: z.strictObject({ alerts: z.enum(ALERT_EMAIL_CHOICES) }) },
      responses: { 200: { description: 'The alerts as they are now.', body: AlertsAnswer, example: EXAMPLE_ALERTS } },
      example: { body: { alerts: 'digest' } },
      handler: async ({ params, body, principal, metadata }) => {
        const members = (await contacts.listMembers({ organizationId: principal.organization.id }, { metadata })).members;
        if (!members.some((m) => m.id === params.memberId)) throw new NotFoundError('member');
        await scheduler.setMemberAlerts({ organizationId: principal.organization.id, memberId: params.memberId, email: body.alerts }, { metadata });
        return { body: await alertsOf(principal.organization.id, metadata) };
      },
    }),
    defineRoute({
      method: 'POST', path: '/alerts/chats', operationId: 'linkStaffChat', summary: 'Link a staff chat to the alerts', tags: ['alerts'], auth: 'session',
      description:
        "Owners and admins get the official bot's deep link with a one-time code (7 days): opening it in Telegram or MAX and pressing Start links that chat, which then gets every rating alert. `/stop` in the chat, or unlinking here, ends it.",
      request: { body: z.strictObject({ channel: z.enum(BOT_CHANNELS) }) },
      responses: { 201: { description: 'The deep link to open in the messenger.', body: z.object({ channel: z.enum(BOT_CHANNELS), link: z.string(), expiresAt: z.string() }), example: { channel: 'TELEGRAM', link: 'https://t.me/reviews_bot?start=Qm3xY7cP0aLk2sV9dN4fR8', expiresAt: '2026-05-08T09:00:00.000Z' } } },
      errors: [BOT_NOT_CONFIGURED],
      example: { body: { channel: 'TELEGRAM' } },
      handler: async ({ body, principal, metadata }) => {
        const bot = runningBots().find((entry) => entry.key === body.channel);
        if (!bot) throw new ConflictError('bot_not_configured', `the ${body.channel} bot is not running: no chat can be linked through it`);
        const { code } = await scheduler.createStaffLinkCode({ organizationId: principal.organization.id, channel: body.channel, memberId: principal.member.id }, { metadata });
        return { body: { channel: body.channel, link: botDeepLink(bot.botLink!, code!.code), expiresAt: code!.expiresAt ? code!.expiresAt.toISOString() : '' } };
      },
    }),
    defineRoute({
      method: 'DELETE', path: '/alerts/chats/{channel}/{chatId}', operationId: 'unlinkStaffChat', summary: 'Unlink a staff chat', tags: ['alerts'], auth: 'session',
      request: { params: z.object({ channel: z.enum(BOT_CHANNELS).meta({ examples: ['TELEGRAM'] }), chatId: z.string().min(1).max(64).meta({ examples: ['4242'] }) }) },
      responses: { 204: { description: 'The chat gets no more alerts.' } },
      handler: async ({ params, principal, metadata }) => {
        const { unlinked } = await scheduler.unlinkStaffChat({ organizationId: principal.organization.id, channel: params.channel, chatId: params.chatId }, { metadata });
        if (unlinked === 0) throw new NotFoundError('staff chat');
        return {};
      },
    }),

    // Stopping a cascade
    defineRoute({
      method: 'POST', path: '/cascades/{cascadeId}/cancel', operationId: 'cancelCascade', summary: 'Stop a cascade', tags: ['cascades'], auth: 'session',
      description: 'Owners and admins stop a cascade: every recipient still running finishes `canceled` and nothing more is sent to them (a step already on its way may still arrive). Stopping it again cancels nothing more.',
      request: { params: z.object({ cascadeId: idOf(EXAMPLE_IDS.cascade) }) },
      responses: { 200: { description: 'How many recipients were stopped.', body: z.object({ canceled: z.number().int() }), example: { canceled: 1 } } },
      handler: async ({ params, principal, metadata }) => ({ body: { canceled: (await scheduler.cancelCascade({ organizationId: principal.organization.id, id: params.cascadeId }, { metadata })).canceled } }),
    }),
  ];
}
