/** Every failure the bus reports (publish, consume, KV, configuration) is a `BusError`; the original error is `cause`. */
export class BusError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BusError';
  }
}

/**
 * Receives failures that have no caller to throw to: a handler that threw, a pull loop that lost its
 * server for a while, a KV watch callback that threw. Defaults to `console.error` so nothing is silent.
 */
export type BusErrorHandler = (error: BusError) => void;

export function toBusError(message: string, cause: unknown): BusError {
  if (cause instanceof BusError) return cause;
  const detail = cause instanceof Error ? cause.message : String(cause);
  return new BusError(`${message}: ${detail}`, { cause });
}

export const defaultErrorHandler: BusErrorHandler = (error) => {
  console.error(error);
};
