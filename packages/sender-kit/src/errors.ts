/**
 * How a send failed decides what happens to the step: a retryable failure is nak'ed and tried again
 * later (honouring the provider's Retry-After), a permanent one ends the step as FAILED with its reason.
 * Any other error thrown by a send function counts as retryable.
 */
export class RetryableSendError extends Error {
  readonly retryAfterMs?: number;
  constructor(readonly reason: string, message: string, options: { retryAfterMs?: number; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'RetryableSendError';
    this.retryAfterMs = options.retryAfterMs;
  }
}

export class PermanentSendError extends Error {
  constructor(readonly reason: string, message: string, options: { cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'PermanentSendError';
  }
}

/** A sender was configured in a way it cannot run with. */
export class SenderConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SenderConfigError';
  }
}
