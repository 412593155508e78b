import { join } from 'node:path';
import { busV1 } from '@rrs/proto';
import { LaneBatcher, migrate, openServiceDatabase, sqlArray, SSD_PLANNER_SETTINGS, type Pool, type QueryResult, type ServiceContext, type Statement } from '@rrs/runtime';
import type { SendResult } from './result';

export const SENDER_KIT_MIGRATIONS_DIR = join(__dirname, '..', 'migrations');

/** Claims (or completions) written by one statement at most. */
export const SEND_LOG_BATCH = 500;

/**
 * How long a completion may wait for others to share its request while more of the sender's provider
 * calls are still out (`lingerWhile`). The message is already with the provider; only its ack and
 * result wait, so a few milliseconds cost nothing a customer sees, while a request of its own per
 * provider answer was most of a sender's PostgreSQL commits when a provider's connection cap (SMSC:
 * 14) trickles answers in. With no call out (a fast provider, the sink) nothing would join it: it goes
 * at once, since the steps in flight wait for their completions before new ones are pulled.
 */
export const COMPLETION_LINGER_MS = 10;

/** What to do with a delivered step, decided by its row in the send log. */
export type Claim =
  /**
   * Nobody has recorded an outcome: send it now. `resumed` = an earlier provider call for it ended without
   * a recorded outcome (its holder died, or the call failed in a way that does not prove the provider
   * refused it), so the provider may already have the message.
   */
  | {
      kind: 'send';
      resumed: boolean;
      /**
       * Providers whose earlier call may have taken the message and could not say (recorded by `release`);
       * empty when none were recorded (with `resumed`: the holder died mid-call, which provider is unknown).
       */
      maybeWith: string[];
    }
  /** Its outcome is recorded: publish that again (the publish is deduplicated), never send again. */
  | { kind: 'done'; result: SendResult }
  /** Another delivery of the same step is being sent right now: look again after `retryInMs`. */
  | { kind: 'busy'; retryInMs: number };

export interface LoggedSend {
  stepId: string;
  attemptId: string;
  channel: string;
  organizationId: string;
  result: SendResult;
}

/**
 * The send log of one sender, in the sender's own schema. The check and the record sit around the
 * provider call: `claim` before it (a row `sending` with a lease), `complete` after it. A redelivered
 * step whose outcome is recorded is therefore never sent again. The sender holds an outcome it could
 * not record and retries the write (sender.ts), so the only window where the provider may have the
 * message without a record is the process dying between the call and the record; the next claim then
 * says `resumed`, and the adapter asks its provider first where the provider can say (docs/channels.md).
 */
export class SendLog {
  /*
   * Claims and completions are written in batches (LaneBatcher: what the sender's handlers asked in the
   * same event-loop turn or while the previous request ran), and a completion batch and a claim batch
   * that wait together go in one request — two statements, one implicit transaction — so the send log
   * costs a fraction of a round trip per step instead of two. Batching changes no order that "never
   * sent twice" relies on, because each step still awaits its own row:
   *   - a step is sent only after the request holding its claim committed and returned its row as
   *     claimed (a conflicting row that is `done` or under a live lease is never claimed);
   *   - its result is published, and its message acked, only after the request holding its
   *     completion committed; a failed request fails every claim and completion in it: each of those
   *     steps is nak'ed (a claim: nothing was sent) or held and its write retried (a completion,
   *     sender.ts), never acked unrecorded.
   * Completions go before claims in a request: a claim of a step completed in the same request sees it
   * `done`. A batch never holds one step twice (an `ON CONFLICT DO UPDATE` may touch a row once per
   * statement); rows are claimed in step id order, so two replicas' overlapping batches wait for each
   * other rather than deadlock.
   */
  private readonly submitCompletion: (item: { stepId: string; result: SendResult }) => Promise<void>;
  private readonly submitClaim: (item: { step: busV1.StepDue; leaseMs: number }) => Promise<Claim>;

  constructor(private readonly pool: Pool) {
    const batches = new LaneBatcher(pool, { maxBatch: SEND_LOG_BATCH });
    this.submitCompletion = batches.lane(
      { key: (item) => item.stepId, statement: completionStatement, answers: (_result, items) => items.map(() => undefined) },
      { lingerMs: COMPLETION_LINGER_MS, lingerWhile: () => this.atProvider > 0 },
    );
    this.submitClaim = batches.lane({ key: (item) => item.step.stepId, statement: claimStatement, answers: (result, items) => this.claimAnswers(result, items) });
  }

  /** Provider calls out now, of every sender using this log (see COMPLETION_LINGER_MS). */
  private atProvider = 0;

  /** Wraps a claimed step's provider call, so completions know more answers are on their way. */
  async atTheProvider<T>(call: () => Promise<T>): Promise<T> {
    this.atProvider++;
    try {
      return await call();
    } finally {
      this.atProvider--;
    }
  }

  claim(step: busV1.StepDue, leaseMs: number): Promise<Claim> {
    return this.submitClaim({ step, leaseMs });
  }

