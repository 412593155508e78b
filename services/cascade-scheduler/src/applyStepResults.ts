import { busV1, isOneOf, OPT_OUT_REASONS } from '@rrs/proto';
import { counter, inCoalescedTransaction, queryEach, sqlArray, type Pool, type PoolClient, type QueryResult, type Statement } from '@rrs/runtime';
import { recordSent, type PersonEvent } from './cooldown';
import { applyResult, stop, type Outcome, type StepState, type Timing } from './engine';
import { isUuid } from './ids';
import { recordOptOut } from './optOutLedger';
import { readStates, saveStates, type LoadedRecipient } from './recipientStore';

const applied = counter({ name: 'scheduler_step_results_total', help: 'Step results received from senders, by outcome.', labelNames: ['outcome'] });

const OUTCOMES: Partial<Record<busV1.StepOutcome, Outcome>> = {
  [busV1.StepOutcome.STEP_OUTCOME_SENT]: 'SENT',
  [busV1.StepOutcome.STEP_OUTCOME_FAILED]: 'FAILED',
  [busV1.StepOutcome.STEP_OUTCOME_NO_BALANCE]: 'NO_BALANCE',
  [busV1.StepOutcome.STEP_OUTCOME_UNREACHABLE]: 'UNREACHABLE',
  [busV1.StepOutcome.STEP_OUTCOME_DELIVERED]: 'DELIVERED',
  [busV1.StepOutcome.STEP_OUTCOME_UNDELIVERED]: 'UNDELIVERED',
};

/**
 * The recipient step a result belongs to, from its attempt id `<step row id>:<attempt>` (the step id a
 * sender sees differs on reroute hops); null for a result that is not one of ours.
 */
export function rowIdOf(result: busV1.StepResult): string | null {
  const id = result.attemptId.slice(0, result.attemptId.lastIndexOf(':'));
  return isUuid(id) ? id : null;
}

/**
 * Records each (attempt, outcome) once: the statement, and the results it found fresh (seen for the
 * first time) from its answer.
 */
function recordFresh(results: busV1.StepResult[]): { statement: Statement; fresh(answer: QueryResult): busV1.StepResult[] } {
  const outcomes = results.map((result) => busV1.stepOutcomeToJSON(result.outcome));
  return {
    statement: {
      text: `INSERT INTO step_results (attempt_id, outcome, step_id, channel, reason, provider_message_id)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
     ON CONFLICT DO NOTHING RETURNING attempt_id, outcome`,
      values: [
        sqlArray(results.map((result) => result.attemptId)),
        sqlArray(outcomes),
        sqlArray(results.map((result) => result.stepId)),
        sqlArray(results.map((result) => result.channel)),
        sqlArray(results.map((result) => result.reason)),
        sqlArray(results.map((result) => result.providerMessageId)),
      ],
    },
    fresh(answer) {
      const isFresh = new Set((answer.rows as Array<{ attempt_id: string; outcome: string }>).map((row) => `${row.attempt_id}|${row.outcome}`));
      return results.filter((result, i) => isFresh.has(`${result.attemptId}|${outcomes[i]}`));
    },
  };
}

/**
 * Applies a batch of step results in one transaction. A result is recorded once per (attempt, outcome)
 * in `step_results` in the same transaction that applies it, so a redelivered message changes nothing.
 * Recipients are locked in id order, so concurrent batches never deadlock. Returns the results applied
 * now (not seen before).
 *
 * Two requests to PostgreSQL per batch (a coalesced transaction): BEGIN, the recording, the locking
 * reads and the clock together; then every write, the notifications and COMMIT together. The
 * recipients of every result of the batch are locked, also those of results seen before (a
 * redelivery, rare): the recording and the reads travel together, before its answer is known.
 */
export async function applyStepResults(pool: Pool, results: busV1.StepResult[], minuteMs: number): Promise<busV1.StepResult[]> {
  return inCoalescedTransaction(pool, async (client) => {
    const recording = recordFresh(results);
    const stepIds = [...new Set(results.map(rowIdOf).filter((id): id is string => id !== null))];
    if (stepIds.length === 0) return recording.fresh((await queryEach(client, [recording.statement]))[0]);
    const read = await readStates(client, { ofSteps: stepIds }, { lock: 'wait', before: [recording.statement] });
    const toApply = recording.fresh(read.before[0]);
    const states = read.states;
    const ownerOf = new Map<string, { state: LoadedRecipient; step: StepState }>();
    for (const state of states.values()) for (const step of state.steps) ownerOf.set(step.id, { state, step });
    const timing: Timing = { now: read.now, minuteMs };
    const sentTo: PersonEvent[] = [];
    for (const result of toApply) {
      const found = ownerOf.get(rowIdOf(result) ?? '');
      if (!found) continue;
      if (result.outcome === busV1.StepOutcome.STEP_OUTCOME_OPTED_OUT) {
        await applyOptOut(client, found.state, result, timing);
        continue;
      }
      if (result.outcome === busV1.StepOutcome.STEP_OUTCOME_SENT) sentTo.push({ organizationId: found.state.recipient.organizationId, person: found.state.recipient });
      // An outcome this version does not know must not leave the step dispatched forever.
      const known = OUTCOMES[result.outcome];
      const outcome = known ?? 'FAILED';
      applyResult(found.state, found.step, result.attemptId, outcome, known ? result.reason : `unknown_outcome: ${String(result.outcome)}`, timing, result.provider ?? '', result.at);
      applied.inc({ outcome });
    }
    await recordSent(client, sentTo, timing.now);
    await saveStates(client, states.values(), timing.now);
    return toApply;
  });
}

/**
 * A provider reported that the person refused further messages (a STOP reply, a spam complaint) or that
 * the address is dead (a hard bounce): the person enters the opt-out ledger and the recipient finishes
 * `unsubscribed`. The message itself already went out: the step keeps its own status.
 */
async function applyOptOut(client: PoolClient, state: LoadedRecipient, result: busV1.StepResult, timing: Timing): Promise<void> {
  const source = isOneOf(OPT_OUT_REASONS, result.reason) ? result.reason : 'complaint';
  await recordOptOut(client, { organizationId: state.recipient.organizationId, person: state.recipient, channel: result.channel, source, recipientId: state.recipient.id });
  stop(state, 'unsubscribed', timing);
  applied.inc({ outcome: 'OPTED_OUT' });
}
