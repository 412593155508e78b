import { DIGEST_LOCAL_TIME, instantOfLocalDay, localDay, MAX_DIGEST_RATINGS, SYSTEM_EMAIL_SUBJECT, systemEmailBusV1, systemEmailMsgId } from '@rrs/proto';
import { counter, inTransaction, startDueWorkLoop, type Bus, type Logger, type Pool, type PoolClient } from '@rrs/runtime';
import { DAY_MS } from './dayRange';
import type { OrganizationProfiles } from './organizationProfiles';
import { audienceOf, choiceOf, inboxLinkOf } from './ratingAlerts';

const digestsSent = counter({ name: 'scheduler_rating_digests_total', help: 'Daily rating digests emailed.' });

export interface RatingDigestOptions {
  pool: Pool;
  bus: Bus;
  logger: Logger;
  profiles: OrganizationProfiles;
  publicBaseUrl: string;
  /** How often to look for digests due (default a minute); a digest goes at most this late. */
  intervalMs?: number;
  /** The clock (tests move it). */
  now?: () => Date;
}

/**
 * The daily digest (docs/console.md, "Rating alerts"): each member who chose `digest` gets, once the
 * organization's local time passes DIGEST_LOCAL_TIME, one email about the day before — its ratings,
 * average, the low ones and feedback, and the inbox's open and overdue items now. A digest is recorded
 * (organization, member, day) in the transaction that publishes it: one per member and day.
 */
export function startRatingDigests(options: RatingDigestOptions): { stop(): Promise<void>; runOnce(): Promise<boolean> } {
  const round = () =>
    inTransaction(options.pool, async (client) => {
      const { rows } = await client.query<{ organization_id: string }>(`SELECT DISTINCT organization_id FROM member_alerts WHERE email = 'digest' ORDER BY organization_id`);
      for (const row of rows) await digestsOf(client, options, row.organization_id);
      return false;
    });
  const loop = startDueWorkLoop({ name: 'rating digests', logger: options.logger, idleMs: options.intervalMs ?? 60_000, round });
  return { stop: () => loop.stop(), runOnce: round };
}

async function digestsOf(client: PoolClient, options: RatingDigestOptions, organizationId: string): Promise<void> {
  const audience = await audienceOf(client, options.profiles, organizationId);
  const timeZone = audience.profile.organization.timeZone || 'UTC';
  const now = options.now?.() ?? new Date();
  const today = localDay(now, timeZone);
  if (now < instantOfLocalDay(today, DIGEST_LOCAL_TIME, timeZone)) return;
  const day = new Date(Date.parse(`${today}T00:00:00Z`) - DAY_MS).toISOString().slice(0, 10);
  const members = audience.members.filter((member) => choiceOf(audience, member) === 'digest');
  if (members.length === 0) return;
  const { rows: claimed } = await client.query<{ member_id: string }>(
    `INSERT INTO rating_digests (organization_id, member_id, day) SELECT $1, m, $3::date FROM unnest($2::text[]) m ON CONFLICT DO NOTHING RETURNING member_id`,
    [organizationId, members.map((m) => m.id), day],
  );
  if (claimed.length === 0) return;
  const from = instantOfLocalDay(day, '00:00', timeZone);
  const to = instantOfLocalDay(today, '00:00', timeZone);
  const { rows: totals } = await client.query<{ ratings: number; average: number | null; actionable: number; open: number; overdue: number }>(
    `SELECT (SELECT count(*)::int FROM ratings WHERE organization_id = $1 AND created_at >= $2 AND created_at < $3) AS ratings,
            (SELECT avg(rating)::float8 FROM ratings WHERE organization_id = $1 AND created_at >= $2 AND created_at < $3) AS average,
            (SELECT count(*)::int FROM ratings WHERE organization_id = $1 AND actionable_at >= $2 AND actionable_at < $3) AS actionable,
            (SELECT count(*)::int FROM ratings WHERE organization_id = $1 AND actionable_at IS NOT NULL AND handled_at IS NULL) AS open,
            (SELECT count(*)::int FROM ratings WHERE organization_id = $1 AND actionable_at IS NOT NULL AND handled_at IS NULL AND respond_by < clock_timestamp()) AS overdue`,
    [organizationId, from, to],
  );
  const { rows: items } = await client.query<{ review_request_id: string; rating: number; created_at: Date; feedback: string | null; customer_name: string; location_name: string | null }>(
    `SELECT ra.review_request_id, ra.rating, ra.created_at, f.text AS feedback, rr.customer_name, ls.name AS location_name
       FROM ratings ra JOIN review_requests rr ON rr.id = ra.review_request_id
       LEFT JOIN feedback f ON f.review_request_id = ra.review_request_id
       LEFT JOIN location_snapshots ls ON ls.organization_id = rr.organization_id AND ls.location_id = rr.location_id
      WHERE ra.organization_id = $1 AND ra.actionable_at >= $2 AND ra.actionable_at < $3
      ORDER BY ra.actionable_at LIMIT $4`,
    [organizationId, from, to, MAX_DIGEST_RATINGS],
  );
  const total = totals[0];
  const digest: systemEmailBusV1.DigestTotals = { day, ratings: total.ratings, average: total.average ?? 0, actionable: total.actionable, open: total.open, overdue: total.overdue };
  const ratings = items.map((item) => ({
    rating: item.rating, feedback: item.feedback ?? '', customerName: item.customer_name, locationName: item.location_name ?? '', ratedAt: item.created_at, link: inboxLinkOf(options.publicBaseUrl, item.review_request_id),
  }));
  const { organization } = audience.profile;
  const wanted = new Set(claimed.map((row) => row.member_id));
  await Promise.all(
    members
      .filter((member) => wanted.has(member.id))
      .map((member) => {
        const id = `digest.${organizationId}.${member.id}.${day}`;
        const email = systemEmailBusV1.SystemEmail.encode(systemEmailBusV1.SystemEmail.fromPartial({
          id, kind: 'rating_digest', to: member.email, locale: organization.locale, link: `${options.publicBaseUrl}/app/#/ratings`, organizationId, organizationName: organization.name,
          ratings, digest, timeZone,
        })).finish();
        return options.bus.publish(SYSTEM_EMAIL_SUBJECT, email, { msgId: systemEmailMsgId(id) });
      }),
  );
  digestsSent.inc(wanted.size);
}
