import { setMaxListeners } from 'node:events';
import { collapseRepeats, counter, createLogger, gauge, type CollapsedLogger, type Logger } from '@rrs/runtime';
import { PermanentSendError, ProviderRecalledError, RetryableSendError } from './errors';
import type { SendContext } from './sender';

/** What a provider adapter is told about the call beside the request itself. */
export interface ProviderCallContext {
  /** The step id: passed to the provider as its idempotency key wherever the provider takes one. */
  idempotencyKey: string;
  /** An earlier call to this provider may have taken the message: an adapter that can look, looks first. */
  resumed: boolean;
  /**
   * Aborted when the provider fails while this call waits for a connection (a slot of the adapter's own
   * pool): the adapter then gives up with ProviderRecalledError instead of sending, since the call has
   * not reached the provider. A call already on the wire is never cut by it. Set by the ProviderChain.
   */
  signal?: AbortSignal;
  /** A small request's call: ahead of bulk ones in the adapter's queue for a connection (WaitLine). */
  ahead?: boolean;
}

/**
 * What a status lookup found: the provider has the step's message (with its id), it has none, or it has
 * no way to say at all (e.g. a compatible gateway without the status method): then it counts as a
 * provider without a lookup.
 */
export type ProviderLookup = { found: true; providerMessageId: string } | { found: false } | { found: 'unsupported' };

/** One provider of a channel, e.g. SMSC.ru or SMS.ru for SMS. */
export interface ChannelProvider<Request> {
  /** Stable name, e.g. `smsc`: metrics, logs, the send log and the step result carry it. */
  readonly name: string;
  /** Resolves with the provider's id of the message (what its receipts refer to). */
  send(request: Request, ctx: ProviderCallContext): Promise<{ providerMessageId: string }>;
  /**
   * Whether the provider has this step's message, by the id the adapter sent it with. Throws when it
   * cannot say right now. A provider without a lookup can never prove it does not have a message.
   */
  lookup?(request: Request, ctx: ProviderCallContext): Promise<ProviderLookup>;
}

/**
 * Failure reasons (RetryableSendError.reason) that say the provider, not the message, is at fault: no
 * answer, a 5xx, our account refused (authentication, money, a blocked IP). They count against the
 * provider's circuit breaker and move the step on to the next provider. Others (429, a busy provider)
 * are retried later on the same order of providers.
 */
export const PROVIDER_FAULTS: ReadonlySet<string> = new Set([
  'provider_timeout',
  'provider_unreachable',
  'provider_unavailable',
  'provider_bad_response',
  'provider_auth_failed',
  'provider_account_balance',
  'provider_ip_blocked',
  'provider_account_limit',
  'provider_request_refused',
]);

/**
 * Of the provider faults, those that say our account or our request is wrong (a refused token or
 * sender, no money, a blocked IP, Postmark's "invalid email request"): nothing will change until someone
 * fixes the configuration, so besides failing over each one raises an alert (an error log line, collapsed
 * while it repeats, and `sender_provider_alerts_total`). None of them fails the customer's step for good.
 */
export const PROVIDER_ALERTS: ReadonlySet<string> = new Set([
  'provider_auth_failed',
  'provider_account_balance',
  'provider_ip_blocked',
  'provider_account_limit',
  'provider_request_refused',
]);

/**
 * How long a provider stays proven after its last answer (ms): a burst after a quiet spell goes out behind
 * one probe, so a provider that died while nobody called it gets one call, not the whole burst.
 */
export const PROVEN_FOR_MS = 5_000;

/** The wait suggested to a step none of whose providers could take it because a probe failed (ms). */
const PROBE_FAILED_RETRY_MS = 1_000;

/** A provider's circuit breaker states, as the channel catalog and the account API name them. */
export const CIRCUIT_STATES = ['closed', 'open', 'half_open'] as const;
export type CircuitState = (typeof CIRCUIT_STATES)[number];
const STATE_VALUE: Record<CircuitState, number> = { closed: 0, open: 1, half_open: 2 };

export interface CircuitBreakerOptions {
  /** Provider faults in a row that open the circuit. Default 5. */
  failureThreshold?: number;
  /** How long an open circuit skips the provider before one trial call (half-open). Default 30 000. */
  openMs?: number;
  now?: () => number;
  /** Called on every change of state. */
  onChange?: (state: CircuitState) => void;
}

