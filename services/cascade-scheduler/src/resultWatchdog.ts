import { stepSubjects } from '@rrs/proto';
import { collapseRepeats, counter, inTransaction, startDueWorkLoop, type Bus, type Logger, type Pool } from '@rrs/runtime';
import { resultTimedOut, type Timing } from './engine';
import { dbNow, loadRecipients, saveStates, type LoadedRecipient } from './recipientStore';
import { channelsWithTimedOutSteps, claimTimedOutSteps } from './sql/dueSteps';

const postponed = counter({
  name: 'scheduler_step_result_timeouts_postponed_total',
  help: "Sweeps that left a channel's timed-out steps alone because its sender still had steps waiting or in progress.",
  labelNames: ['channel'],
});

const timedOut = counter({
  name: 'scheduler_step_result_timeouts_total',
  help: 'Dispatched steps that got no result in time, by action (redispatched, failed).',
  labelNames: ['action'],
});

export interface ResultWatchdogOptions {
  pool: Pool;
  /** Asked whether a channel's sender still has steps waiting or in progress (then nothing of that channel is redispatched). */
  bus: Pick<Bus, 'pending'>;
  logger: Logger;
  minuteMs: number;
  /** Flow minutes a dispatched step may wait for its result. */
  timeoutMinutes: number;
  /** Dispatches of a step without a result before it fails `no_result` (1 = never redispatched). */
  maxAttempts: number;
  batchSize?: number;
  /** Time between sweeps; default a quarter of the timeout, between 50 ms and 60 s. */
  intervalMs?: number;
  /** Steps whose results this process has received and not yet applied (the step results consumer's `heldSteps`): never timed out. */
  resultsHeld?: () => Iterable<string>;
}

export interface RunningWatchdog {
  stop(): Promise<void>;
  sweepOnce(): Promise<number>;
}

/**
 * Finds steps dispatched more than the timeout ago with no result, claims them with their recipients
 * (SKIP LOCKED, so replicas share and never act twice), and redispatches or fails each one in the same
 * transaction. A redispatched step is `scheduled` again, due now: the dispatcher checks its conditions
 * and publishes it as the next attempt (a new Nats-Msg-Id, the same sender step id). Sweeps run on the
 * runtime's due-work loop every `intervalMs` (at once again after a full batch; a failed sweep is
 * retried after the same interval).
 */
export function startResultWatchdog(options: ResultWatchdogOptions): RunningWatchdog {
  const timeoutMs = options.timeoutMinutes * options.minuteMs;
  const batchSize = options.batchSize ?? 500;
  const intervalMs = options.intervalMs ?? Math.min(60_000, Math.max(50, Math.floor(timeoutMs / 4)));

  const warnings = collapseRepeats(options.logger);

  /**
   * The channels whose missing results are really missing: their sender has acked every step it was
   * given (nothing waits in its queue, nothing is in progress), so no result is still on its way. A
   * channel with a backlog (a sender slow, restarting or down) is left alone: its steps are not lost,
   * they are waiting, and redispatching them would only double the queue. When the bus cannot answer,
   * nothing is redispatched this sweep.
   */
  async function pendingOf(durable: string): Promise<number> {
    try {
      return await options.bus.pending('STEPS', durable);
    } catch (err) {
      // No sender ever consumed this subject (no durable yet): nothing can be on its way.
      if (/consumer not found/i.test(String((err as Error)?.message))) return 0;
      throw err;
    }
  }

  async function idleChannels(channels: string[]): Promise<string[]> {
    const idle: string[] = [];
    for (const channel of channels) {
      try {
        let pending = 0;
        // Both of the channel's consumers, bulk and small requests' (stepSubjects).
        for (const { durable } of stepSubjects(channel)) pending += await pendingOf(durable);
        if (pending === 0) idle.push(channel);
        else postponed.inc({ channel });
      } catch (err) {
        warnings.warn({ err, channel }, 'result watchdog could not ask the bus; timed-out steps wait for the next sweep');
        postponed.inc({ channel });
      }
    }
    return idle;
  }

  const sweepOnce = async (): Promise<number> => {
    // The bus is asked before the transaction, so no connection is held during the question.
    const candidates = await channelsWithTimedOutSteps(options.pool, new Date(Date.now() - timeoutMs));
    if (candidates.length === 0) return 0;
    const channels = await idleChannels(candidates);
    if (channels.length === 0) return 0;
    return inTransaction(options.pool, async (client) => {
      const now = await dbNow(client);
      const before = new Date(now.getTime() - timeoutMs);
      // A result received and not yet applied (it waits for its batch) is not missing: its sender has
      // acked the step, so the sender's queue says nothing about it.
      const held = [...(options.resultsHeld?.() ?? [])];
      const steps = await claimTimedOutSteps(client, before, batchSize, channels, held);
      if (steps.length === 0) return 0;
      // The steps' recipients were locked with them.
      const states = await loadRecipients(client, steps.map((step) => step.recipientId));
      const timing: Timing = { now, minuteMs: options.minuteMs };
      const ownerOf = new Map<string, LoadedRecipient>();
      for (const state of states.values()) for (const step of state.steps) ownerOf.set(step.id, state);
      for (const { stepId, timeouts } of steps) {
        const state = ownerOf.get(stepId);
        const step = state?.steps.find((candidate) => candidate.id === stepId);
        if (!state || !step) continue;
        const last = timeouts >= options.maxAttempts;
        resultTimedOut(state, step, last, timing);
        const action = last ? 'failed' : 'redispatched';
        timedOut.inc({ action });
        warnings.warn({ stepId, attempt: step.attempt, timeouts, action, channel: step.sentChannel }, 'no result for a dispatched step');
      }
      await saveStates(client, states.values(), now);
      return steps.length;
    });
  };

  const loop = startDueWorkLoop({
    name: 'result watchdog',
    logger: options.logger,
    idleMs: intervalMs,
    backoff: { baseMs: intervalMs, maxMs: intervalMs },
    round: async () => (await sweepOnce()) >= batchSize,
  });
  return {
    sweepOnce,
    stop: async () => {
      await loop.stop();
      warnings.flush();
    },
  };
}
