import type { Logger } from 'pino';
import { collapseRepeats } from './logger';
import type { Notifier } from './notifier';

/** A sleep that ends early when `wake()` is called; the due-work loops' only way of waiting. */
export class Wakeable {
  private timer: NodeJS.Timeout | null = null;
  private resolve: (() => void) | null = null;
  private pendingWake = false;
  /** Earliest wake time asked for while not sleeping (a notification racing with the loop's own check). */
  private pendingAt: number | null = null;
  /** When the current sleep ends by timer (ms since epoch); used to ignore wakes for later times. */
  private until = 0;

  sleep(ms: number): Promise<void> {
    if (this.pendingWake) {
      this.pendingWake = false;
      return Promise.resolve();
    }
    let until = Date.now() + ms;
    if (this.pendingAt !== null) {
      until = Math.min(until, this.pendingAt);
      this.pendingAt = null;
    }
    return new Promise((resolve) => {
      this.until = until;
      this.resolve = resolve;
      this.timer = setTimeout(() => this.wake(), Math.max(0, until - Date.now()));
      this.timer.unref();
    });
  }

  /** Whether a sleep is under way (a wake now ends it). */
  get sleeping(): boolean {
    return this.resolve !== null;
  }

  /** Wakes the sleeper now, or when `at` (ms since epoch) is given and is earlier than its timer, at `at`. */
  wake(at?: number): void {
    if (!this.resolve) {
      if (at === undefined || at <= Date.now()) this.pendingWake = true;
      else this.pendingAt = Math.min(this.pendingAt ?? Infinity, at);
      return;
    }
    if (at !== undefined && at > Date.now()) {
      if (at >= this.until) return;
      if (this.timer) clearTimeout(this.timer);
      this.until = at;
      this.timer = setTimeout(() => this.wake(), at - Date.now());
      this.timer.unref();
      return;
    }
    if (this.timer) clearTimeout(this.timer);
    const r = this.resolve;
    this.resolve = null;
    this.timer = null;
    r();
  }
}

/** A reading of the next due time: ms from the database clock then (null: nothing pending), and when it was asked (epoch ms). */
export interface NextDueReading {
  nextDueInMs: number | null;
  askedAt: number;
}

/**
 * What a round found (`round`), and, when it read the next due time itself (with its commit, in the
 * same request), that reading: the loop then waits on it without asking `nextDueInMs`, counted from
 * when it was asked.
 */
export type RoundOutcome = boolean | 'some' | ({ outcome: 'some' | false } & NextDueReading);

export interface DueWorkOptions {
  /** Names the loop in logs (`dispatch`, `outbox relay`, …). */
  name: string;
  logger: Logger;
  /**
   * Does the work due now, in its own transaction(s). Resolves true when there may be more due right
   * now (it took a full batch), so the loop goes again at once and wakes another sleeping loop;
   * `'some'` when it did work but less than a batch — the loop goes again at once only if something is
   * due now (`nextDueInMs` ≤ 0: work that came due during the round), else waits for the next due time;
   * false when it found nothing to do — something due now is held elsewhere, so the loop waits
   * `contendedMs` first.
   */
  round(): Promise<RoundOutcome>;
  /**
   * Milliseconds from this call until the next known due time (≤ 0: due now), or null when nothing is
   * pending. Without it the loop waits `idleMs` between rounds that found no more.
   */
  nextDueInMs?(): Promise<number | null>;
  /** Longest wait between rounds (default 30 000); notifications end a wait early. */
  idleMs?: number;
  /**
   * Wait after a round that took no full batch while something is due now: another loop or replica
   * holds it (SKIP LOCKED), so give it a moment rather than spin. Default 20 ms.
   */
  contendedMs?: number;
  /** Awaited before each round (backpressure); a stop ends the wait. */
  beforeRound?(): Promise<void>;
  /** Backoff after a failed round: `min(maxMs, baseMs · 2^failures)`. Default 100 ms … 5 s. */
  backoff?: { baseMs: number; maxMs: number };
  /** Independent loops running `round` concurrently (default 1). */
  loops?: number;
  /**
   * Wake on these LISTEN channels (a numeric payload = the epoch ms the new work is due): one loop a
   * notification; every loop on reconnect (notifications may have been missed).
   */
  notifier?: Notifier;
  channels?: string[];
  /** A failing round is logged once per cause per this interval, with a count (default 10 000 ms). */
  logIntervalMs?: number;
}

export interface DueWorkLoop {
  /** Something may be due now (or at `at`, epoch ms): end the current wait. */
  wake(at?: number): void;
  /**
   * Work for one round may be there now: wakes one sleeping loop (or, with none asleep, has one go again
   * once its round ends), not all — the others would each find it taken.
   */
  wakeOne(): void;
  /** Stops taking rounds, wakes the sleepers and waits for the rounds in flight. */
  stop(): Promise<void>;
}

/**
 * The one due-work loop of the services (dispatcher, result watchdog, outbox relay, webhook worker):
 * round → more? go again : sleep until the next due time, a notification, or the idle bound; a failed
 * round is retried with backoff, so the loop outlives any outage of its dependencies; its failures are
 * logged once per cause per interval with a count (`collapseRepeats`), not once per round.
 */
