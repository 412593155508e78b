import type { NatsConnection } from 'nats';

/** JetStream API error codes the transport reacts to. */
export const ERR_STREAM_NAME_IN_USE = 10058;
export const ERR_CONSUMER_ALREADY_EXISTS = 10148;
const ERR_CONSUMER_NOT_FOUND = 10014;
const ERR_STREAM_NOT_FOUND = 10059;

export function apiErrorCode(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null || !('api_error' in err)) return undefined;
  const apiError = (err as { api_error?: { err_code?: number } }).api_error;
  return apiError?.err_code;
}

/** No stream took the subject: the server lost its state, or someone deleted the stream. */
export function isNoResponders(err: unknown): boolean {
  return typeof err === 'object' && err !== null && 'code' in err && (err as { code: unknown }).code === '503';
}

/** The stream or the durable is gone, so a pull loop recreates them. */
export function isMissingResource(err: unknown): boolean {
  const code = apiErrorCode(err);
  if (code === ERR_CONSUMER_NOT_FOUND || code === ERR_STREAM_NOT_FOUND) return true;
  if (isNoResponders(err)) return true;
  const message = err instanceof Error ? err.message : '';
  return message === 'consumer not found' || message === 'stream not found' || message === 'consumer deleted';
}

/** JetStream is temporarily unavailable: "JetStream system temporarily unavailable", or no meta leader yet. */
const ERR_JETSTREAM_UNAVAILABLE = 10008;

/**
 * The cluster cannot answer right now but will soon: the JetStream API timed out or had no responder
 * (a node of a cluster was lost and a leader is being elected), or answered "temporarily unavailable".
 */
export function isElecting(err: unknown): boolean {
  if (apiErrorCode(err) === ERR_JETSTREAM_UNAVAILABLE) return true;
  if (isNoResponders(err)) return true;
  const code = typeof err === 'object' && err !== null && 'code' in err ? (err as { code: unknown }).code : undefined;
  return code === 'TIMEOUT' || (err instanceof Error && /timeout|temporarily unavailable/i.test(err.message));
}

/**
 * Runs `step` again while the JetStream API is only electing a leader (isElecting), for up to `boundMs`;
 * any other failure, or the bound reached, rejects as `step` did.
 */
export async function whileElecting<T>(step: () => Promise<T>, boundMs: number): Promise<T> {
  const deadline = Date.now() + boundMs;
  for (let pauseMs = 250; ; pauseMs = Math.min(2_000, pauseMs * 2)) {
    try {
      return await step();
    } catch (err) {
      if (!isElecting(err) || Date.now() + pauseMs > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }
}

export function serverAtLeast(nc: NatsConnection, wanted: [number, number, number]): boolean {
  const version = (nc.info?.version ?? '0.0.0').split(/[.-]/).map((part) => Number.parseInt(part, 10) || 0);
  for (let i = 0; i < 3; i++) {
    if ((version[i] ?? 0) !== wanted[i]) return (version[i] ?? 0) > wanted[i];
  }
  return true;
}
