import type { CircuitState, ProviderHealthSource, ProviderHealthView } from '@rrs/sender-kit';

/**
 * A messenger channel's one provider as the catalog announces it (the email and SMS senders announce
 * their ProviderChain's breakers): the working account is `closed` while it can send and `open` while
 * its account is down (blocked, logged out, …) or missing, since the last change; the sink is always
 * `closed`, and its name is what tells the catalog nothing is delivered.
 */
export class MessengerProviderHealth implements ProviderHealthSource {
  private state: CircuitState;
  private since = new Date();
  private lastFailure: { code: string; at: Date } | undefined;
  private readonly listeners = new Set<() => void>();

  constructor(private readonly name: string, usable = true) {
    this.state = usable ? 'closed' : 'open';
  }

  /** The account's availability changed (AccountHealth's onChange); `reason` when it can't send. */
  set(usable: boolean, reason?: string): void {
    const state: CircuitState = usable ? 'closed' : 'open';
    if (!usable && reason) this.lastFailure = { code: reason, at: new Date() };
    if (state === this.state) return;
    this.state = state;
    this.since = new Date();
    for (const listener of this.listeners) listener();
  }

  health(): ProviderHealthView[] {
    return [{ name: this.name, state: this.state, since: this.since, ...(this.lastFailure ? { lastFailureCode: this.lastFailure.code, lastFailureAt: this.lastFailure.at } : {}) }];
  }

  onHealthChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
