import type { schedulerV1 } from '@rrs/proto';
import { inTransaction, NotFoundError, type Pool, type PoolClient } from '@rrs/runtime';
import { countCascades, countList } from './cascadeCounts';
import type { Reroute, StepStatus } from './engine';
import { isUuid } from './ids';

interface StepRow {
  recipient_id: string;
  step_order: number;
  channel: string;
  status: StepStatus;
  due_at: Date | null;
  sent_at: Date | null;
  skipped_at: Date | null;
  dispatched_at: Date | null;
  delivered_at: Date | null;
  reason: string | null;
  reroutes: Reroute[];
  sent_channel: string;
  provider: string | null;
}

function toStep(step: StepRow): schedulerV1.RecipientStep {
  const [dueAt, sentAt, skippedAt, dispatchedAt, deliveredAt] = [step.due_at, step.sent_at, step.skipped_at, step.dispatched_at, step.delivered_at].map((at) => at ?? undefined);
  const reroutes = step.reroutes.map((hop) => ({ fromChannel: hop.from, toChannel: hop.to, reason: hop.reason }));
  return { order: step.step_order, channel: step.channel, status: step.status, dueAt, sentAt, skippedAt, dispatchedAt, deliveredAt, reason: step.reason ?? '', reroutes, sentChannel: step.sent_channel, provider: step.provider ?? '' };
}

/**
 * The cascade, its recipients, their steps and its counts, read by `client` in its transaction: under
 * REPEATABLE READ (readCascade) one snapshot; in a transaction that holds the cascade's recipients
 * (a cancel), what that transaction made of them.
 */
async function readRows(client: PoolClient, organizationId: string, id: string) {
  const { rows } = await client.query(
    `SELECT id, organization_id, status, external_id, name, location_id, flow_id, channel, created_at, finished_at, skipped, recipients_total
       FROM cascades WHERE id = $1 AND organization_id = $2`,
    [id, organizationId],
  );
  const cascade = rows[0];
  if (!cascade) throw new NotFoundError('cascade');
  const { rows: recipients } = await client.query(
    `SELECT r.id, r.name, r.email, r.phone, r.contact_external_id, r.status, r.finish_reason, r.rating, r.feedback, r.rated_at,
            r.finished_at, r.window_closes_at, r.review_request_id, rr.opened_at
       FROM recipients r JOIN review_requests rr ON rr.id = r.review_request_id
      WHERE r.cascade_id = $1 ORDER BY r.position`,
    [id],
  );
  // The steps by their recipients (recipients_cascade, then recipient_steps' (recipient_id, step_order)
  // key): by `cascade_id`, which no index covers, it read every step ever made. An index on it would
  // cost every intake a third index entry per step (docs/operations.md, "Data lifecycle").
  const { rows: steps } = await client.query<StepRow>(
    `SELECT recipient_id, step_order, channel, status, due_at, sent_at, skipped_at, dispatched_at, delivered_at, reason, reroutes, sent_channel, provider
       FROM recipient_steps WHERE recipient_id = ANY (ARRAY(SELECT id FROM recipients WHERE cascade_id = $1)) ORDER BY recipient_id, step_order`,
    [id],
  );
  const counts = (await countCascades(client, [id])).get(id)!;
  return { cascade, recipients, steps, counts };
}

/**
 * A cascade as GET /cascades/{id} shows it: its recipients with their steps, and the `counts` (every
 * key of CASCADE_COUNT_KEYS, 0 when none). Read as one snapshot (REPEATABLE READ): read by separate
 * statements under READ COMMITTED, a change committed between them (a recipient stopped and its steps
 * canceled) showed half of itself — a finished recipient beside a step still scheduled. `not_found` for
 * an unknown id or another organization's cascade.
 */
export async function readCascade(pool: Pool, organizationId: string, id: string): Promise<schedulerV1.Cascade> {
  if (!isUuid(id)) throw new NotFoundError('cascade');
  return inTransaction(pool, async (client) => {
    await client.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
    return toCascade(await readRows(client, organizationId, id));
  });
}

/** As readCascade, in the caller's transaction (which holds the cascade's recipients). */
export async function readCascadeIn(client: PoolClient, organizationId: string, id: string): Promise<schedulerV1.Cascade> {
  if (!isUuid(id)) throw new NotFoundError('cascade');
  return toCascade(await readRows(client, organizationId, id));
}

function toCascade({ cascade, recipients, steps, counts }: Awaited<ReturnType<typeof readRows>>): schedulerV1.Cascade {
  const stepsOf = new Map<string, schedulerV1.RecipientStep[]>();
  for (const step of steps) {
    const list = stepsOf.get(step.recipient_id) ?? [];
    list.push(toStep(step));
    stepsOf.set(step.recipient_id, list);
  }
  return {
    id: cascade.id,
    organizationId: cascade.organization_id,
    status: cascade.status,
    externalId: cascade.external_id ?? '',
    hasExternalId: cascade.external_id !== null,
    name: cascade.name,
    locationId: cascade.location_id,
    flowId: cascade.flow_id ?? '',
    channel: cascade.channel ?? '',
    counts: countList(counts),
    recipients: recipients.map((recipient) => ({
      id: recipient.id,
      name: recipient.name,
      email: recipient.email,
      phone: recipient.phone,
      contactExternalId: recipient.contact_external_id,
      status: recipient.status,
      finishReason: recipient.finish_reason ?? '',
      rating: recipient.rating ?? 0,
      feedback: recipient.feedback ?? '',
      ratedAt: recipient.rated_at ?? undefined,
      finishedAt: recipient.finished_at ?? undefined,
      windowClosesAt: recipient.window_closes_at ?? undefined,
      steps: stepsOf.get(recipient.id) ?? [],
      reviewRequestId: recipient.review_request_id,
      openedAt: recipient.opened_at ?? undefined,
    })),
    createdAt: cascade.created_at,
    finishedAt: cascade.finished_at ?? undefined,
  };
}
