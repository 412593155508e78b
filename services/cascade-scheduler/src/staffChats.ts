import { randomBytes } from 'node:crypto';
import { BOT_CHANNELS, BOT_LINK_LIFETIME_MS, isOneOf, type schedulerV1 } from '@rrs/proto';
import { InvalidError, inTransaction, type Pool } from '@rrs/runtime';
import { isUuid } from './ids';

/*
 * Staff chats (docs/console.md, "Rating alerts"): a member links a Telegram or MAX chat to the
 * organization's rating alerts the way a customer links theirs — the console shows the bot's deep link
 * with a code; the chat's Start sends the code to the bot's webhook, and channel-messenger claims it
 * (ClaimBotLink, answered `staff`). The code is single-use, for one channel, and expires.
 */

/** A member's new link code for a staff chat on `channel`. */
export async function createStaffLinkCode(pool: Pool, request: schedulerV1.CreateStaffLinkCodeRequest): Promise<schedulerV1.CreateStaffLinkCodeResponse> {
  if (!isUuid(request.organizationId)) throw InvalidError.field('/organizationId', 'an organization id');
  if (!isOneOf(BOT_CHANNELS, request.channel)) throw InvalidError.field('/channel', `one of ${BOT_CHANNELS.join(', ')}`);
  if (!request.memberId) throw InvalidError.field('/memberId', 'the member linking the chat');
  const { rows } = await pool.query<{ code: string; expires_at: Date }>(
    `INSERT INTO staff_link_codes (code, organization_id, channel, member_id, expires_at) VALUES ($1, $2, $3, $4, clock_timestamp() + $5 * interval '1 millisecond') RETURNING code, expires_at`,
    [randomBytes(16).toString('base64url'), request.organizationId, request.channel, request.memberId, BOT_LINK_LIFETIME_MS],
  );
  return { code: { channel: request.channel, code: rows[0].code, expiresAt: rows[0].expires_at } };
}

/**
 * A bot chat claims a staff code: once, on its channel, before it expires (the same chat again gets the
 * same answer: a retried webhook). The chat then gets the organization's alerts. Null when the code is
 * not a staff code that this chat may claim.
 */
export async function claimStaffLink(pool: Pool, request: schedulerV1.ClaimBotLinkRequest): Promise<schedulerV1.ClaimBotLinkResponse | null> {
  return inTransaction(pool, async (client) => {
    const { rows } = await client.query<{ organization_id: string; member_id: string; locale: string | null; organization_name: string | null }>(
      `WITH claimed AS (
         UPDATE staff_link_codes SET used_at = coalesce(used_at, clock_timestamp()), used_by_chat = $3
          WHERE code = $1 AND channel = $2 AND expires_at > clock_timestamp() AND (used_at IS NULL OR used_by_chat = $3)
          RETURNING organization_id, member_id)
       SELECT c.organization_id, c.member_id, os.locale, os.name AS organization_name
         FROM claimed c LEFT JOIN organization_settings os ON os.organization_id = c.organization_id`,
      [request.code, request.channel, request.chatId],
    );
    const claimed = rows[0];
    if (!claimed) return null;
    await client.query(
      `INSERT INTO staff_chats (organization_id, channel, chat_id, linked_by) VALUES ($1, $2, $3, $4)
       ON CONFLICT (organization_id, channel, chat_id) DO UPDATE SET linked_by = excluded.linked_by, linked_at = CASE WHEN staff_chats.unlinked_at IS NULL THEN staff_chats.linked_at ELSE now() END, unlinked_at = NULL`,
      [claimed.organization_id, request.channel, request.chatId, claimed.member_id],
    );
    return { organizationId: claimed.organization_id, phone: '', recipientId: '', locale: claimed.locale === 'ru' ? 'ru' : 'en', organizationName: claimed.organization_name ?? '', staff: true };
  });
}

export async function listStaffChats(pool: Pool, organizationId: string): Promise<schedulerV1.ListStaffChatsResponse> {
  if (!isUuid(organizationId)) return { chats: [] };
  const { rows } = await pool.query<{ channel: string; chat_id: string; linked_by: string; linked_at: Date }>(
    'SELECT channel, chat_id, linked_by, linked_at FROM staff_chats WHERE organization_id = $1 AND unlinked_at IS NULL ORDER BY linked_at, chat_id',
    [organizationId],
  );
  return { chats: rows.map((r) => ({ channel: r.channel, chatId: r.chat_id, linkedBy: r.linked_by, linkedAt: r.linked_at })) };
}

/** Ends a staff chat's link for one organization (the console), or for all (the bot was blocked, `/stop`). */
export async function unlinkStaffChat(pool: Pool, request: schedulerV1.UnlinkStaffChatRequest): Promise<schedulerV1.UnlinkStaffChatResponse> {
  if (request.organizationId && !isUuid(request.organizationId)) return { unlinked: 0 };
  const { rowCount } = await pool.query(
    `UPDATE staff_chats SET unlinked_at = now() WHERE channel = $1 AND chat_id = $2 AND ($3 = '' OR organization_id = nullif($3, '')::uuid) AND unlinked_at IS NULL`,
    [request.channel, request.chatId, request.organizationId],
  );
  return { unlinked: rowCount ?? 0 };
}
