import { DomainError, httpStatusOf, type DomainErrorOptions } from '@rrs/runtime';

/**
 * A refusal of the HTTP layer itself, with a status no domain kind has: 405 `method_not_allowed`,
 * 413 `payload_too_large`, 415 `unsupported_media_type`. Everything else the gateway refuses is a
 * domain error of its kind (401 unauthenticated, 403 forbidden, 404 not_found, 429 rate_limited, …).
 */
export class HttpError extends DomainError {
  readonly status: number;

  constructor(status: number, code: string, message: string, options: DomainErrorOptions = {}) {
    super(status >= 500 ? 'internal' : 'invalid', code, message, options);
    this.name = 'HttpError';
    this.status = status;
  }
}

/** The status an error is answered with: an HTTP-layer error's own, else its kind's (runtime's `httpStatusOf`). */
export function statusOf(err: DomainError): number {
  return err instanceof HttpError ? err.status : httpStatusOf(err);
}

/** 404 `not_found` with a message of its own (NotFoundError always says "<what> not found"). */
export function notFound(message: string, details?: Record<string, unknown>): DomainError {
  return new DomainError('not_found', 'not_found', message, details ? { details } : {});
}
