import { sqlArray, type Pool } from '@rrs/runtime';

/** A contact linked to a bot chat. */
export interface ChatLink {
  channel: string;
  organizationId: string;
  phone: string;
  chatId: string;
  recipientId: string;
  locale: 'ru' | 'en';
}

export type UnlinkReason = 'stop_command' | 'bot_blocked';

interface ChatLinkRow {
  channel: string;
  organization_id: string;
  phone: string;
  chat_id: string;
  recipient_id: string | null;
  locale: string;
}

function linkOf(row: ChatLinkRow): ChatLink {
  return { channel: row.channel, organizationId: row.organization_id, phone: row.phone, chatId: row.chat_id, recipientId: row.recipient_id ?? '', locale: row.locale === 'ru' ? 'ru' : 'en' };
}

const COLUMNS = 'channel, organization_id, phone, chat_id, recipient_id, locale';

/**
 * The bots' chat links (`bot_chats`, in the messenger's schema): which chat reaches an organization's
 * contact (by phone) on a channel. One live link per organization, phone and channel; linking again
 * (a new deep link, maybe from another chat) replaces it.
 */
export class ChatLinks {
  constructor(private readonly pool: Pool) {}

  async link(link: ChatLink): Promise<void> {
    await this.pool.query(
      `INSERT INTO bot_chats (channel, organization_id, phone, chat_id, recipient_id, locale) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (channel, organization_id, phone) DO UPDATE
         SET chat_id = EXCLUDED.chat_id, recipient_id = EXCLUDED.recipient_id, locale = EXCLUDED.locale, linked_at = now(), unlinked_at = NULL, unlink_reason = NULL`,
      [link.channel, link.organizationId, link.phone, link.chatId, link.recipientId || null, link.locale],
    );
  }

  /** The live link of a contact on a channel, if any. */
  async find(channel: string, organizationId: string, phone: string): Promise<ChatLink | null> {
    const { rows } = await this.pool.query<ChatLinkRow>(`SELECT ${COLUMNS} FROM bot_chats WHERE channel = $1 AND organization_id = $2 AND phone = $3 AND unlinked_at IS NULL`, [channel, organizationId, phone]);
    return rows[0] ? linkOf(rows[0]) : null;
  }

  /** Every live link of one chat (one person may be the contact of several organizations). */
  async ofChat(channel: string, chatId: string): Promise<ChatLink[]> {
    const { rows } = await this.pool.query<ChatLinkRow>(`SELECT ${COLUMNS} FROM bot_chats WHERE channel = $1 AND chat_id = $2 AND unlinked_at IS NULL ORDER BY organization_id, phone`, [channel, chatId]);
    return rows.map(linkOf);
  }

  /** Ends one link, if it still goes to that chat (a newer link from another chat stays). */
  async unlink(link: ChatLink, reason: UnlinkReason): Promise<void> {
    await this.pool.query(
      `UPDATE bot_chats SET unlinked_at = now(), unlink_reason = $5
        WHERE channel = $1 AND organization_id = $2 AND phone = $3 AND chat_id = $4 AND unlinked_at IS NULL`,
      [link.channel, link.organizationId, link.phone, link.chatId, reason],
    );
  }

  /**
   * Deletes the links made by these recipients (an erased person's; docs/customer-respect.md): the phone
   * and chat go, and with them the row's evidence of when sending there ended, which the scheduler's
   * opt-out ledger keeps as a keyed hash. Returns how many.
   */
  async forgetRecipients(organizationId: string, recipientIds: string[]): Promise<number> {
    if (recipientIds.length === 0) return 0;
    const { rowCount } = await this.pool.query(`DELETE FROM bot_chats WHERE organization_id = $1 AND recipient_id = ANY($2::uuid[])`, [organizationId, sqlArray(recipientIds)]);
    return rowCount ?? 0;
  }
}
