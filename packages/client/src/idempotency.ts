import { randomUUID } from 'node:crypto';
import type { Middleware } from 'openapi-fetch';

export const IDEMPOTENCY_KEY_HEADER = 'Idempotency-Key';

/**
 * Gives every POST an Idempotency-Key unless the caller set one (`params.header['Idempotency-Key']`,
 * e.g. the CRM's deal id, so a CRM's own redelivery is deduplicated too). The key is on the request
 * before the first attempt, so the retries of one call share it.
 */
export function idempotencyKeys(generate: () => string = randomUUID): Middleware {
  return {
    onRequest({ request }) {
      if (request.method !== 'POST' || request.headers.has(IDEMPOTENCY_KEY_HEADER)) return undefined;
      request.headers.set(IDEMPOTENCY_KEY_HEADER, generate());
      return request;
    },
  };
}
