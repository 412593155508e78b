import { PLAN_RECIPIENT_QUOTAS, PLANS, type Plan } from '@rrs/proto';
import { counter, RateLimitedError, type Pool, type PoolClient } from '@rrs/runtime';

/*
 * The organizations' recipient budgets (docs/security.md, "Quotas count work"): recipients per minute
 * and per day by plan, for every entry point alike (the public API, the console by hand and by CSV, the
 * CRM connectors, review requests). They live in the scheduler's PostgreSQL, beside the cascades: a start
 * takes its recipients in its own transaction, so a start that rolls back (refused, failed, or answered
 * from its Idempotency-Key) has taken nothing, and every replica of every service draws from one budget.
 */

/** Recipients a plan may create per minute and per day (PLAN_RECIPIENT_QUOTAS unless a deployment overrides them: RECIPIENT_QUOTA_<PLAN>). */
export type RecipientBudgetConfig = Record<Plan, { perMinute: number; perDay: number }>;

/** The two windows, in the order they are taken (the lock order of their rows) and announced. */
export const RECIPIENT_WINDOWS = [
  { name: 'recipients-minute', seconds: 60, budget: 'perMinute' },
  { name: 'recipients-day', seconds: 86_400, budget: 'perDay' },
] as const;

/** One window as the RateLimit fields announce it. */
export interface RecipientWindowState {
  name: string;
  limit: number;
  windowSeconds: number;
  remaining: number;
  resetSeconds: number;
}

const refusals = counter({ name: 'scheduler_recipient_quota_exceeded_total', help: 'Starts refused with recipient_quota_exceeded, by plan.', labelNames: ['plan'] });

/** A plan the scheduler does not know yet (added in contacts first) gets the standard budget. */
function planOf(plan: string): Plan {
  return (PLANS as readonly string[]).includes(plan) ? (plan as Plan) : 'standard';
}

const SECONDS = RECIPIENT_WINDOWS.map((w) => w.seconds);

/*
 * Both windows in one statement: a window row is created with the recipients, restarted when it is over,
 * or added to only while the sum stays within its limit. A window that has no room is left as it was
 * (its row still locked by the statement), so fewer rows come back and the caller's transaction is
 * rolled back. Rows are locked minute first, then day, by every start: no deadlock between two starts.
 */
const TAKE = `
INSERT INTO recipient_budgets AS b (organization_id, window_seconds, window_start, used)
SELECT $1::uuid, w.seconds, now(), $2::int FROM unnest($3::int[], $4::bigint[]) AS w(seconds, lim) WHERE $2::int <= w.lim
ON CONFLICT (organization_id, window_seconds) DO UPDATE
  SET window_start = CASE WHEN b.window_start + make_interval(secs => b.window_seconds) <= now() THEN now() ELSE b.window_start END,
      used = CASE WHEN b.window_start + make_interval(secs => b.window_seconds) <= now() THEN 0 ELSE b.used END + excluded.used
  WHERE (CASE WHEN b.window_start + make_interval(secs => b.window_seconds) <= now() THEN 0 ELSE b.used END) + excluded.used
        <= (SELECT w.lim FROM unnest($3::int[], $4::bigint[]) AS w(seconds, lim) WHERE w.seconds = b.window_seconds)
RETURNING window_seconds, used, ceil(extract(epoch FROM b.window_start + make_interval(secs => b.window_seconds) - now()))::int AS reset_seconds`;

/** What is used now in each window (0 in a window that is over), without taking anything. */
const READ = `
SELECT window_seconds,
       CASE WHEN window_start + make_interval(secs => window_seconds) <= now() THEN 0 ELSE used END AS used,
       CASE WHEN window_start + make_interval(secs => window_seconds) <= now() THEN window_seconds
            ELSE ceil(extract(epoch FROM window_start + make_interval(secs => window_seconds) - now()))::int END AS reset_seconds
FROM recipient_budgets WHERE organization_id = $1 AND window_seconds = ANY($2::int[])`;

interface WindowRow {
  window_seconds: number;
  used: number;
  reset_seconds: number;
}

export class RecipientBudgets {
  constructor(private readonly config: RecipientBudgetConfig = PLAN_RECIPIENT_QUOTAS) {}

  private limits(plan: Plan): number[] {
    return RECIPIENT_WINDOWS.map((w) => this.config[plan][w.budget]);
  }

  /**
   * Takes `recipients` from both windows of the organization, in the caller's transaction (call it last,
   * just before the commit: the rows stay locked until then), or throws 429 `recipient_quota_exceeded`
   * (the caller's transaction must roll back: a window may have been taken).
   */
  async take(client: PoolClient, organization: { id: string; plan: string }, recipients: number): Promise<RecipientWindowState[]> {
    const plan = planOf(organization.plan);
    const limits = this.limits(plan);
    const { rows } = await client.query<WindowRow>(TAKE, [organization.id, recipients, SECONDS, limits]);
    if (rows.length === RECIPIENT_WINDOWS.length) return this.states(limits, rows);
    // Refused: what each window has left without this request (a window taken above gives its share back in the rollback).
    const taken = new Set(rows.map((r) => r.window_seconds));
    const now = (await client.query<WindowRow>(READ, [organization.id, SECONDS])).rows.map((r) => (taken.has(r.window_seconds) ? { ...r, used: r.used - recipients } : r));
    throw this.refusal(plan, limits, now, recipients);
  }

  /** A dry run: refuses as `take` would, takes nothing; answers the windows as they are. */
  async check(db: Pool | PoolClient, organization: { id: string; plan: string }, recipients: number): Promise<RecipientWindowState[]> {
    const plan = planOf(organization.plan);
    const limits = this.limits(plan);
    const { rows } = await db.query<WindowRow>(READ, [organization.id, SECONDS]);
    const states = this.states(limits, rows);
    if (states.some((w) => w.remaining < recipients)) throw this.refusal(plan, limits, rows, recipients);
    return states;
  }

  private states(limits: number[], rows: WindowRow[]): RecipientWindowState[] {
    return RECIPIENT_WINDOWS.map((w, i) => {
      const row = rows.find((r) => r.window_seconds === w.seconds);
      return { name: w.name, limit: limits[i], windowSeconds: w.seconds, remaining: Math.max(0, limits[i] - (row?.used ?? 0)), resetSeconds: Math.max(1, row?.reset_seconds ?? w.seconds) };
    });
  }

  /**
   * 429 `recipient_quota_exceeded`: the first window without room names the retry (`Retry-After`); the
   * details carry both windows (`windows`, the gateway's RateLimit fields) and the problem's members.
   */
  private refusal(plan: Plan, limits: number[], rows: WindowRow[], recipients: number): RateLimitedError {
    refusals.inc({ plan });
    const windows = this.states(limits, rows);
    const blocking = windows.find((w) => w.remaining < recipients) ?? windows[0];
    const per = blocking.windowSeconds === 60 ? 'minute' : 'day';
    const message = recipients > blocking.limit
      ? `the request has ${recipients} recipients, more than the ${plan} plan's whole budget of ${blocking.limit} per ${per}; split it`
      : `the organization's budget of ${blocking.limit} recipients per ${per} has ${blocking.remaining} left, fewer than the ${recipients} of this request; retry in ${blocking.resetSeconds} s`;
    return new RateLimitedError('recipient_quota_exceeded', message, blocking.resetSeconds, {
      details: { recipients, quota: blocking.name, limit: blocking.limit, remaining: blocking.remaining, windows },
    });
  }
}