export function startDueWorkLoop(options: DueWorkOptions): DueWorkLoop {
  const idleMs = options.idleMs ?? 30_000;
  const contendedMs = options.contendedMs ?? 20;
  const backoff = options.backoff ?? { baseMs: 100, maxMs: 5_000 };
  const failureLog = collapseRepeats(options.logger, { intervalMs: options.logIntervalMs });
  const wakeables = Array.from({ length: Math.max(1, options.loops ?? 1) }, () => new Wakeable());
  const wakeAll = (at?: number) => {
    for (const w of wakeables) w.wake(at);
  };
  /** One sleeping loop (else the first, which goes again once its round ends), now or at `at`. */
  const wakeOne = (at?: number) => {
    (wakeables.find((w) => w.sleeping) ?? wakeables[0]).wake(at);
  };
  // A notification is one round's work: it wakes one loop. Woken all, the others each claimed nothing
  // and, finding the first one's work still due under its lock, came back for it after `contendedMs`
  // (a single-recipient cascade cost three rounds for nothing). A round that finds more wakes the next
  // loop (runLoop), so a backlog still has every loop.
  for (const channel of options.channels ?? []) {
    options.notifier?.on(channel, (payload) => {
      const at = Number(payload);
      wakeOne(payload !== '' && Number.isFinite(at) ? at : undefined);
    });
  }
  options.notifier?.onReconnect(() => wakeAll());

  let running = true;
  let stopped!: () => void;
  const stopping = new Promise<void>((resolve) => (stopped = resolve));

  /**
   * The wait is counted from when the due time was asked, not from when the answer came: the answer's
   * latency (a busy pool, a loaded database: tens of ms) would otherwise be added to every round a timer
   * wakes. Counted from the asking, the wake is early by at most the time the question took to reach the
   * clock that answered it; a round then finds nothing yet and the next wait is what is left.
   */
  async function waitBeforeNext(worked: boolean, reading?: NextDueReading): Promise<number> {
    if (!reading && !options.nextDueInMs) return idleMs;
    const asked = reading?.askedAt ?? Date.now();
    const ms = reading ? reading.nextDueInMs : await options.nextDueInMs!();
    if (ms === null) return idleMs;
    return ms > 0 ? Math.min(idleMs, Math.max(0, ms - (Date.now() - asked))) : worked ? 0 : contendedMs;
  }

  const runLoop = async (wakeable: Wakeable): Promise<void> => {
    let failures = 0;
    while (running) {
      try {
        if (options.beforeRound) await Promise.race([options.beforeRound(), stopping]);
        if (!running) break;
        const outcome = await options.round();
        failures = 0;
        if (outcome === true) {
          wakeables.find((w) => w !== wakeable && w.sleeping)?.wake();
          continue;
        }
        const wait = typeof outcome === 'object' ? await waitBeforeNext(outcome.outcome === 'some', outcome) : await waitBeforeNext(outcome === 'some');
        if (running) await wakeable.sleep(wait);
      } catch (err) {
        failures++;
        const delay = Math.min(backoff.maxMs, backoff.baseMs * 2 ** Math.min(failures, 16));
        failureLog.warn({ err, retryInMs: delay, loop: options.name }, `${options.name} round failed`);
        if (running) await wakeable.sleep(delay);
      }
    }
  };
  const loops = Promise.all(wakeables.map(runLoop));

  return {
    wake: wakeAll,
    wakeOne: () => wakeOne(),
    async stop() {
      running = false;
      stopped();
      wakeAll();
      await loops;
      failureLog.flush();
    },
  };
}

/**
 * The share of the time a housekeeping backlog's rounds take at most: a round of d ms is followed by a
 * pause of at least d × 3. A year of history past retention, or a first roll-up of it, drains over
 * minutes instead of taking a core for that long, so intake and dispatch beside it keep their pace
 * (on 2 cores, starts of 100 recipients into a 5-million-recipient history ran at 0.92–0.97 × the empty
 * database while its scheduler anonymized two weeks of history and rolled the year up round after
 * round, 0.96–1.01 × once it had caught up; docs/operations.md "Data lifecycle").
 */
export const HOUSEKEEPING_SHARE = 0.25;

/**
 * Housekeeping in rounds on the due-work loop: one round every `intervalMs`, and while a round says
 * there is more (a full batch), the next one after `pauseMs` or, for a longer round, after the pause
 * that keeps the rounds to HOUSEKEEPING_SHARE of the time, so a backlog drains in small transactions
 * that leave room for the hot path between them.
 */
export function startHousekeepingRounds(options: { name: string; logger: Logger; intervalMs: number; pauseMs: number; round: () => Promise<{ more: boolean }> }): { stop(): Promise<void> } {
  let more = false;
  let roundMs = 0;
  const loop = startDueWorkLoop({
    name: options.name,
    logger: options.logger,
    idleMs: options.intervalMs,
    nextDueInMs: async () => (more ? Math.max(options.pauseMs, (roundMs * (1 - HOUSEKEEPING_SHARE)) / HOUSEKEEPING_SHARE) : null),
    async round() {
      const started = performance.now();
      more = (await options.round()).more;
      roundMs = performance.now() - started;
      return false;
    },
  });
  return { stop: () => loop.stop() };
}