  /** Records the outcome; from now on the step is never sent again. */
  complete(stepId: string, result: SendResult): Promise<void> {
    return this.submitCompletion({ stepId, result });
  }

  private async claimAnswers(claimed: QueryResult, items: Array<{ step: busV1.StepDue; leaseMs: number }>): Promise<Claim[]> {
    const answers = new Map<string, Claim>();
    for (const row of claimed.rows as Array<{ step_id: string; resumed: boolean; maybe_with: string[] }>) answers.set(row.step_id, { kind: 'send', resumed: row.resumed, maybeWith: row.maybe_with });
    const notClaimed = items.filter((item) => !answers.has(item.step.stepId)).map((item) => item.step.stepId);
    if (notClaimed.length > 0) {
      const current = await this.pool.query<{ step_id: string; state: string; outcome: string | null; reason: string | null; provider_message_id: string | null; parts: number; provider: string | null; wait_ms: number }>(
        `SELECT step_id, state, outcome, reason, provider_message_id, parts, provider,
           GREATEST(0, EXTRACT(EPOCH FROM (lease_until - now())) * 1000)::int AS wait_ms
         FROM send_log WHERE step_id = ANY($1::text[])`,
        [notClaimed],
      );
      for (const row of current.rows) {
        answers.set(
          row.step_id,
          row.state === 'done'
            ? { kind: 'done', result: { outcome: row.outcome as busV1.StepOutcome, reason: row.reason ?? undefined, providerMessageId: row.provider_message_id ?? undefined, parts: row.parts, provider: row.provider ?? undefined } }
            : { kind: 'busy', retryInMs: Math.max(100, row.wait_ms) },
        );
      }
    }
    return items.map((item) => {
      const answer = answers.get(item.step.stepId);
      // Rows are deleted only SEND_LOG_KEEP_DAYS after their claim (sendHistory.ts), long after any delivery of
      // their step, so a conflict that returned nothing means the row is there.
      if (!answer) throw new Error(`send log row of step ${item.step.stepId} not found after a conflicting insert`);
      return answer;
    });
  }

  /**
   * A retryable failure: the next delivery may send at once. When the failure does not prove the provider
   * refused the message (`maybeDelivered`: no answer, a lost connection, a 5xx), the row stays `sending`
   * with its lease ended, so that delivery's claim says `resumed`; otherwise it becomes `retry`.
   */
  async release(stepId: string, options: { maybeDelivered?: boolean; provider?: string } = {}): Promise<void> {
    if (options.maybeDelivered && options.provider) {
      await this.pool.query(
        `UPDATE send_log SET lease_until = now(), updated_at = now(),
           maybe_with = CASE WHEN $2 = ANY(maybe_with) THEN maybe_with ELSE array_append(maybe_with, $2) END
         WHERE step_id = $1 AND state = 'sending'`,
        [stepId, options.provider],
      );
      return;
    }
    await this.pool.query(
      options.maybeDelivered
        ? `UPDATE send_log SET lease_until = now(), updated_at = now() WHERE step_id = $1 AND state = 'sending'`
        : `UPDATE send_log SET state = 'retry', maybe_with = '{}', updated_at = now() WHERE step_id = $1 AND state = 'sending'`,
      [stepId],
    );
  }

  /**
   * Gives a step up after its last delivery: the outcome and the dead letter in one statement, so a retry
   * after a write whose answer was lost neither writes a second dead letter nor leaves one without the other.
   */
  async failDeadLettered(step: busV1.StepDue, result: SendResult, deadLetterReason: string, deliveries: number): Promise<void> {
    await this.pool.query(
      `WITH failed AS (
         UPDATE send_log SET state = 'done', outcome = $5, reason = $6, provider_message_id = NULL, parts = 0, updated_at = now()
         WHERE step_id = $1 AND state <> 'done' RETURNING step_id
       )
       INSERT INTO dead_letters (step_id, attempt_id, channel, reason, deliveries, step)
       SELECT $1, $2, $3, $4, $7, $8 FROM failed`,
      [step.stepId, step.attemptId, step.channel, deadLetterReason, result.outcome, result.reason ?? null, deliveries, Buffer.from(busV1.StepDue.encode(step).finish())],
    );
  }

  /** A dead letter for a step whose handling failed before any outcome was known (its send log unreachable). */
  async deadLetter(step: busV1.StepDue, reason: string, deliveries: number): Promise<void> {
    await this.pool.query(
      `INSERT INTO dead_letters (step_id, attempt_id, channel, reason, deliveries, step) VALUES ($1, $2, $3, $4, $5, $6)`,
      [step.stepId, step.attemptId, step.channel, reason, deliveries, Buffer.from(busV1.StepDue.encode(step).finish())],
    );
  }