/**
 * Closed: calls go through; `failureThreshold` provider faults in a row open it. Open: the provider is
 * skipped until `openMs` passed. Half-open: one trial call at a time; its success closes the circuit, its
 * fault opens it again for another `openMs`. A non-fault answer (even a refusal of the message) is a success.
 *
 * Bounded damage under concurrency (`admit`): while closed, the provider is *proven* once it answered
 * (a success, a refusal of the message, a 429), until its next fault or PROVEN_FOR_MS without an answer.
 * Unproven (at start, after a fault, after a quiet spell) one call at a time goes as a probe and the
 * others wait for its outcome: it answers → they all go; it faults → they move on to the next provider
 * at once, without calling this one. A fault also aborts
 * `signal`, recalling the calls admitted before it that still wait for a connection in the adapter. So a
 * failing provider gets the calls already on the wire plus one probe per wave, whatever the concurrency,
 * and a hung one costs a waiting step at most one timeout (the probe's).
 */
export class CircuitBreaker {
  private current: CircuitState = 'closed';
  private changedAt: number;
  private faults = 0;
  private openedAt = 0;
  private trialInFlight = false;
  private proven = false;
  private answeredAt = 0;
  private probeOut = false;
  private waiters: Array<(go: boolean) => void> = [];
  private recall?: AbortController;
  private readonly threshold: number;
  private readonly openMs: number;
  private readonly now: () => number;

  constructor(private readonly options: CircuitBreakerOptions = {}) {
    this.threshold = options.failureThreshold ?? 5;
    this.openMs = options.openMs ?? 30_000;
    this.now = options.now ?? Date.now;
    this.changedAt = this.now();
  }

  /** When the circuit entered its current state (ms since epoch; its creation while it never changed). */
  get since(): number {
    // Reading the state first applies a due open → half-open, so `since` is that state's.
    void this.state;
    return this.changedAt;
  }

  get state(): CircuitState {
    if (this.current === 'open' && this.now() - this.openedAt >= this.openMs) this.set('half_open');
    return this.current;
  }

  /** Milliseconds until an open circuit lets a trial call through (0 when calls may go now). */
  retryInMs(): number {
    return this.state === 'open' ? Math.max(0, this.openedAt + this.openMs - this.now()) : 0;
  }

  /** Whether a call may go now; in half-open, takes the one trial slot (give it back with success/fault). */
  tryAcquire(): boolean {
    const state = this.state;
    if (state === 'closed') return true;
    if (state === 'open' || this.trialInFlight) return false;
    this.trialInFlight = true;
    return true;
  }

