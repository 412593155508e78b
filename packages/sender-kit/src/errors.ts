/**
 * How a send failed decides what happens to the step: a retryable failure is nak'ed and tried again
 * later (honouring the provider's Retry-After), a permanent one ends the step as FAILED with its reason.
 * Any other error thrown by a send function counts as retryable.
 */
export class RetryableSendError extends Error {
  readonly retryAfterMs?: number;
  /**
   * The failure does not prove the provider refused the message (no answer in time, the connection lost
   * after the request went out, a 5xx): the next try is made as `resumed`, so the adapter asks the provider
   * first where it can. Any error that is not a RetryableSendError counts as maybe delivered too.
   */
  readonly maybeDelivered: boolean;
  /**
   * With `maybeDelivered`: the provider that may have the message (set by a ProviderChain). The send log
   * keeps it, so the next delivery asks that provider first and never fails over past it blindly.
   */
  readonly provider?: string;
  /**
   * The failure is about this recipient, not the provider (an SMTP 4xx at RCPT: greylisting, a full
   * mailbox): it never counts against the provider's circuit, and on the last delivery the step fails
   * with this reason rather than `max_deliveries`.
   */
  readonly recipientLevel: boolean;
  constructor(readonly reason: string, message: string, options: { retryAfterMs?: number; cause?: unknown; maybeDelivered?: boolean; provider?: string; recipientLevel?: boolean } = {}) {
    super(message, { cause: options.cause });
    this.name = 'RetryableSendError';
    this.retryAfterMs = options.retryAfterMs;
    this.maybeDelivered = options.maybeDelivered ?? false;
    this.provider = options.provider;
    this.recipientLevel = options.recipientLevel ?? false;
  }
}

/**
 * A call given up before it reached the provider, because the provider failed meanwhile (its circuit
 * breaker recalled the calls still waiting for a connection: `ProviderCallContext.signal`). Nothing was
 * sent: the chain moves the step on to the next provider at once, and it says nothing about the provider.
 */
export class ProviderRecalledError extends RetryableSendError {
  constructor(provider: string) {
    super('provider_recalled', `${provider}: the call was given up before it reached the provider (the provider failed meanwhile)`);
    this.name = 'ProviderRecalledError';
  }
}

export class PermanentSendError extends Error {
  /** The provider that refused the message, when one did (set by a ProviderChain): reported on the failed step. */
  provider?: string;
  constructor(readonly reason: string, message: string, options: { cause?: unknown; provider?: string } = {}) {
    super(message, { cause: options.cause });
    this.name = 'PermanentSendError';
    this.provider = options.provider;
  }
}

/** A sender was configured in a way it cannot run with. */
export class SenderConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SenderConfigError';
  }
}
