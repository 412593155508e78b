import type { schedulerV1 } from '@rrs/proto';
import { inTransaction, NotFoundError, type Pool } from '@rrs/runtime';
import { stop } from './engine';
import { recordOptOut } from './optOutLedger';
import { dbNow, lockRecipients, saveStates } from './recipientStore';
import { currentForm, loadReviewLink } from './reviewForm';

/**
 * The person behind the link opts out of the organization's messages: every address of the recipient
 * (email and phone) enters the opt-out ledger, so no later step or request reaches them on any channel,
 * and the recipient finishes `unsubscribed` (its pending steps, in any channel, are canceled). Only
 * cascade links have an unsubscribe page. `recorded` is whether an address was newly opted out.
 */
export async function unsubscribe(pool: Pool, minuteMs: number, request: schedulerV1.UnsubscribeRequest): Promise<schedulerV1.UnsubscribeResponse> {
  const link = await loadReviewLink(pool, request.token, 'unsubscribe');
  const recipientId = link.recipient_id;
  if (!recipientId) throw new NotFoundError('unsubscribe link', { message: 'unknown unsubscribe link' });
  const recorded = await inTransaction(pool, async (client) => {
    const state = (await lockRecipients(client, [recipientId])).get(recipientId);
    if (!state) return false;
    const now = await dbNow(client);
    const optedOut = await recordOptOut(client, {
      organizationId: link.organization_id, person: state.recipient, channel: 'EMAIL', source: request.oneClick ? 'one_click' : 'unsubscribe_page', recipientId,
    });
    stop(state, 'unsubscribed', { now, minuteMs });
    await saveStates(client, [state], now);
    return optedOut > 0;
  });
  return { form: await currentForm(pool, request.token, 'unsubscribe'), recorded };
}
