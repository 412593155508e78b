import { startDueWorkLoop, type Notifier } from '@rrs/runtime';
import { attemptDelivery, type AttemptDeps } from './attempt';
import { claimDue, DUE_CHANNEL, msUntilNextDue, renewClaims, type ClaimedDelivery } from './deliveries';

export interface WorkerOptions extends AttemptDeps {
  /** Attempts in flight at once in this process. */
  concurrency: number;
  /** The process's LISTEN connection: a NOTIFY on DUE_CHANNEL, from any replica, wakes the worker. */
  notifier: Notifier;
}

export interface DeliveryWorker {
  /** Something may be due now (a new delivery, a replay): end the worker's wait. */
  wake(): void;
  /** Stops claiming and waits for the attempts in flight (each bounded by the send timeout). */
  stop(): Promise<void>;
}

/**
 * Sends due deliveries, on the runtime's due-work loop. A round claims as many deliveries as there are
 * free slots (SKIP LOCKED, so replicas share the work) and starts their attempts without waiting for
 * them. Between rounds the worker sleeps until the earliest pending delivery is due (by the database
 * clock), an attempt ends, or it is woken — by wake() in this process or a NOTIFY on DUE_CHANNEL from
 * any replica — never a fixed slow poll; the loop's idle bound only matters while LISTEN is down.
 */
export function startDeliveryWorker(options: WorkerOptions): DeliveryWorker {
  const { pool, policy, concurrency } = options;
  const leaseMs = policy.claimLeaseMs;
  const inFlight = new Set<Promise<void>>();
  /** The claims whose attempts run in this process: their leases are renewed until they are recorded. */
  const held = new Map<string, ClaimedDelivery>();
  let renewing = false;
  const renewal = setInterval(() => {
    if (renewing || held.size === 0) return;
    renewing = true;
    renewClaims(pool, [...held.values()], leaseMs)
      .catch((err: unknown) => options.logger.warn({ err, held: held.size }, 'renewing webhook claim leases failed; a lease that lapses lets another replica attempt the delivery'))
      .finally(() => (renewing = false));
  }, Math.max(100, Math.floor(leaseMs / 3)));
  renewal.unref();
  let slotFreed: (() => void) | null = null;

  const loop = startDueWorkLoop({
    name: 'webhook delivery',
    logger: options.logger,
    notifier: options.notifier,
    channels: [DUE_CHANNEL],
    // A round starts only with a free slot; the attempt that frees one ends the wait.
    beforeRound: () => (inFlight.size < concurrency ? Promise.resolve() : new Promise<void>((resolve) => (slotFreed = resolve))),
    async round() {
      const free = concurrency - inFlight.size;
      const claimed = await claimDue(pool, free, leaseMs);
      for (const claim of claimed) launch(claim);
      return claimed.length === free;
    },
    nextDueInMs: () => msUntilNextDue(pool),
  });

  function launch(claim: ClaimedDelivery): void {
    held.set(claim.id, claim);
    const attempt = attemptDelivery(claim, options)
      .catch((err: unknown) => {
        // The claim's lease runs out and the delivery is attempted again: nothing is lost.
        options.logger.error({ err, deliveryId: claim.id }, 'webhook attempt could not be recorded');
      })
      .finally(() => {
        held.delete(claim.id);
        inFlight.delete(attempt);
        slotFreed?.();
        slotFreed = null;
        // Its retry may be due soon; a due delivery may have waited for the slot.
        loop.wake();
      });
    inFlight.add(attempt);
  }

  return {
    wake: () => loop.wake(),
    async stop() {
      await loop.stop();
      await Promise.allSettled([...inFlight]);
      clearInterval(renewal);
    },
  };
}
