import { counter, type Logger, type Pool } from '@rrs/runtime';
import { resultTimedOut, type Timing } from './engine';
import { Wakeable } from './notifier';
import { claimTimedOut, dbNow, saveStates, type LoadedRecipient } from './store';

const timedOut = counter({
  name: 'scheduler_step_result_timeouts_total',
  help: 'Dispatched steps that got no result in time, by action (redispatched, failed).',
  labelNames: ['action'],
});

export interface ResultWatchdogOptions {
  pool: Pool;
  logger: Logger;
  minuteMs: number;
  /** Flow minutes a dispatched step may wait for its result. */
  timeoutMinutes: number;
  /** Dispatches of a step without a result before it fails `no_result` (1 = never redispatched). */
  maxAttempts: number;
  batchSize?: number;
  /** Time between sweeps; default a quarter of the timeout, between 50 ms and 60 s. */
  intervalMs?: number;
}

export interface RunningWatchdog {
  stop(): Promise<void>;
  sweepOnce(): Promise<number>;
}

/**
 * Finds steps dispatched more than the timeout ago with no result, claims them with their recipients
 * (SKIP LOCKED, so replicas share and never act twice), and redispatches or fails each one in the same
 * transaction. A redispatched step is `scheduled` again, due now: the dispatcher checks its conditions
 * and publishes it as the next attempt (a new Nats-Msg-Id, the same sender step id).
 */
export function startResultWatchdog(o: ResultWatchdogOptions): RunningWatchdog {
  const timeoutMs = o.timeoutMinutes * o.minuteMs;
  const batchSize = o.batchSize ?? 500;
  const intervalMs = o.intervalMs ?? Math.min(60_000, Math.max(50, Math.floor(timeoutMs / 4)));
  const wakeable = new Wakeable();
  let running = true;

  async function sweepOnce(): Promise<number> {
    const client = await o.pool.connect();
    let released = false;
    try {
      await client.query('BEGIN');
      const now = await dbNow(client);
      const { states, steps } = await claimTimedOut(client, new Date(now.getTime() - timeoutMs), batchSize);
      if (steps.length) {
        const t: Timing = { now, minuteMs: o.minuteMs };
        const byStep = new Map<string, LoadedRecipient>();
        for (const state of states.values()) for (const s of state.steps) byStep.set(s.id, state);
        for (const { stepId, timeouts } of steps) {
          const state = byStep.get(stepId);
          const step = state?.steps.find((s) => s.id === stepId);
          if (!state || !step) continue;
          const last = timeouts >= o.maxAttempts;
          resultTimedOut(state, step, last, t);
          timedOut.inc({ action: last ? 'failed' : 'redispatched' });
          o.logger.warn({ stepId, attempt: step.attempt, timeouts, action: last ? 'failed' : 'redispatched' }, 'no result for a dispatched step');
        }
        await saveStates(client, states.values(), now);
      }
      await client.query('COMMIT');
      return steps.length;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release(err as Error);
      released = true;
      throw err;
    } finally {
      if (!released) client.release();
    }
  }

  const loop = (async () => {
    while (running) {
      let wait = intervalMs;
      try {
        if ((await sweepOnce()) >= batchSize) wait = 0;
      } catch (err) {
        o.logger.warn({ err }, 'result watchdog sweep failed');
      }
      if (running && wait > 0) await wakeable.sleep(wait);
    }
  })();

  return {
    sweepOnce,
    async stop() {
      running = false;
      wakeable.wake();
      await loop;
    },
  };
}
