import { counter, startDueWorkLoop, type DueWorkLoop, type Logger, type Notifier, type Pool } from '@rrs/runtime';
import type { ConnectorPolicy } from './config';
import { SYNC_CHANNEL, toConnector, type Connectors } from './connectors';
import type { CrmClients } from './crm';
import { wonKeyOf, type CrmDeal } from './crm/types';
import { queueEvents, judgeFailure } from './inbox';
import type { Connector } from './model';
import type { ReviewServices } from './reviewServices';
import { wonBeforeConnector } from './wonDeals';

/*
 * Reconciliation: some CRM webhooks are sent once and never retried (amoCRM's digital-pipeline hooks),
 * and a hook can be lost on the way. On a schedule, each connector lists the deals that reached a won
 * stage since its cursor (less an overlap), and queues in the inbox those that have no cascade and no
 * pending event yet. The inbox worker starts them through the same path as a webhook, so a deal
 * starts one cascade whoever finds it first. The cursor moves only after a complete pass.
 *
 * The same pass reads again every deal whose cascade may still run (lostDeals.ts): one that is in no
 * won stage any more — lost or refunded while its hook was missed — is queued too, and the inbox worker
 * stops its cascade; one whose cascade the scheduler says has finished is no longer watched.
 */

const passes = counter({ name: 'connector_syncs_total', help: 'Reconciliation passes, by outcome.', labelNames: ['outcome'] });
const found = counter({ name: 'connector_sync_missed_deals_total', help: 'Won deals found by reconciliation without a cascade or a pending event.' });

export interface ReconcilerOptions {
  pool: Pool;
  connectors: Connectors;
  crm: CrmClients;
  reviewServices: ReviewServices;
  policy: ConnectorPolicy;
  logger: Logger;
  notifier?: Notifier;
  /** Deals were queued: wake the inbox worker. */
  onQueued(): void;
}

/** Deals whose cascade may still run, read again per pass (oldest first); more wait for the next pass. */
export const MAX_WATCHED_DEALS_PER_PASS = 5_000;

/** Won deals of one page that have neither a cascade nor a pending event: the ones the webhooks missed. */
async function missing(pool: Pool, connector: Connector, deals: CrmDeal[]): Promise<Array<{ deal: CrmDeal; wonKey: string }>> {
  const won = deals
    .map((deal) => ({ deal, wonKey: wonKeyOf(connector.kind, deal, connector.settings.wonStages) }))
    .filter((d): d is { deal: CrmDeal; wonKey: string } => d.wonKey !== null && !wonBeforeConnector(d.deal, connector));
  if (won.length === 0) return [];
  const { rows } = await pool.query<{ deal_id: string; won_key: string | null }>(
    `SELECT deal_id, won_key FROM deal_cascades WHERE connector_id = $1 AND deal_id = ANY($2::text[])
     UNION ALL SELECT deal_id, NULL FROM crm_events WHERE connector_id = $1 AND deal_id = ANY($2::text[]) AND status = 'pending'`,
    [connector.id, won.map((d) => d.deal.id)],
  );
  const started = new Set(rows.filter((r) => r.won_key !== null).map((r) => `${r.deal_id}\u0000${r.won_key}`));
  const pending = new Set(rows.filter((r) => r.won_key === null).map((r) => r.deal_id));
  return won.filter((d) => !started.has(`${d.deal.id}\u0000${d.wonKey}`) && !pending.has(d.deal.id));
}

/** One reconciliation pass of a connector; returns how many deals it queued. */
export async function reconcileConnector(o: Pick<ReconcilerOptions, 'pool' | 'crm' | 'policy' | 'reviewServices'>, connector: Connector): Promise<number> {
  const since = new Date(connector.syncCursor.getTime() - o.policy.syncOverlapMs);
  let cursor = connector.syncCursor;
  let queued = 0;
  for await (const page of o.crm.for(connector).listWonDeals(since, connector.settings.wonStages)) {
    for (const d of page) if (d.cursorAt && d.cursorAt > cursor) cursor = d.cursorAt;
    const missed = await missing(o.pool, connector, page);
    await queueEvents(
      o.pool,
      connector.id,
      'reconcile',
      missed.map(({ deal }) => ({ dealId: deal.id, event: 'reconcile', payload: { stage: { pipelineId: deal.pipelineId, stageId: deal.stageId } } })),
    );
    queued += missed.length;
  }
  queued += await reconcileWatchedDeals(o, connector);
  // The cursor is the newest CRM time seen (the CRM's clock, which the overlap covers), and never moves back.
  await o.pool.query('UPDATE connectors SET sync_cursor = GREATEST(sync_cursor, $2), last_sync_at = now() WHERE id = $1', [connector.id, cursor]);
  return queued;
}

