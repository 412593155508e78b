import { CASCADE_COUNT_KEYS, type CascadeCountKey, type FinishReason, type schedulerV1 } from '@rrs/proto';
import { inTransaction, NotFoundError, type Pool } from '@rrs/runtime';
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

const PENDING: ReadonlySet<StepStatus> = new Set(['pending', 'scheduled', 'dispatched']);
const STEP_COUNT_OF: Partial<Record<StepStatus, CascadeCountKey>> = { sent: 'stepsSent', failed: 'stepsFailed', skipped: 'stepsSkipped' };
/** A sent step's delivery receipt: `undelivered: <reason>` is what an UNDELIVERED receipt leaves on it. */
const UNDELIVERED_PREFIX = 'undelivered';
/** The `counts` key of each finish reason (keys are camelCase). */
const FINISH_COUNT_OF: Record<FinishReason, CascadeCountKey> = {
  rated: 'rated', exhausted: 'exhausted', unreachable: 'unreachable', unsubscribed: 'unsubscribed', canceled: 'canceled', cooldown: 'cooldown', no_consent: 'noConsent',
};

function toStep(step: StepRow): schedulerV1.RecipientStep {
  const [dueAt, sentAt, skippedAt, dispatchedAt, deliveredAt] = [step.due_at, step.sent_at, step.skipped_at, step.dispatched_at, step.delivered_at].map((at) => at ?? undefined);
  const reroutes = step.reroutes.map((hop) => ({ fromChannel: hop.from, toChannel: hop.to, reason: hop.reason }));
  return { order: step.step_order, channel: step.channel, status: step.status, dueAt, sentAt, skippedAt, dispatchedAt, deliveredAt, reason: step.reason ?? '', reroutes, sentChannel: step.sent_channel, provider: step.provider ?? '' };
}

/**
 * The cascade, its recipients and their steps as one snapshot (REPEATABLE READ): read by separate
 * statements under READ COMMITTED, a change committed between them (a recipient stopped and its steps
 * canceled) showed half of itself — a finished recipient beside a step still scheduled.
 */
async function readAsOfOneMoment(pool: Pool, organizationId: string, id: string) {
  return inTransaction(pool, async (client) => {
    await client.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY');
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
    const { rows: steps } = await client.query<StepRow>(
      `SELECT recipient_id, step_order, channel, status, due_at, sent_at, skipped_at, dispatched_at, delivered_at, reason, reroutes, sent_channel, provider
         FROM recipient_steps WHERE cascade_id = $1 ORDER BY recipient_id, step_order`,
      [id],
    );
    return { cascade, recipients, steps };
  });
}

/**
 * A cascade as GET /cascades/{id} shows it: its recipients with their steps, and the `counts` (every
 * key of CASCADE_COUNT_KEYS, 0 when none). `not_found` for an unknown id or another organization's
 * cascade.
 */
export async function readCascade(pool: Pool, organizationId: string, id: string): Promise<schedulerV1.Cascade> {
  if (!isUuid(id)) throw new NotFoundError('cascade');
  const { cascade, recipients, steps } = await readAsOfOneMoment(pool, organizationId, id);
  const counts = Object.fromEntries(CASCADE_COUNT_KEYS.map((key) => [key, 0])) as Record<CascadeCountKey, number>;
  counts.recipients = cascade.recipients_total;
  counts.queued = cascade.recipients_total - cascade.skipped;
  counts.skipped = cascade.skipped;
  const stepsOf = new Map<string, schedulerV1.RecipientStep[]>();
  for (const step of steps) {
    const list = stepsOf.get(step.recipient_id) ?? [];
    list.push(toStep(step));
    stepsOf.set(step.recipient_id, list);
    const countKey = PENDING.has(step.status) ? 'stepsPending' : STEP_COUNT_OF[step.status];
    if (countKey) counts[countKey]++;
    if (step.delivered_at) counts.stepsDelivered++;
    else if (step.status === 'sent' && step.reason?.startsWith(UNDELIVERED_PREFIX)) counts.stepsUndelivered++;
  }
  for (const recipient of recipients) {
    counts[recipient.status as CascadeCountKey]++;
    if (recipient.finish_reason) counts[FINISH_COUNT_OF[recipient.finish_reason as FinishReason]]++;
    if (recipient.opened_at) counts.opened++;
    if (recipient.feedback) counts.feedback++;
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
    counts: CASCADE_COUNT_KEYS.map((key) => ({ key, value: counts[key] })),
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
