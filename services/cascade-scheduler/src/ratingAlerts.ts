import {
  addWorkingMinutes, defaultAlertChoice, STAFF_CHAT_SUBJECT, staffChatBusV1, staffChatMsgId, SYSTEM_EMAIL_SUBJECT, systemEmailBusV1, systemEmailMsgId, type AlertEmailChoice,
} from '@rrs/proto';
import { counter, inTransaction, startDueWorkLoop, type Bus, type Logger, type Notifier, type Pool, type PoolClient } from '@rrs/runtime';
import { inboxSettingsOf } from './alertSettings';
import type { MemberInfo, OrganizationProfiles, SendingProfile } from './organizationProfiles';
import { ALERT_CHANNEL } from './ratingItems';

const alertsSent = counter({ name: 'scheduler_rating_alerts_total', help: 'Rating alerts sent, by where they went.', labelNames: ['to'] });

export interface RatingAlertOptions {
  pool: Pool;
  bus: Bus;
  notifier: Notifier;
  logger: Logger;
  profiles: OrganizationProfiles;
  /** Where the console is: an alert links to the rating in the inbox. */
  publicBaseUrl: string;
  batchSize?: number;
}

/** The console page of a rating in the inbox. */
export const inboxLinkOf = (publicBaseUrl: string, reviewRequestId: string) => `${publicBaseUrl}/app/#/ratings/${reviewRequestId}`;

/** Who gets an organization's alerts now: the members whose choice (or role's default) is `instant`, and the linked staff chats. */
export interface Audience {
  profile: SendingProfile;
  members: MemberInfo[];
  choices: Map<string, AlertEmailChoice>;
  chats: Array<{ channel: string; chat_id: string }>;
}

export async function audienceOf(client: PoolClient, profiles: OrganizationProfiles, organizationId: string): Promise<Audience> {
  const [profile, members, choices, chats] = await Promise.all([
    profiles.getSendingProfile(organizationId),
    profiles.listMembers(organizationId),
    client.query<{ member_id: string; email: AlertEmailChoice }>('SELECT member_id, email FROM member_alerts WHERE organization_id = $1', [organizationId]),
    client.query<{ channel: string; chat_id: string }>('SELECT channel, chat_id FROM staff_chats WHERE organization_id = $1 AND unlinked_at IS NULL ORDER BY linked_at', [organizationId]),
  ]);
  return { profile, members, choices: new Map(choices.rows.map((r) => [r.member_id, r.email])), chats: chats.rows };
}

export const choiceOf = (audience: Audience, member: MemberInfo): AlertEmailChoice => audience.choices.get(member.id) ?? defaultAlertChoice(member.role);

interface DueAlert {
  id: string;
  kind: 'rating' | 'feedback';
  review_request_id: string;
  organization_id: string;
  rating: number;
  rated_at: Date;
  actionable_at: Date | null;
  respond_by: Date | null;
  feedback: string | null;
  customer_name: string;
  location_name: string | null;
}

/**
 * Sends the rating alerts that came due (docs/console.md, "Rating alerts"): each to the members who
 * want them by email (SystemEmail `rating_alert` on `steps.system.email`) and to the linked staff chats
 * (StaffChatMessage on `steps.system.bot`), never to the customer. An alert is claimed (SKIP LOCKED, so
 * replicas share the work), published, marked sent with where it went, and logged in the rating's
 * history, in one transaction; a crash after publishing republishes the same ids, which the bus and the
 * senders' send logs drop: an alert reaches each person or chat once. The alert also fixes the item's
 * response target, counted in the organization's working hours and time zone.
 */
