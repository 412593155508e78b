/**
 * Calls waiting for a provider connection (a slot of an adapter's own pool), small requests' calls
 * ahead of bulk ones (SendContext.ahead; docs/operations.md, "Fair share"): an order's message waits for
 * the next connection to free, not for every bulk call queued before it. First come, first served within
 * each line.
 */
export class WaitLine<Waiter> {
  private readonly ahead: Waiter[] = [];
  private readonly behind: Waiter[] = [];

  push(waiter: Waiter, ahead = false): void {
    (ahead ? this.ahead : this.behind).push(waiter);
  }

  /** The next waiter to serve: the small requests' line first. */
  shift(): Waiter | undefined {
    return this.ahead.length > 0 ? this.ahead.shift() : this.behind.shift();
  }

  /** Takes a waiter out of its line (recalled, timed out); false when it was not waiting. */
  remove(waiter: Waiter): boolean {
    for (const line of [this.ahead, this.behind]) {
      const at = line.indexOf(waiter);
      if (at >= 0) {
        line.splice(at, 1);
        return true;
      }
    }
    return false;
  }

  /** Empties both lines, in the order they would have been served. */
  takeAll(): Waiter[] {
    return [...this.ahead.splice(0), ...this.behind.splice(0)];
  }

  get length(): number {
    return this.ahead.length + this.behind.length;
  }
}