  /**
   * Whether a call may go now (the ProviderChain's gate): true; false = skip this provider (its circuit is
   * open, its half-open trial is out, or the probe this call waited for failed); or, while an unproven
   * provider's probe is out, a promise of one of those once the probe's outcome is known.
   */
  admit(): boolean | Promise<boolean> {
    if (this.current === 'closed' && this.proven) {
      if (this.now() - this.answeredAt < PROVEN_FOR_MS) return true;
      this.proven = false;
    }
    if (this.state !== 'closed') return this.tryAcquire();
    if (!this.probeOut) {
      this.probeOut = true;
      return true;
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Aborted at the provider's next fault: calls admitted before it and not yet on the wire give up (unsent). */
  get signal(): AbortSignal {
    if (!this.recall) {
      this.recall = new AbortController();
      // Every call waiting for a connection listens to it: as many as the sender's concurrency.
      setMaxListeners(0, this.recall.signal);
    }
    return this.recall.signal;
  }

  success(): void {
    this.faults = 0;
    this.trialInFlight = false;
    if (this.current !== 'closed') this.set('closed');
    this.answered();
  }

  fault(): void {
    this.trialInFlight = false;
    this.faults++;
    this.proven = false;
    this.probeOut = false;
    if (this.current === 'half_open' || (this.current === 'closed' && this.faults >= this.threshold)) {
      this.openedAt = this.now();
      this.set('open');
    }
    if (this.recall) {
      const recall = this.recall;
      this.recall = undefined;
      recall.abort();
    }
    this.settle(false);
  }

  /** A call that ended without saying anything about the provider's health (e.g. a 429): frees the trial slot; the provider did answer. */
  neutral(): void {
    this.trialInFlight = false;
    this.answered();
  }

  private answered(): void {
    this.proven = true;
    this.answeredAt = this.now();
    this.probeOut = false;
    this.settle(true);
  }

  private settle(go: boolean): void {
    if (this.waiters.length === 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve(go);
  }

  private set(state: CircuitState): void {
    this.current = state;
    this.changedAt = this.now();
    this.options.onChange?.(state);
  }
}

const circuitState = gauge({ name: 'sender_provider_circuit_state', help: 'Circuit breaker state per channel provider: 0 closed, 1 open, 2 half-open.', labelNames: ['channel', 'provider'] });
const providerCalls = counter({ name: 'sender_provider_calls_total', help: 'Provider calls by channel, provider and result (sent, refused, fault, retry, found, skipped, recalled).', labelNames: ['channel', 'provider', 'result'] });
const failovers = counter({ name: 'sender_provider_failovers_total', help: 'Steps moved on from a provider to the next one, by channel, provider left and reason.', labelNames: ['channel', 'provider', 'reason'] });
const alerts = counter({ name: 'sender_provider_alerts_total', help: 'Provider faults that say our account or request is wrong (PROVIDER_ALERTS: a refused token or sender, no money, an invalid request), by channel, provider and reason: fix the configuration.', labelNames: ['channel', 'provider', 'reason'] });

export interface ProviderChainOptions extends Omit<CircuitBreakerOptions, 'onChange'> {
  /** Where the alerts (PROVIDER_ALERTS) are logged; default a `sender-kit` logger on stdout. */
  log?: Logger;
}

let defaultAlertLog: Logger | undefined;

/** One provider of a chain as this process sees it: what the channel catalog announces (no secrets). */
export interface ProviderHealthView {
  name: string;
  state: CircuitState;
  /** When the circuit entered `state`. */
  since: Date;
  /** The reason code of the provider's last fault (PROVIDER_FAULTS), if it had one. */
  lastFailureCode?: string;
  lastFailureAt?: Date;
}

/** What the catalog announcement reads a channel's provider health from (a ProviderChain). */
export interface ProviderHealthSource {
  health(): ProviderHealthView[];
  /** Calls back on every change of a provider's circuit state; returns the unsubscribe function. */
  onHealthChange(listener: () => void): () => void;
}

/** What the chain sent with: the provider's message id and the provider's name (for the step result). */
export interface ChainSent {
  providerMessageId: string;
  provider: string;
}

/**
 * The providers of one channel, in order, with failover (docs/channels.md, "Providers in order, with
 * failover"). A step goes to the first provider whose circuit is not open; a provider fault
 * (PROVIDER_FAULTS) moves it on to the next. The rule that keeps a message from going out twice:
 *
 * - a fault that proves the provider refused (connection refused, authentication, no money) fails over
 *   at once;
 * - a fault that does not (no answer in time, a 5xx, a lost connection: `maybeDelivered`) fails over only
 *   once the provider's status lookup says it has no such message; found → it was sent there. No lookup,
 *   or the lookup fails → the step stays with that provider (a RetryableSendError naming it; the send log
 *   keeps the name) and its next delivery asks it again, or resends through it alone;
 * - a resumed step (an earlier delivery died or ended that way) asks the providers the send log names
 *   first, or every provider with a lookup when none is named (the holder died mid-call).
 *
 * A permanent refusal (a bad number) is the message's fault, not the provider's: it ends the step.
 */
export class ProviderChain<Request> implements ProviderHealthSource {
  private readonly breakers: CircuitBreaker[];
  private readonly lastFaults: ({ code: string; at: Date } | undefined)[];
  private readonly listeners = new Set<() => void>();
  private readonly alertLog: CollapsedLogger;

  constructor(
    readonly channel: string,
    readonly providers: readonly ChannelProvider<Request>[],
    options: ProviderChainOptions = {},
  ) {
    this.alertLog = collapseRepeats(options.log ?? (defaultAlertLog ??= createLogger({ service: 'sender-kit' })));
    if (providers.length === 0) throw new Error(`channel ${channel} has no provider`);
    const names = new Set(providers.map((p) => p.name));
    if (names.size !== providers.length) throw new Error(`channel ${channel} lists a provider twice: ${providers.map((p) => p.name).join(', ')}`);
    this.lastFaults = providers.map(() => undefined);
    this.breakers = providers.map((provider) => {
      circuitState.set({ channel, provider: provider.name }, 0);
      return new CircuitBreaker({
        failureThreshold: options.failureThreshold,
        openMs: options.openMs,
        now: options.now,
        onChange: (state) => {
          circuitState.set({ channel, provider: provider.name }, STATE_VALUE[state]);
          for (const listener of this.listeners) listener();
        },
      });
    });
  }

  health(): ProviderHealthView[] {
    return this.providers.map((provider, index) => {
      const breaker = this.breakers[index];
      const fault = this.lastFaults[index];
      return { name: provider.name, state: breaker.state, since: new Date(breaker.since), ...(fault ? { lastFailureCode: fault.code, lastFailureAt: fault.at } : {}) };
    });
  }

  onHealthChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Provider names in order, e.g. `smsc>smsru`. */
  get name(): string {
    return this.providers.map((p) => p.name).join('>');
  }

  circuit(provider: string): CircuitState {
    const index = this.providers.findIndex((p) => p.name === provider);
    if (index < 0) throw new Error(`no provider ${provider} on channel ${this.channel}`);
    return this.breakers[index].state;
  }

  async send(request: Request, ctx: Pick<SendContext, 'idempotencyKey' | 'resumed' | 'maybeWith' | 'ahead'>): Promise<ChainSent> {
    const call: ProviderCallContext = { idempotencyKey: ctx.idempotencyKey, resumed: false, ahead: ctx.ahead === true };
    if (ctx.resumed) {
      const known = ctx.maybeWith.length > 0;
      for (const provider of this.providers) {
        if (known && !ctx.maybeWith.includes(provider.name)) continue;
        let found: ProviderLookup = { found: 'unsupported' };
        if (provider.lookup) {
          try {
            found = await provider.lookup(request, { ...call, resumed: true });
          } catch (err) {
            // Named by the send log, or (the holder died mid-call) maybe the one it was calling: it may have
            // the message and cannot say now, so nothing else may carry the step yet.
            throw this.stayWith(provider, err);
          }
        }
        if (found.found === 'unsupported') {
          // Named by the send log and unable to say: only this provider may carry the step now.
          if (known) return this.pinned(provider, request, call);
          continue;
        }
        if (found.found) {
          providerCalls.inc({ channel: this.channel, provider: provider.name, result: 'found' });
          return { providerMessageId: found.providerMessageId, provider: provider.name };
        }
      }
      // Providers without a lookup, when the holder died mid-call, cannot be asked: they are told the
      // call is resumed and do what their API allows (docs/channels.md).
      if (!known) call.resumed = true;
    }
    let lastError: unknown;
    let retryAfterMs: number | undefined;
    for (let index = 0; index < this.providers.length; index++) {
      const provider = this.providers[index];
      const breaker = this.breakers[index];
      const admitted = breaker.admit();
      if (!(admitted === true || (admitted !== false && (await admitted)))) {
        // Never called: its circuit is open, or the probe this step waited for failed.
        const open = breaker.state !== 'closed';
        providerCalls.inc({ channel: this.channel, provider: provider.name, result: 'skipped' });
        failovers.inc({ channel: this.channel, provider: provider.name, reason: open ? 'circuit_open' : 'probe_failed' });
        const wait = open ? breaker.retryInMs() : PROBE_FAILED_RETRY_MS;
        retryAfterMs = retryAfterMs === undefined ? wait : Math.min(retryAfterMs, wait);
        continue;
      }
      call.signal = breaker.signal;
      const tried = await this.attempt(index, request, call);
      call.signal = undefined;
      if ('sent' in tried) return tried.sent;
      if ('recalled' in tried) {
        // It never reached the provider, which failed meanwhile: not sent, on to the next one at once.
        failovers.inc({ channel: this.channel, provider: provider.name, reason: 'recalled' });
        retryAfterMs = retryAfterMs === undefined ? PROBE_FAILED_RETRY_MS : Math.min(retryAfterMs, PROBE_FAILED_RETRY_MS);
        continue;
      }
      const { err, fault, maybeDelivered } = tried;
      if (!fault) throw this.tagged(provider, err, maybeDelivered);
      if (maybeDelivered) {
        if (!provider.lookup) throw this.tagged(provider, err, true);
        let found: ProviderLookup;
        try {
          found = await provider.lookup(request, { ...call, resumed: true });
        } catch {
          throw this.tagged(provider, err, true);
        }
        if (found.found === 'unsupported') throw this.tagged(provider, err, true);
        if (found.found) {
          providerCalls.inc({ channel: this.channel, provider: provider.name, result: 'found' });
          return { providerMessageId: found.providerMessageId, provider: provider.name };
        }
      }
      failovers.inc({ channel: this.channel, provider: provider.name, reason: (err as RetryableSendError).reason });
      lastError = err;
      const hint = (err as RetryableSendError).retryAfterMs;
      if (hint !== undefined) retryAfterMs = retryAfterMs === undefined ? hint : Math.min(retryAfterMs, hint);
    }
    // One provider: its own failure says more than "none could".
    if (this.providers.length === 1 && lastError instanceof RetryableSendError) throw new RetryableSendError(lastError.reason, lastError.message, { cause: lastError.cause ?? lastError, retryAfterMs });
    throw new RetryableSendError('providers_unavailable', `${this.channel}: no provider could take the message (${this.name})`, { cause: lastError, retryAfterMs });
  }

  /** The send log names this provider and it cannot be asked: resend through it alone, as resumed. */
  private async pinned(provider: ChannelProvider<Request>, request: Request, call: ProviderCallContext): Promise<ChainSent> {
    const index = this.providers.indexOf(provider);
    const breaker = this.breakers[index];
    const admitted = breaker.admit();
    if (!(admitted === true || (admitted !== false && (await admitted)))) {
      throw new RetryableSendError('provider_pending', `${this.channel}: ${provider.name} may have the message and cannot take it now`, { retryAfterMs: Math.max(breaker.retryInMs(), PROBE_FAILED_RETRY_MS), maybeDelivered: true, provider: provider.name });
    }
    const tried = await this.attempt(index, request, { ...call, resumed: true, signal: breaker.signal });
    if ('sent' in tried) return tried.sent;
    if ('recalled' in tried) {
      throw new RetryableSendError('provider_pending', `${this.channel}: ${provider.name} may have the message and failed meanwhile`, { retryAfterMs: PROBE_FAILED_RETRY_MS, maybeDelivered: true, provider: provider.name });
    }
    // Refused for sure: the provider does not have it, so the next delivery may fail over.
    throw this.tagged(provider, tried.err, tried.maybeDelivered);
  }

  /**
   * One call to the provider at `index`, its circuit told how it went. A permanent refusal (the message's
   * fault, not the provider's) is thrown; any other failure is returned, sorted.
   */
  private async attempt(index: number, request: Request, call: ProviderCallContext): Promise<{ sent: ChainSent } | { recalled: true } | { err: unknown; fault: boolean; maybeDelivered: boolean }> {
    const provider = this.providers[index];
    const breaker = this.breakers[index];
    try {
      const sent = await provider.send(request, call);
      breaker.success();
      providerCalls.inc({ channel: this.channel, provider: provider.name, result: 'sent' });
      return { sent: { providerMessageId: sent.providerMessageId, provider: provider.name } };
    } catch (err) {
      if (err instanceof PermanentSendError) {
        err.provider ??= provider.name;
        breaker.success();
        providerCalls.inc({ channel: this.channel, provider: provider.name, result: 'refused' });
        throw err;
      }
      if (err instanceof ProviderRecalledError) {
        providerCalls.inc({ channel: this.channel, provider: provider.name, result: 'recalled' });
        return { recalled: true };
      }
      // A recipient's own trouble (a 4xx at RCPT) never counts for or against the provider.
      const fault = err instanceof RetryableSendError && !err.recipientLevel && PROVIDER_FAULTS.has(err.reason);
      if (fault) {
        const reason = (err as RetryableSendError).reason;
        this.lastFaults[index] = { code: reason, at: new Date() };
        breaker.fault();
        if (PROVIDER_ALERTS.has(reason)) {
          alerts.inc({ channel: this.channel, provider: provider.name, reason });
          // One line per provider and reason per interval while it lasts (the provider's own words, no stack).
          this.alertLog.error({ channel: this.channel, provider: provider.name, reason, detail: (err as Error).message }, `${this.channel} ${provider.name}: ${reason}: the provider refused our account or request; fix its configuration (steps fail over)`);
        }
      } else breaker.neutral();
      providerCalls.inc({ channel: this.channel, provider: provider.name, result: fault ? 'fault' : 'retry' });
      return { err, fault, maybeDelivered: !(err instanceof RetryableSendError) || err.maybeDelivered };
    }
  }

  private stayWith(provider: ChannelProvider<Request>, cause: unknown): RetryableSendError {
    return new RetryableSendError('provider_pending', `${this.channel}: ${provider.name} may have the message and cannot say now`, { cause, maybeDelivered: true, provider: provider.name, retryAfterMs: 5_000 });
  }

  private tagged(provider: ChannelProvider<Request>, err: unknown, maybeDelivered: boolean): RetryableSendError {
    if (err instanceof RetryableSendError) {
      return new RetryableSendError(err.reason, err.message, { cause: err.cause ?? err, retryAfterMs: err.retryAfterMs, maybeDelivered, provider: maybeDelivered ? provider.name : undefined, recipientLevel: err.recipientLevel });
    }
    return new RetryableSendError('sender_error', `${provider.name}: ${(err as Error)?.message ?? String(err)}`, { cause: err, maybeDelivered: true, provider: provider.name });
  }
}
