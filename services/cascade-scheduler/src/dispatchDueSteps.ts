import { BinaryWriter, busV1, stepSubject } from '@rrs/proto';
import { counter, histogram, inCoalescedTransaction, readAfterCommit, startDueWorkLoop, type Bus, type Logger, type NextDueReading, type Notifier, type Pool, type PoolClient } from '@rrs/runtime';
import { fire, type Dispatch, type FireChecks, type Timing } from './engine';
import { fireChecksFor } from './fireChecks';
import type { ConfiguredChannels } from './organizationProfiles';
import { DUE_CHANNEL, readStates, saveStates, type LoadedRecipient } from './recipientStore';
import { claimDueSteps, msUntilNextDueStep, NEXT_DUE_STEP, type Claim, type ClaimedStep, type ClaimOptions, type InFlightBound } from './sql/dueSteps';
import { stepDueMessage } from './stepMessage';
import type { AddressHasher } from './personHash';

const lateness = histogram({
  name: 'scheduler_step_lateness_seconds',
  help: 'Time from a step being due to its dispatch.',
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
});
const dispatched = counter({ name: 'scheduler_steps_dispatched_total', help: 'Steps published to their channel.', labelNames: ['channel'] });
const skippedAtFire = counter({ name: 'scheduler_steps_skipped_total', help: 'Steps skipped when they came due.', labelNames: ['reason'] });

export interface DispatcherOptions {
  pool: Pool;
  bus: Bus;
  notifier: Notifier;
  channels: ConfiguredChannels;
  /** The opt-out check looks up addresses and their keyed hashes (personHash.ts). */
  hasher: AddressHasher;
  logger: Logger;
  minuteMs: number;
  publicBaseUrl: string;
  batchSize?: number;
  /**
   * Steps of one channel dispatched and still without a result, at most (null or absent: no bound;
   * sql/dueSteps.ts, InFlightBound). The senders take what is in flight; the rest waits in PostgreSQL,
   * where the claim is fair.
   */
  inFlight?: InFlightBound | null;
  /** Longest sleep with nothing due: a safety net against a lost notification, not the wake mechanism. */
  maxIdleMs?: number;
  /**
   * Claim loops in this process (default 2): while one waits on PostgreSQL, another publishes. They
   * share work through SKIP LOCKED exactly as replicas do.
   */
  loops?: number;
  /**
   * Awaited before each round. The scheduler passes "until fewer than two batches of results wait":
   * a result finishes work already in flight and schedules the next step, so it goes first; steps
   * dispatched faster than their results can be applied would only lengthen the queue of results
   * (and, on a shared CPU, slow their applying down).
   */
  beforeRound?: () => Promise<void>;
  /** Test hook: runs after a batch's publishes, before its transaction commits. */
  afterPublish?: (client: PoolClient, dispatches: Dispatch[]) => Promise<void>;
}

export interface RunningDispatcher {
  stop(): Promise<void>;
  /** Steps dispatched by this dispatcher since start. */
  readonly dispatchedCount: number;
  /** Results were applied here: a channel held at its in-flight bound may have room now (wakes one claim loop). */
  roomFreed(): void;
}

/** `bulk`: the step's cascade is a bulk request's (every step of a recipient shares it). */
type Dispatched = { state: LoadedRecipient; dispatch: Dispatch; bulk: boolean };

/** How long a dispatcher held at a channel's in-flight bound waits before it looks again, unless woken. */
const ROOM_POLL_MS = 100;

/**
 * Fires the claimed steps (checking each one's conditions now that it fires). A skip schedules the
 * next step, due at once when nothing was sent yet: that one fires in the same round.
 */
