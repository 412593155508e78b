/**
 * Domain errors: what went wrong, in the domain's words (`kind`), with a stable machine-readable `code`.
 * Domain code throws these and knows nothing of transports; each boundary maps the kind once: to a gRPC
 * status where a service answers (grpc.ts, which also carries kind, code and details across intact), and
 * to an HTTP status and RFC 9457 problem details at the gateway (only the gateway's HTTP layer has
 * statuses of its own: 405, 413, 415).
 */
export const ERROR_KINDS = [
  /** The input breaks a rule of the operation; `details.errors` may list the offending fields. */
  'invalid',
  /** No credentials, or credentials nobody issued. */
  'unauthenticated',
  /** Valid credentials without the right to do this. */
  'forbidden',
  /** The object does not exist, or belongs to someone else. */
  'not_found',
  /** The request clashes with the current state (an Idempotency-Key reused, a channel not configured, …). */
  'conflict',
  /** The organization's plan does not allow it. */
  'payment_required',
  /** Too much, too fast: try again after `details.retryAfterSeconds`. */
  'rate_limited',
  /** A dependency is down; the same request may succeed later. */
  'unavailable',
  /** A fault of ours. */
  'internal',
] as const;

export type ErrorKind = (typeof ERROR_KINDS)[number];

export function isErrorKind(value: unknown): value is ErrorKind {
  return typeof value === 'string' && (ERROR_KINDS as readonly string[]).includes(value);
}

export interface DomainErrorOptions {
  cause?: unknown;
  /** Extra machine-readable fields, rendered as problem+json extension members. */
  details?: Record<string, unknown>;
}

/** One offending field of an `invalid` error: a JSON pointer into the request, and what is wrong with it. */
export interface FieldProblem {
  pointer?: string;
  parameter?: string;
  header?: string;
  detail: string;
}

export class DomainError extends Error {
  readonly kind: ErrorKind;
  readonly code: string;
  readonly details?: Record<string, unknown>;

  constructor(kind: ErrorKind, code: string, message: string, options: DomainErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'DomainError';
    this.kind = kind;
    this.code = code;
    this.details = options.details;
  }
}

export class InvalidError extends DomainError {
  /**
   * `fields` become `details.errors`; the message, when not given, names the first field (or how many).
   * The code is `invalid_request` unless the operation has a more precise one.
   */
  constructor(fields: FieldProblem[], options: DomainErrorOptions & { code?: string; message?: string } = {}) {
    super('invalid', options.code ?? 'invalid_request', options.message ?? invalidMessage(fields), {
      cause: options.cause,
      details: { ...(options.details ?? {}), errors: fields },
    });
    this.name = 'InvalidError';
  }

  /** One offending field. */
  static field(pointer: string, detail: string, options: DomainErrorOptions & { code?: string } = {}): InvalidError {
    return new InvalidError([{ pointer, detail }], options);
  }
}

function invalidMessage(fields: FieldProblem[]): string {
  if (fields.length === 0) return 'the request is invalid';
  return fields.slice(0, 5).map((f) => `${f.pointer ?? f.parameter ?? f.header ?? 'body'}: ${f.detail}`).join('; ');
}

export class NotFoundError extends DomainError {
  /** `what` names the object in the message: `NotFoundError('cascade')` → "cascade not found"; `message` replaces that wording. */
  constructor(what: string, options: DomainErrorOptions & { code?: string; message?: string } = {}) {
    super('not_found', options.code ?? 'not_found', options.message ?? `${what} not found`, options);
    this.name = 'NotFoundError';
  }
}

/** An error class of one kind whose callers name the code and the message. */
function errorOfKind<K extends ErrorKind>(kind: K, name: string) {
  const ErrorOfKind = class extends DomainError {
    constructor(code: string, message: string, options: DomainErrorOptions = {}) {
      super(kind, code, message, options);
      this.name = name;
    }
  };
  Object.defineProperty(ErrorOfKind, 'name', { value: name });
  return ErrorOfKind;
}

export const ConflictError = errorOfKind('conflict', 'ConflictError');
export type ConflictError = InstanceType<typeof ConflictError>;
export const PaymentRequiredError = errorOfKind('payment_required', 'PaymentRequiredError');
export type PaymentRequiredError = InstanceType<typeof PaymentRequiredError>;
export const UnauthenticatedError = errorOfKind('unauthenticated', 'UnauthenticatedError');
export type UnauthenticatedError = InstanceType<typeof UnauthenticatedError>;
export const ForbiddenError = errorOfKind('forbidden', 'ForbiddenError');
export type ForbiddenError = InstanceType<typeof ForbiddenError>;

export class RateLimitedError extends DomainError {
  constructor(code: string, message: string, retryAfterSeconds: number, options: DomainErrorOptions = {}) {
    super('rate_limited', code, message, { ...options, details: { ...(options.details ?? {}), retryAfterSeconds } });
    this.name = 'RateLimitedError';
  }
}

export class UnavailableError extends DomainError {
  constructor(message = 'a backing service is unavailable, retry later', options: DomainErrorOptions & { code?: string } = {}) {
    super('unavailable', options.code ?? 'service_unavailable', message, options);
    this.name = 'UnavailableError';
  }
}

/** The sending rule's refusal (proto/src/rules.ts) as the error of its kind. */
export function sendingRefused(refusal: { kind: 'payment_required' | 'conflict'; code: string; message: string }): DomainError {
  return refusal.kind === 'payment_required' ? new PaymentRequiredError(refusal.code, refusal.message) : new ConflictError(refusal.code, refusal.message);
}

export function isDomainError(err: unknown): err is DomainError {
  return err instanceof DomainError;
}

/** The HTTP status each kind is answered with where a kind reaches HTTP (the gateway's problem details). */
export const HTTP_STATUS_OF_KIND: Record<ErrorKind, number> = {
  invalid: 400,
  unauthenticated: 401,
  payment_required: 402,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  rate_limited: 429,
  internal: 500,
  unavailable: 503,
};

/** The HTTP status of an error where it reaches HTTP: its kind's, or 500 for anything that is not a domain error. */
export function httpStatusOf(err: unknown): number {
  return err instanceof DomainError ? HTTP_STATUS_OF_KIND[err.kind] : 500;
}

export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, message: string, options: { cause?: unknown } = {}) {
    super(`${variable}: ${message}`, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ConfigError';
    this.variable = variable;
  }
}