  /** The send a provider's receipt refers to, by the provider's message id. */
  async findByProviderMessageId(providerMessageId: string): Promise<LoggedSend | null> {
    const { rows } = await this.pool.query<{ step_id: string; attempt_id: string; channel: string; organization_id: string; outcome: string; reason: string | null; parts: number; provider: string | null }>(
      `SELECT step_id, attempt_id, channel, organization_id, outcome, reason, parts, provider FROM send_log WHERE provider_message_id = $1 AND state = 'done' LIMIT 1`,
      [providerMessageId],
    );
    const sent = rows[0];
    if (!sent) return null;
    return { stepId: sent.step_id, attemptId: sent.attempt_id, channel: sent.channel, organizationId: sent.organization_id, result: { outcome: sent.outcome as busV1.StepOutcome, reason: sent.reason ?? undefined, providerMessageId, parts: sent.parts, provider: sent.provider ?? undefined } };
  }
}

const byStepId = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Claims a batch of steps (rows `sending` under a lease); returns the rows it claimed. */
function claimStatement(items: Array<{ step: busV1.StepDue; leaseMs: number }>): Statement {
  const sorted = [...items].sort((a, b) => byStepId(a.step.stepId, b.step.stepId));
  return {
    text: `WITH input AS (
         SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::double precision[])
           WITH ORDINALITY AS i(step_id, attempt_id, channel, organization_id, lease_ms, n)
       ),
       prior AS (SELECT step_id, state FROM send_log WHERE step_id = ANY($1::text[])),
       claimed AS (
         INSERT INTO send_log (step_id, attempt_id, channel, organization_id, state, lease_until)
         SELECT step_id, attempt_id, channel, organization_id, 'sending', now() + make_interval(secs => lease_ms / 1000)
         FROM input ORDER BY n
         ON CONFLICT (step_id) DO UPDATE SET
           state = 'sending', attempt_id = EXCLUDED.attempt_id, lease_until = EXCLUDED.lease_until,
           attempts = send_log.attempts + 1, updated_at = now()
         WHERE send_log.state = 'retry' OR (send_log.state = 'sending' AND send_log.lease_until <= now())
         RETURNING send_log.step_id, send_log.maybe_with
       )
       SELECT claimed.step_id, COALESCE(prior.state = 'sending', false) AS resumed, claimed.maybe_with
       FROM claimed LEFT JOIN prior USING (step_id)`,
    values: [sqlArray(sorted.map((i) => i.step.stepId)), sqlArray(sorted.map((i) => i.step.attemptId)), sqlArray(sorted.map((i) => i.step.channel)), sqlArray(sorted.map((i) => i.step.organizationId)), sqlArray(sorted.map((i) => i.leaseMs))],
  };
}

/** Records the outcomes of a batch of steps (rows `done`). */
function completionStatement(items: Array<{ stepId: string; result: SendResult }>): Statement {
  const sorted = [...items].sort((a, b) => byStepId(a.stepId, b.stepId));
  return {
    text: `UPDATE send_log SET state = 'done', outcome = u.outcome, reason = u.reason, provider_message_id = u.provider_message_id,
         parts = u.parts, provider = u.provider, address = coalesce(u.address, send_log.address), updated_at = now()
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[])
         AS u(step_id, outcome, reason, provider_message_id, parts, provider, address)
       WHERE send_log.step_id = u.step_id`,
    // Array literals written by sqlArray: node-pg's own array serialization was the send path's largest
    // allocation after the messages themselves.
    values: [
      sqlArray(sorted.map((i) => i.stepId)),
      sqlArray(sorted.map((i) => i.result.outcome)),
      sqlArray(sorted.map((i) => i.result.reason ?? null)),
      sqlArray(sorted.map((i) => i.result.providerMessageId ?? null)),
      sqlArray(sorted.map((i) => i.result.parts ?? 0)),
      sqlArray(sorted.map((i) => i.result.provider ?? null)),
      sqlArray(sorted.map((i) => i.result.address ?? null)),
    ],
  };
}

/** A sender's own tables beside the send log, in its schema (numbered apart from sender-kit's; component default `service`). */
export interface SenderMigrations {
  dir: string;
  component?: string;
}

/** Opens a sender's send log: a pool on its own schema, migrated, closed on shutdown, checked by readiness. */
export async function openSendLog(
  options: { databaseUrl: string; schema: string; pool?: Pool; migrations?: SenderMigrations[] },
  ctx: ServiceContext,
): Promise<{ log: SendLog; pool: Pool }> {
  const migrations = [{ dir: SENDER_KIT_MIGRATIONS_DIR, component: 'sender-kit' }, ...(options.migrations ?? [])];
  // A pool handed in (all-in-one, tests) belongs to the caller, who closes and checks it.
  if (options.pool) {
    for (const set of migrations) await migrate(options.pool, { schema: options.schema, ...set, logger: ctx.logger });
    return { log: new SendLog(options.pool), pool: options.pool };
  }
  const pool = await openServiceDatabase(ctx, { url: options.databaseUrl, schema: options.schema, max: 10, migrations, settings: SSD_PLANNER_SETTINGS });
  return { log: new SendLog(pool), pool };
}