export function startRatingAlerts(options: RatingAlertOptions): { stop(): Promise<void> } {
  const batchSize = options.batchSize ?? 100;
  const loop = startDueWorkLoop({
    name: 'rating alerts',
    logger: options.logger,
    notifier: options.notifier,
    channels: [ALERT_CHANNEL],
    nextDueInMs: async () => {
      const { rows } = await options.pool.query<{ ms: number | null }>(`SELECT (EXTRACT(EPOCH FROM min(due_at) - clock_timestamp()) * 1000)::float8 AS ms FROM rating_alerts WHERE sent_at IS NULL`);
      return rows[0].ms;
    },
    round: () =>
      inTransaction(options.pool, async (client) => {
        const { rows } = await client.query<DueAlert>(
          `SELECT a.id, a.kind, a.review_request_id, a.organization_id, ra.rating, ra.created_at AS rated_at, ra.actionable_at, ra.respond_by, f.text AS feedback, rr.customer_name, ls.name AS location_name
             FROM rating_alerts a
             JOIN ratings ra ON ra.review_request_id = a.review_request_id
             JOIN review_requests rr ON rr.id = a.review_request_id
             LEFT JOIN feedback f ON f.review_request_id = a.review_request_id
             LEFT JOIN location_snapshots ls ON ls.organization_id = rr.organization_id AND ls.location_id = rr.location_id
            WHERE a.sent_at IS NULL AND a.due_at <= clock_timestamp()
            ORDER BY a.due_at LIMIT $1 FOR UPDATE OF a SKIP LOCKED`,
          [batchSize],
        );
        const byOrganization = new Map<string, DueAlert[]>();
        for (const row of rows) byOrganization.set(row.organization_id, [...(byOrganization.get(row.organization_id) ?? []), row]);
        for (const [organizationId, alerts] of byOrganization) {
          const audience = await audienceOf(client, options.profiles, organizationId);
          const settings = await inboxSettingsOf(client, organizationId);
          for (const alert of alerts) await sendAlert(client, options, audience, settings, alert);
        }
        return rows.length === batchSize;
      }),
  });
  return { stop: () => loop.stop() };
}

async function sendAlert(client: PoolClient, options: RatingAlertOptions, audience: Audience, settings: Awaited<ReturnType<typeof inboxSettingsOf>>, alert: DueAlert): Promise<void> {
  const { organization } = audience.profile;
  const timeZone = organization.timeZone || 'UTC';
  const rated: systemEmailBusV1.AlertedRating = {
    rating: alert.rating, feedback: alert.feedback ?? '', customerName: alert.customer_name, locationName: alert.location_name ?? '', ratedAt: alert.rated_at,
    link: inboxLinkOf(options.publicBaseUrl, alert.review_request_id),
  };
  const sentTo: string[] = [];
  const publishing: Array<Promise<unknown>> = [];
  for (const member of audience.members) {
    if (choiceOf(audience, member) !== 'instant') continue;
    const id = `${alert.id}.${member.id}`;
    const email = systemEmailBusV1.SystemEmail.encode(systemEmailBusV1.SystemEmail.fromPartial({
      id, kind: 'rating_alert', to: member.email, locale: organization.locale, link: rated.link, organizationId: alert.organization_id, organizationName: organization.name,
      ratings: [rated], timeZone,
    })).finish();
    publishing.push(options.bus.publish(SYSTEM_EMAIL_SUBJECT, email, { msgId: systemEmailMsgId(id) }));
    sentTo.push(`email:${member.email}`);
  }
  for (const chat of audience.chats) {
    const id = `${alert.id}.${chat.channel}.${chat.chat_id}`;
    const message = staffChatBusV1.StaffChatMessage.encode({
      id, kind: 'rating_alert', channel: chat.channel, chatId: chat.chat_id, organizationId: alert.organization_id, organizationName: organization.name, locale: organization.locale, timeZone, ratings: [rated],
    }).finish();
    publishing.push(options.bus.publish(STAFF_CHAT_SUBJECT, message, { msgId: staffChatMsgId(id) }));
    sentTo.push(`${chat.channel}:${chat.chat_id}`);
  }
  await Promise.all(publishing);
  for (const target of sentTo) alertsSent.inc({ to: target.startsWith('email:') ? 'email' : target.split(':')[0] });
  const respondBy = alert.respond_by ?? addWorkingMinutes(alert.actionable_at ?? alert.rated_at, settings.responseTargetMinutes, settings.workingHours, timeZone);
  await client.query(
    `WITH sent AS (UPDATE rating_alerts SET sent_at = clock_timestamp(), sent_to = $2::jsonb WHERE id = $1 RETURNING sent_at),
          target AS (UPDATE ratings SET respond_by = coalesce(respond_by, $4) WHERE review_request_id = $3)
     INSERT INTO rating_history (review_request_id, organization_id, at, kind, target)
     SELECT $3, $5, sent.sent_at, 'alerted', t FROM sent, unnest($6::text[]) t`,
    [alert.id, JSON.stringify(sentTo), alert.review_request_id, respondBy, alert.organization_id, sentTo],
  );
}