function fireClaimed(states: Map<string, LoadedRecipient>, claimed: ClaimedStep[], checksOf: (state: LoadedRecipient) => FireChecks, timing: Timing): Dispatched[] {
  const out: Dispatched[] = [];
  for (const { stepId, recipientId, bulk } of claimed) {
    const state = states.get(recipientId);
    let current = state?.steps.find((step) => step.id === stepId);
    if (!state || !current) continue;
    const checks = checksOf(state);
    for (let guard = 0; current && guard <= state.steps.length * 3; guard++) {
      const dispatch = fire(state, current, checks, timing);
      if (dispatch) {
        out.push({ state, dispatch, bulk });
        break;
      }
      if (current.status === 'skipped') skippedAtFire.inc({ reason: current.reason ?? '' });
      current = state.steps.find((step) => step.status === 'scheduled' && step.dueAt !== null && step.dueAt <= timing.now);
    }
  }
  return out;
}

/**
 * The claim loops of a process claim one at a time, and each claim's room leaves out the steps the
 * others claimed in rounds not committed yet: the in-flight count a claim reads is what is committed,
 * so two loops woken by one batch of results each took the whole room. (Replicas still may, by a
 * claim's room at most; InFlightBound.)
 */
class ClaimTurns {
  private uncommitted = 0;
  private turn: Promise<void> = Promise.resolve();

  /** Claims in turn; `release` the claimed steps' count once their transaction has ended. */
  async claim(client: PoolClient, options: ClaimOptions): Promise<Claim> {
    const previous = this.turn;
    let done!: () => void;
    this.turn = new Promise((resolve) => (done = resolve));
    await previous;
    try {
      const claim = await claimDueSteps(client, { ...options, uncommitted: this.uncommitted });
      this.uncommitted += claim.claimed.length;
      return claim;
    } finally {
      done();
    }
  }

  release(claimed: number): void {
    this.uncommitted -= claimed;
  }
}

/**
 * One dispatch round, in one transaction: claim due steps, lock their recipients (SKIP LOCKED: a
 * recipient held elsewhere — a result being applied, a rating — waits for the next round with its
 * step), fire them, publish the dispatched ones to `steps.<channel>` (bulk) or `steps.<channel>.small`
 * with Nats-Msg-Id = attempt id,
 * save, commit. Nothing here ever waits for a lock, so rounds never deadlock with the transactions
 * that lock a recipient first and then its steps. Returns how many steps it claimed and what it sent.
 * Four requests to PostgreSQL (a coalesced transaction): BEGIN with the clock and the claim; the
 * recipients, their cascades and steps; the opt-out ledger; every write, the notification and COMMIT —
 * and, after a claim that left steps and room (the loop sleeps next), the next due time, read after
 * COMMIT in its request (`nextDue`, null when it did not run) rather than in one of its own.
 */
async function dispatchRound(options: DispatcherOptions, claim: ClaimOptions, turns: ClaimTurns): Promise<{ claimed: number; full: boolean; limited: boolean; sent: Dispatch[]; now: Date; nextDue: NextDueReading | null }> {
  let taken = 0;
  let nextDue: Promise<NextDueReading | null> = Promise.resolve(null);
  try {
    const round = await inCoalescedTransaction(options.pool, async (client) => {
      const { now, claimed: due, limited } = await turns.claim(client, claim);
      taken = due.length;
      const full = due.length >= claim.limit;
      if (!full && !limited) {
        nextDue = readAfterCommit(client, NEXT_DUE_STEP).then((read) => (read ? { nextDueInMs: (read.result.rows[0] as { ms: number | null }).ms, askedAt: read.sentAt } : null));
      }
      if (due.length === 0) return { claimed: 0, full, limited, sent: [], now };
      const { states } = await readStates(client, { ids: due.map((step) => step.recipientId) }, { lock: 'skip', token: true });
      const claimed = due.filter((step) => states.has(step.recipientId));
      if (claimed.length === 0) return { claimed: 0, full, limited, sent: [], now };
      const checksOf = await fireChecksFor(client, options.channels, options.hasher, states.values(), now);
      const dispatches = fireClaimed(states, claimed, checksOf, { now, minuteMs: options.minuteMs });
      // One pipelined batch: every message is written before any acknowledgement is awaited. One writer
      // encodes them all: it keeps the buffer it grew for the first (a fresh one doubled its way up to each
      // message's size, ~5 µs a message of copying and zero-filling).
      const writer = new BinaryWriter();
      await options.bus.publishBatch(
        dispatches.map(({ state, dispatch, bulk }) => ({
          // Small requests' steps on their own subject and consumer: never queued behind the bulk's.
          subject: stepSubject(dispatch.channel, { small: !bulk }),
          data: busV1.StepDue.encode(stepDueMessage(state, dispatch, options.publicBaseUrl, now), writer).finish(),
          // The cascade's start is the parent of its steps' publication (the bus wrapper reads it).
          options: { msgId: dispatch.attemptId, headers: state.meta.traceContext },
        })),
      );
      const sent = dispatches.map((entry) => entry.dispatch);
      if (options.afterPublish) await options.afterPublish(client, sent);
      await saveStates(client, states.values(), now);
      return { claimed: claimed.length, full, limited, sent, now };
    });
    return { ...round, nextDue: await nextDue };
  } finally {
    turns.release(taken);
  }
}

