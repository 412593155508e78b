/**
 * Domain errors with a stable machine-readable `code`. They travel unchanged across gRPC (see grpc.ts)
 * so the gateway can render the same problem+json whichever service raised them.
 */
export interface AppErrorOptions {
  cause?: unknown;
  /** Extra machine-readable fields, rendered as problem+json extension members. */
  details?: Record<string, unknown>;
}

export class AppError extends Error {
  readonly code: string;
  readonly status: number;
  readonly details?: Record<string, unknown>;

  constructor(status: number, code: string, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.status = status;
    this.code = code;
    this.details = options.details;
  }
}

export class ConfigError extends Error {
  readonly variable: string;
  constructor(variable: string, message: string) {
    super(`${variable}: ${message}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

export function isAppError(err: unknown): err is AppError {
  return err instanceof AppError;
}
