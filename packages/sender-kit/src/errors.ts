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
  constructor(readonly reason: string, message: string, options: { retryAfterMs?: number; cause?: unknown; maybeDelivered?: boolean; provider?: string } = {}) {
    super(message, { cause: options.cause });
    this.name = 'RetryableSendError';
    this.retryAfterMs = options.retryAfterMs;
    this.maybeDelivered = options.maybeDelivered ?? false;
    this.provider = options.provider;
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
