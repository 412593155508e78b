import { counter, histogram, startDueWorkLoop, type Leadership, type Logger, type Pool } from '@rrs/runtime';

/**
 * How long a send log row is kept (days from its first claim). A step id reaches a sender again only
 * while the step is being worked on: JetStream redelivers it up to SENDER_MAX_DELIVER (10) times over a
 * few minutes of backoff, and the scheduler's result watchdog dispatches it again (same sender step id)
 * only while it waits for the step's result, STEP_RESULT_TIMEOUT_MINUTES × STEP_RESULT_MAX_ATTEMPTS
 * (30 × 3 = 90 minutes, longer only while the sender's queue is backed up), after which the step is
 * failed `no_result` and never dispatched again. 30 days is hundreds of times that, so a row pruned is
 * one no delivery can still ask about. The same rows serve delivery receipts (providers report within
 * hours) and STOP replies: a STOP answering an SMS sent more than 30 days ago matches nothing.
 */
export const SEND_LOG_KEEP_DAYS = 30;
/** How long a dead letter is kept for the operator's inspection (docs/operations.md, "Send failures and dead letters"). */
export const DEAD_LETTER_KEEP_DAYS = 30;
/** Rows per DELETE: short statements, each holding few row locks, between the send path's batches. */
export const SEND_HISTORY_PRUNE_BATCH = 1_000;
/** DELETEs per table in one round at most; a round with more left goes again after a pause. */
const MAX_BATCHES_PER_ROUND = 20;
const DAY_MS = 86_400_000;

/**
 * The prune statements, by the created_at indexes (sender-kit migration 0004), oldest first: $1 the age
 * in ms, $2 the batch size. Exported for the plan check (test/sendHistory.test.ts).
 */
export const PRUNE_SEND_LOG_SQL = `DELETE FROM send_log WHERE step_id = ANY (ARRAY(
    SELECT step_id FROM send_log WHERE created_at < now() - make_interval(secs => $1 / 1000.0) ORDER BY created_at LIMIT $2))`;
export const PRUNE_DEAD_LETTERS_SQL = `DELETE FROM dead_letters WHERE id = ANY (ARRAY(
    SELECT id FROM dead_letters WHERE created_at < now() - make_interval(secs => $1 / 1000.0) ORDER BY created_at LIMIT $2))`;

const pruned = counter({ name: 'sender_history_pruned_rows_total', help: 'Send log rows and dead letters pruned past their age, by table.', labelNames: ['table'] });
const roundSeconds = histogram({ name: 'sender_history_prune_round_seconds', help: 'Duration of one send history pruning round.', buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30] });

export interface SendHistoryOptions {
  pool: Pool;
  logger: Logger;
  /** Ages (ms); default SEND_LOG_KEEP_DAYS and DEAD_LETTER_KEEP_DAYS days. */
  sendLogKeepMs?: number;
  deadLetterKeepMs?: number;
  batchSize?: number;
}

/** One pruning round: each table's rows past their age, a batch per statement. Resolves whether more is left. */
export async function pruneSendHistory(options: SendHistoryOptions): Promise<{ sendLog: number; deadLetters: number; more: boolean }> {
  const batch = options.batchSize ?? SEND_HISTORY_PRUNE_BATCH;
  const started = process.hrtime.bigint();
  const prune = async (sql: string, keepMs: number): Promise<{ rows: number; more: boolean }> => {
    let rows = 0;
    for (let round = 0; round < MAX_BATCHES_PER_ROUND; round++) {
      const { rowCount } = await options.pool.query(sql, [keepMs, batch]);
      rows += rowCount ?? 0;
      if ((rowCount ?? 0) < batch) return { rows, more: false };
    }
    return { rows, more: true };
  };
  const sendLog = await prune(PRUNE_SEND_LOG_SQL, options.sendLogKeepMs ?? SEND_LOG_KEEP_DAYS * DAY_MS);
  const deadLetters = await prune(PRUNE_DEAD_LETTERS_SQL, options.deadLetterKeepMs ?? DEAD_LETTER_KEEP_DAYS * DAY_MS);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  pruned.inc({ table: 'send_log' }, sendLog.rows);
  pruned.inc({ table: 'dead_letters' }, deadLetters.rows);
  roundSeconds.observe(seconds);
  const more = sendLog.more || deadLetters.more;
  options.logger.info({ sendLog: sendLog.rows, deadLetters: deadLetters.rows, more, ms: Math.round(seconds * 1000) }, 'send history pruned');
  return { sendLog: sendLog.rows, deadLetters: deadLetters.rows, more };
}

/** Pause after a round that left more (ms): the pruning stays in the background of the send path. */
const PAUSE_WHEN_MORE_MS = 1_000;
export const SEND_HISTORY_PRUNE_EVERY_MS = 3_600_000;

/** The pruning rounds on the housekeeping leader only (one replica prunes): hourly, sooner while more is left. */
export function startSendHistoryPruning(options: SendHistoryOptions & { leader: Pick<Leadership, 'ifLeader'>; everyMs?: number }): { stop(): Promise<void> } {
  let more = false;
  const loop = startDueWorkLoop({
    name: 'send history pruning',
    logger: options.logger,
    idleMs: options.everyMs ?? SEND_HISTORY_PRUNE_EVERY_MS,
    nextDueInMs: async () => (more ? PAUSE_WHEN_MORE_MS : null),
    async round() {
      more = (await options.leader.ifLeader(() => pruneSendHistory(options)))?.more ?? false;
      return false;
    },
  });
  return { stop: () => loop.stop() };
}
