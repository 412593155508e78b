import type { Pool } from '@rrs/runtime';
import { isLost, wonKeyOf, type CrmDeal } from './crm/types';
import type { Connector } from './model';
import type { DealOutcome, StageHint, WonDealDeps } from './wonDeals';

/*
 * A deal won and then lost or refunded: its review request must stop (docs/connectors.md, "Lost and
 * refunded deals"). A deal whose cascade may still run (started by this connector, not finished, not
 * stopped) and that is no longer in any won stage of the connector has that cascade canceled: its
 * recipient finishes `canceled`, and the finish event's write-back says on the deal why. A deal moved to
 * another won stage (another pipeline's) is a new sale and keeps its first cascade.
 */

/** Why the connector stopped a deal's cascade: a failure stage (amoCRM 143, Bitrix24 `F`), or any other stage after won. */
export type StopReason = 'lost' | 'left_won';

interface OpenCascade {
  won_key: string;
  cascade_id: string;
  stop_reason: StopReason | null;
}

/** The deal's cascades that may still run: started by the connector, neither finished nor stopped. */
async function openCascades(pool: Pool, connectorId: string, dealId: string): Promise<OpenCascade[]> {
  const { rows } = await pool.query<OpenCascade>(
    'SELECT won_key, cascade_id, stop_reason FROM deal_cascades WHERE connector_id = $1 AND deal_id = $2 AND finished_at IS NULL AND stopped_at IS NULL ORDER BY created_at',
    [connectorId, dealId],
  );
  return rows;
}

/** The Idempotency-Key of stopping a deal's cascade: every retry, copy or reconciliation cancels once. */
export const dealStopKey = (connectorId: string, dealId: string, wonKey: string) => `crm:${connectorId}:${dealId}:${wonKey}:stop`;

/**
 * Stops the deal's open cascades when the deal has left won. Null when there is nothing to stop and
 * the start path decides (a deal with no open cascade, or one the event says is won); otherwise the
 * outcome: `stopped`, or `duplicate` for a deal still in the won stage its cascade runs for (read from
 * the CRM once, so the start path need not read it again). Throws what is worth retrying; the reason is
 * recorded before the cancel is asked, and the stop after it, so a retry cancels (idempotently) again.
 */
export async function stopCascadesOfLostDeal(deps: WonDealDeps, connector: Connector, dealId: string, hint: StageHint | null): Promise<DealOutcome | null> {
  const open = await openCascades(deps.pool, connector.id, dealId);
  if (open.length === 0) return null;
  const { wonStages } = connector.settings;
  if (hint && connector.kind === 'amocrm' && wonKeyOf(connector.kind, { ...hint, stageSemantic: '' }, wonStages)) return null;
  const deal = await deps.crm.for(connector).getDeal(dealId);
  if (!deal) return { status: 'ignored', outcome: 'deal_not_found' };
  const wonKey = wonKeyOf(connector.kind, deal, wonStages);
  if (wonKey !== null) {
    const same = open.find((c) => c.won_key === wonKey);
    return same ? { status: 'done', outcome: 'duplicate', cascadeId: same.cascade_id } : null;
  }
  const reason: StopReason = isLost(connector.kind, deal) ? 'lost' : 'left_won';
  for (const cascade of open) await stopCascade(deps, connector, deal, cascade, cascade.stop_reason ?? reason);
  return { status: 'done', outcome: 'stopped', cascadeId: open[open.length - 1].cascade_id };
}

async function stopCascade(deps: WonDealDeps, connector: Connector, deal: CrmDeal, cascade: OpenCascade, reason: StopReason): Promise<void> {
  const row = [connector.id, deal.id, cascade.won_key];
  // First why (the write-back of the finish event this cancel causes reads it), then the cancel, then that it is done.
  await deps.pool.query('UPDATE deal_cascades SET stop_reason = $4 WHERE connector_id = $1 AND deal_id = $2 AND won_key = $3', [...row, reason]);
  await deps.reviewServices.cancelCascade(connector.organizationId, cascade.cascade_id, dealStopKey(connector.id, deal.id, cascade.won_key));
  await deps.pool.query('UPDATE deal_cascades SET stopped_at = now() WHERE connector_id = $1 AND deal_id = $2 AND won_key = $3', row);
}
