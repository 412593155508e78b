import { randomBytes } from 'node:crypto';
import { BOT_CHANNELS, BOT_LINK_CODE, BOT_LINK_LIFETIME_MS, isOneOf, type schedulerV1 } from '@rrs/proto';
import { InvalidError, inTransaction, NotFoundError, type Pool } from '@rrs/runtime';
import { isUuid } from './ids';
import { recordOptOut, suppressedAmong } from './optOutLedger';
import type { ReviewLink } from './links';
import { claimStaffLink } from './staffChats';
import type { AddressHasher } from './personHash';

/*
 * Link codes of the official messenger bots (docs/channels.md "Official bots"). The thank-you page of a
 * rated review link offers "get future requests in MAX / Telegram"; its deep link carries a code that
 * stands for the organization and the person's phone, so the bot's webhook can link the chat to them
 * without the link itself saying who they are. A code is single-use, for one channel, and expires.
 */

const E164 = /^\+[1-9]\d{6,14}$/;

/** The phone the link's person is reached at: the recipient's, or a review request's contact that is one. */
function personPhone(link: ReviewLink): string {
  if (link.phone && E164.test(link.phone)) return link.phone;
  return E164.test(link.contact) ? link.contact : '';
}

/**
 * The codes of a rated link for the channels asked (those whose bot the page can offer): the open code
 * of the link and channel, or a new one when there is none or it expired. A claimed code stays as the
 * record of the link (the person's export); the page then gets a new open one. None for a link
 * not yet rated, without a phone, or whose person opted out.
 */
export async function issueBotLinkCodes(pool: Pool, hasher: AddressHasher, link: ReviewLink, channels: readonly string[]): Promise<schedulerV1.BotLinkCode[]> {
  const wanted = [...new Set(channels)].filter((channel) => isOneOf(BOT_CHANNELS, channel));
  if (wanted.length === 0 || link.rating === null || link.unsubscribed) return [];
  const phone = personPhone(link);
  if (!phone) return [];
  if ((await suppressedAmong(pool, hasher, [link.organization_id], [phone])).size > 0) return [];
  const codes: schedulerV1.BotLinkCode[] = [];
  for (const channel of wanted) {
    const { rows } = await pool.query<{ code: string; expires_at: Date }>(
      `INSERT INTO bot_link_codes (code, review_request_id, channel, organization_id, phone, recipient_id, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp() + $7 * interval '1 millisecond')
       ON CONFLICT (review_request_id, channel) WHERE used_at IS NULL DO UPDATE
         SET code = EXCLUDED.code, phone = EXCLUDED.phone, created_at = clock_timestamp(), expires_at = EXCLUDED.expires_at
         WHERE bot_link_codes.expires_at <= clock_timestamp()
       RETURNING code, expires_at`,
      [randomBytes(16).toString('base64url'), link.id, channel, link.organization_id, phone, link.recipient_id, BOT_LINK_LIFETIME_MS],
    );
    const live = rows[0] ?? (await pool.query<{ code: string; expires_at: Date }>('SELECT code, expires_at FROM bot_link_codes WHERE review_request_id = $1 AND channel = $2 AND used_at IS NULL', [link.id, channel])).rows[0];
    codes.push({ channel, code: live.code, expiresAt: live.expires_at });
  }
  return codes;
}

function invalidCode(): NotFoundError {
  return new NotFoundError('bot link', { code: 'bot_link_invalid', message: 'unknown, expired or used bot link code' });
}

/**
 * A bot chat claims a code: once, on the code's channel, before it expires. The same chat claiming it
 * again gets the same answer (the messenger retries a webhook that failed after the claim committed).
 * A staff chat's code (staffChats.ts) is claimed the same way and answered `staff`.
 */
export async function claimBotLink(pool: Pool, request: schedulerV1.ClaimBotLinkRequest): Promise<schedulerV1.ClaimBotLinkResponse> {
  if (!BOT_LINK_CODE.test(request.code) || !isOneOf(BOT_CHANNELS, request.channel)) throw invalidCode();
  if (!request.chatId) throw InvalidError.field('/chatId', 'the claiming chat');
  const { rows } = await pool.query<{ organization_id: string; phone: string; recipient_id: string | null; locale: string | null; organization_name: string | null }>(
    `WITH claimed AS (
       UPDATE bot_link_codes SET used_at = coalesce(used_at, clock_timestamp()), used_by_chat = $3
        WHERE code = $1 AND channel = $2 AND expires_at > clock_timestamp() AND (used_at IS NULL OR used_by_chat = $3)
        RETURNING organization_id, phone, recipient_id)
     SELECT c.organization_id, c.phone, c.recipient_id, os.locale, os.name AS organization_name
       FROM claimed c LEFT JOIN organization_settings os ON os.organization_id = c.organization_id`,
    [request.code, request.channel, request.chatId],
  );
  const claimed = rows[0];
  if (!claimed) {
    const staff = await claimStaffLink(pool, request);
    if (staff) return staff;
    throw invalidCode();
  }
  return {
    organizationId: claimed.organization_id,
    phone: claimed.phone,
    recipientId: claimed.recipient_id ?? '',
    locale: claimed.locale === 'ru' ? 'ru' : 'en',
    organizationName: claimed.organization_name ?? '',
    staff: false,
  };
}

/**
 * A person unlinked a bot chat (`/stop`, or blocked the bot): an opt-out of the organization like a STOP
 * reply. The phone enters the ledger, and with it the addresses of the recipient the link came from.
 */
export async function recordBotOptOut(pool: Pool, request: schedulerV1.RecordBotOptOutRequest): Promise<schedulerV1.RecordBotOptOutResponse> {
  if (!isUuid(request.organizationId)) throw InvalidError.field('/organizationId', 'an organization id');
  if (!E164.test(request.phone)) throw InvalidError.field('/phone', 'an E.164 phone number');
  if (!isOneOf(BOT_CHANNELS, request.channel)) throw InvalidError.field('/channel', `one of ${BOT_CHANNELS.join(', ')}`);
  const recipientId = isUuid(request.recipientId) ? request.recipientId : '';
  const suppressed = await inTransaction(pool, async (client) => {
    const { rows } = recipientId
      ? await client.query<{ email: string }>('SELECT email FROM recipients WHERE id = $1 AND organization_id = $2', [recipientId, request.organizationId])
      : { rows: [] as Array<{ email: string }> };
    return recordOptOut(client, {
      organizationId: request.organizationId,
      person: { email: rows[0]?.email ?? '', phone: request.phone },
      channel: request.channel,
      source: 'stop_reply',
      recipientId: rows[0] ? recipientId : null,
    });
  });
  return { suppressed };
}