/**
 * The deals whose cascade may still run, read from the CRM in batches: those in no won stage any more
 * are queued (unless an event of theirs is pending) for the inbox worker to stop; for those still won,
 * a cascade the scheduler reports finished (its finish event missed, or from before this was recorded)
 * stops being watched. Returns how many it queued.
 */
async function reconcileWatchedDeals(o: Pick<ReconcilerOptions, 'pool' | 'crm' | 'reviewServices'>, connector: Connector): Promise<number> {
  const { rows } = await o.pool.query<{ deal_id: string; won_key: string; cascade_id: string; pending: boolean }>(
    `SELECT d.deal_id, d.won_key, d.cascade_id,
            EXISTS (SELECT 1 FROM crm_events e WHERE e.connector_id = d.connector_id AND e.deal_id = d.deal_id AND e.status = 'pending') AS pending
       FROM deal_cascades d WHERE d.connector_id = $1 AND d.finished_at IS NULL AND d.stopped_at IS NULL ORDER BY d.created_at LIMIT $2`,
    [connector.id, MAX_WATCHED_DEALS_PER_PASS],
  );
  if (rows.length === 0) return 0;
  const deals = new Map((await o.crm.for(connector).getDeals([...new Set(rows.map((r) => r.deal_id))])).map((deal) => [deal.id, deal]));
  const left = new Map<string, CrmDeal>();
  for (const row of rows) {
    const deal = deals.get(row.deal_id);
    if (!deal) continue;
    const wonKey = wonKeyOf(connector.kind, deal, connector.settings.wonStages);
    if (wonKey === null) {
      if (!row.pending) left.set(deal.id, deal);
    } else if (await o.reviewServices.cascadeFinished(connector.organizationId, row.cascade_id)) {
      await o.pool.query('UPDATE deal_cascades SET finished_at = coalesce(finished_at, now()) WHERE connector_id = $1 AND deal_id = $2 AND won_key = $3', [connector.id, row.deal_id, row.won_key]);
    }
  }
  await queueEvents(o.pool, connector.id, 'reconcile', [...left.values()].map((deal) => ({ dealId: deal.id, event: 'reconcile', payload: { stage: { pipelineId: deal.pipelineId, stageId: deal.stageId } } })));
  return left.size;
}

export function startReconciler(o: ReconcilerOptions): DueWorkLoop {
  return startDueWorkLoop({
    name: 'connector reconciliation',
    logger: o.logger,
    notifier: o.notifier,
    channels: [SYNC_CHANNEL],
    idleMs: Math.min(30_000, o.policy.syncIntervalMs),
    async round() {
      // Claiming moves the next run an interval ahead, so a pass that dies is simply run again then.
      const { rows } = await o.pool.query(
        `UPDATE connectors SET next_sync_at = now() + make_interval(secs => $1 / 1000.0)
         WHERE id = (SELECT id FROM connectors WHERE enabled AND next_sync_at <= now() ORDER BY next_sync_at LIMIT 1 FOR UPDATE SKIP LOCKED)
         RETURNING *`,
        [o.policy.syncIntervalMs],
      );
      if (!rows[0]) return false;
      const connector = toConnector(rows[0]);
      try {
        const queued = await reconcileConnector(o, connector);
        await o.connectors.recordSuccess(connector.id);
        passes.inc({ outcome: 'complete' });
        found.inc(queued);
        if (queued > 0) {
          o.logger.info({ connectorId: connector.id, queued }, 'reconciliation found won deals without a cascade');
          o.onQueued();
        }
      } catch (err) {
        const failure = judgeFailure(err);
        passes.inc({ outcome: 'failed' });
        o.logger.warn({ err, connectorId: connector.id }, 'reconciliation failed; the cursor stays, the next pass covers it');
        await o.connectors.recordError(connector.id, failure.code, `reconciliation: ${failure.message}`);
      }
      return true;
    },
    async nextDueInMs() {
      const { rows } = await o.pool.query<{ ms: number | null }>(`SELECT (EXTRACT(EPOCH FROM min(next_sync_at) - now()) * 1000)::float8 AS ms FROM connectors WHERE enabled`);
      return rows[0].ms;
    },
  });
}
