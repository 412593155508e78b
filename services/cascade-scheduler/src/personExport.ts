import type { schedulerV1 } from '@rrs/proto';
import { InvalidError, sqlArray, type Pool } from '@rrs/runtime';
import { addressFor } from './engine';
import { isUuid } from './ids';
import { suppressionOf } from './optOutLedger';
import { personAddresses } from './personAddresses';

const EMPTY: schedulerV1.ExportPersonResponse = { addresses: [], consents: [], suppressions: [], messages: [], ratings: [], lastSentAt: undefined, lastRatedAt: undefined, botLinks: [] };

/**
 * What the organization holds about one person, as evidence (docs/customer-respect.md): the consent
 * each request carried, the opt-outs with their source, every message sent (channel, address, when,
 * delivery), every rating with the public links shown beside it, the official-bot chats they linked
 * (claimed link codes, by phone), and the cooldown ledger. The person is
 * every recipient whose lower-case email or E.164 phone is one of the given addresses. An export is
 * rare: it reads the organization's recipients without an index of its own, so intake stays fast.
 */
export async function exportPerson(pool: Pool, request: schedulerV1.ExportPersonRequest): Promise<schedulerV1.ExportPersonResponse> {
  const addresses = personAddresses({ email: request.email, phone: request.phone });
  if (addresses.length === 0) throw InvalidError.field('/email', 'an email address or a phone number (or both)');
  if (!isUuid(request.organizationId)) return { ...EMPTY, addresses };
  const email = request.email.toLowerCase();
  const { rows: recipients } = await pool.query<{ id: string; cascade_id: string; consent_at: Date | null; created_at: Date; review_request_id: string }>(
    `SELECT r.id, r.cascade_id, r.consent_at, c.created_at, r.review_request_id
       FROM recipients r JOIN cascades c ON c.id = r.cascade_id
      WHERE r.organization_id = $1 AND (($2 <> '' AND lower(r.email) = $2) OR ($3 <> '' AND r.phone = $3))
      ORDER BY c.created_at, r.position`,
    [request.organizationId, email, request.phone],
  );
  const recipientIds = sqlArray(recipients.map((recipient) => recipient.id));
  const [steps, ratings, suppressions, activity, botLinks] = await Promise.all([
    pool.query<{ recipient_id: string; cascade_id: string; step_order: number; sent_channel: string; status: string; reason: string | null; sent_at: Date; delivered_at: Date | null; email: string; phone: string }>(
      `SELECT s.recipient_id, s.cascade_id, s.step_order, s.sent_channel, s.status, s.reason, s.sent_at, s.delivered_at, r.email, r.phone
         FROM recipient_steps s JOIN recipients r ON r.id = s.recipient_id
        WHERE s.recipient_id = ANY($1::uuid[]) AND s.sent_at IS NOT NULL ORDER BY s.sent_at`,
      [recipientIds],
    ),
    pool.query<{ id: string; cascade_id: string | null; rating: number; feedback: string | null; rated_at: Date; public_links_shown: Array<{ provider: string; url: string }> | null; public_links_shown_at: Date | null }>(
      `SELECT rr.id, r.cascade_id, ra.rating, fb.text AS feedback, ra.created_at AS rated_at, rr.public_links_shown, rr.public_links_shown_at
         FROM review_requests rr JOIN ratings ra ON ra.review_request_id = rr.id
         LEFT JOIN recipients r ON r.id = rr.recipient_id LEFT JOIN feedback fb ON fb.review_request_id = rr.id
        WHERE rr.organization_id = $1 AND (rr.recipient_id = ANY($2::uuid[]) OR (rr.recipient_id IS NULL AND lower(rr.contact) = ANY($3::text[])))
        ORDER BY ra.created_at`,
      [request.organizationId, recipientIds, sqlArray(addresses)],
    ),
    pool.query(`SELECT address, channel, source, recipient_id, note, created_at FROM suppressions WHERE organization_id = $1 AND address = ANY($2::text[]) ORDER BY created_at, address`, [
      request.organizationId, sqlArray(addresses),
    ]),
    pool.query<{ last_sent_at: Date | null; last_rated_at: Date | null }>(
      'SELECT max(last_sent_at) AS last_sent_at, max(last_rated_at) AS last_rated_at FROM person_activity WHERE organization_id = $1 AND address = ANY($2::text[])',
      [request.organizationId, sqlArray(addresses)],
    ),
    pool.query<{ channel: string; review_request_id: string; used_at: Date; used_by_chat: string | null }>(
      `SELECT channel, review_request_id, used_at, used_by_chat FROM bot_link_codes
        WHERE organization_id = $1 AND phone = ANY($2::text[]) AND used_at IS NOT NULL ORDER BY used_at, channel`,
      [request.organizationId, sqlArray(addresses)],
    ),
  ]);
  return {
    addresses,
    consents: recipients.map((recipient) => ({ cascadeId: recipient.cascade_id, recipientId: recipient.id, consentAt: recipient.consent_at ?? undefined, recordedAt: recipient.created_at })),
    suppressions: suppressions.rows.map(suppressionOf),
    messages: steps.rows.map((step) => ({
      cascadeId: step.cascade_id, recipientId: step.recipient_id, stepOrder: step.step_order, channel: step.sent_channel,
      address: addressFor(step.sent_channel, step), status: step.status, reason: step.reason ?? '', sentAt: step.sent_at, deliveredAt: step.delivered_at ?? undefined,
    })),
    ratings: ratings.rows.map((rating) => ({
      reviewRequestId: rating.id, cascadeId: rating.cascade_id ?? '', rating: rating.rating, feedback: rating.feedback ?? '', ratedAt: rating.rated_at,
      publicLinksShown: rating.public_links_shown ?? [], publicLinksShownAt: rating.public_links_shown_at ?? undefined,
    })),
    lastSentAt: activity.rows[0]?.last_sent_at ?? undefined,
    lastRatedAt: activity.rows[0]?.last_rated_at ?? undefined,
    botLinks: botLinks.rows.map((link) => ({ channel: link.channel, reviewRequestId: link.review_request_id, linkedAt: link.used_at, chatId: link.used_by_chat ?? '' })),
  };
}