/**
 * The durable-timer dispatcher: dispatch rounds on the runtime's due-work loop. A crash before a
 * round's commit releases its claim; the next claimer publishes the same attempt ids, which the stream
 * drops as duplicates. Between rounds it sleeps until the nearest due time or a notification of newly
 * committed work (`DUE_CHANNEL`).
 */
export async function startDispatcher(options: DispatcherOptions): Promise<RunningDispatcher> {
  const batchSize = options.batchSize ?? 500;
  const inFlight = options.inFlight ?? null;
  // The claim's path (sql/dueSteps.ts), shared by the loops: straight due order while everything due
  // fits in a round (nothing waits, so there is nothing to share); the fair path at start (a backlog may
  // be waiting) and from a round that found more (a full batch, or a channel's in-flight bound reached)
  // until a fair round finds less than a full batch with room in every channel.
  let fair = true;
  // A round the bound cut (it took all the room there was, or found none) waits for results applied in
  // this process (roomFreed) or, for those applied by other replicas, ROOM_POLL_MS — not the 20 ms of
  // contention, and not no time at all: a round at once finds no room and costs a fair claim for nothing
  // (at the bound, half the rounds of a 10 000-message send claimed nothing: 161 of 287). A batch of
  // results wakes one claim loop, not all: its room is one loop's to take, the others would find none.
  let waitingForRoom = false;
  let count = 0;
  const turns = new ClaimTurns();
  const loop = startDueWorkLoop({
    name: 'dispatch',
    logger: options.logger,
    loops: options.loops ?? 2,
    notifier: options.notifier,
    channels: [DUE_CHANNEL],
    idleMs: options.maxIdleMs ?? 30_000,
    beforeRound: options.beforeRound,
    nextDueInMs: async () => (waitingForRoom ? ROOM_POLL_MS : msUntilNextDueStep(options.pool)),
    async round() {
      const { claimed, full, limited, sent, now, nextDue } = await dispatchRound(options, { limit: batchSize, inFlight, fair }, turns);
      fair = full || limited;
      waitingForRoom = limited && !full;
      for (const dispatch of sent) {
        lateness.observe(Math.max(0, now.getTime() - (dispatch.step.dueAt ?? now).getTime()) / 1000);
        dispatched.inc({ channel: dispatch.channel });
      }
      count += sent.length;
      // Less than a batch with room left was everything due at the claim's clock: the loop goes again at
      // once only if more has come due since (steady traffic), else sleeps until the next due time. A new
      // round at once claimed nothing after each single-recipient cascade.
      const outcome = full ? true : claimed > 0 && !limited ? 'some' : false;
      // The next due time came with the COMMIT: the loop does not ask for it again.
      return outcome !== true && nextDue ? { outcome, ...nextDue } : outcome;
    },
  });
  return {
    get dispatchedCount() {
      return count;
    },
    roomFreed() {
      if (waitingForRoom) loop.wakeOne();
    },
    stop: () => loop.stop(),
  };
}
