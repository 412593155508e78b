import { inTransaction, NotFoundError, type Pool } from '@rrs/runtime';
import { stop } from './engine';
import { isUuid } from './ids';
import { dbNow, lockRecipients, saveStates } from './recipientStore';

/**
 * Finishes every running recipient of a cascade with reason `canceled` (their pending steps are
 * canceled; a dispatched one is already on its way); returns how many were canceled. `not_found` for
 * an unknown id or another organization's cascade.
 */
export async function cancelCascade(pool: Pool, minuteMs: number, organizationId: string, id: string): Promise<number> {
  if (!isUuid(id)) throw new NotFoundError('cascade');
  return inTransaction(pool, async (client) => {
    const { rows: found } = await client.query('SELECT 1 FROM cascades WHERE id = $1 AND organization_id = $2', [id, organizationId]);
    if (!found[0]) throw new NotFoundError('cascade');
    const { rows } = await client.query<{ id: string }>(`SELECT id FROM recipients WHERE cascade_id = $1 AND status = 'running'`, [id]);
    const states = await lockRecipients(client, rows.map((row) => row.id));
    const now = await dbNow(client);
    let canceled = 0;
    for (const state of states.values()) {
      if (state.recipient.status !== 'running') continue;
      stop(state, 'canceled', { now, minuteMs });
      canceled++;
    }
    await saveStates(client, states.values(), now);
    return canceled;
  });
}
