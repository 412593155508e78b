import type { schedulerV1 } from '@rrs/proto';
import { inTransaction, NotFoundError, type Pool } from '@rrs/runtime';
import { stop } from './engine';
import { dbNow, lockRecipients, saveStates } from './recipientStore';
import { currentForm, loadReviewLink } from './reviewForm';

/**
 * Opts the recipient's email out of the organization's messages and finishes the recipient
 * `unsubscribed` (its pending steps, in any channel, are canceled). Only cascade links have an
 * unsubscribe page. `recorded` is whether the address was newly opted out.
 */
export async function unsubscribe(pool: Pool, minuteMs: number, token: string): Promise<schedulerV1.UnsubscribeResponse> {
  const link = await loadReviewLink(pool, token);
  const recipientId = link.recipient_id;
  if (!recipientId) throw new NotFoundError('unsubscribe link', { message: 'unknown unsubscribe link' });
  const recorded = await inTransaction(pool, async (client) => {
    const state = (await lockRecipients(client, [recipientId])).get(recipientId);
    if (!state) return false;
    const now = await dbNow(client);
    let optedOut = 0;
    if (state.recipient.email) {
      const { rowCount } = await client.query(
        'INSERT INTO opt_outs (organization_id, channel, address) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
        [link.organization_id, 'EMAIL', state.recipient.email.toLowerCase()],
      );
      optedOut = rowCount ?? 0;
    }
    stop(state, 'unsubscribed', { now, minuteMs });
    await saveStates(client, [state], now);
    return optedOut > 0;
  });
  return { form: await currentForm(pool, token), recorded };
}
