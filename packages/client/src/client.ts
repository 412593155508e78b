import createFetchClient, { type Client } from 'openapi-fetch';
import type { paths } from './generated/api';
import { idempotencyKeys } from './idempotency';
import { resourcesOf, type Resources } from './resources';
import { retryingFetch, type RetryPolicy } from './retry';

export interface ClientOptions {
  /** The service's origin, e.g. `https://reviews.example.com`; the API is under `/api/v1` of it. */
  baseUrl: string;
  /** An organization's API key (`rrs_…`), sent as `Authorization: Bearer`. */
  apiKey: string;
  /** Retries on 429 and 503; on 500, 502, 504, a broken connection and 409 `idempotency_key_in_use` only when safe (a GET, or a call with an Idempotency-Key). */
  retry?: RetryPolicy;
  /** Makes the Idempotency-Key of a POST that has none of the caller's (default: a random UUID). */
  idempotencyKey?: () => string;
  /** The `fetch` to send with (default: the global one). */
  fetch?: (request: Request) => Promise<Response>;
}

/**
 * A client typed by the public OpenAPI document: the path calls (`client.GET('/cascades/{id}', …)`,
 * `client.POST('/contacts', …)`, answering `{ data, error, response }`) and, beside them, the resource
 * methods (`client.cascades.cancel(id)`, `client.ratings.list({ since })`, answering the body or throwing
 * ReviewRequestApiError).
 */
export type ReviewRequestClient = Client<paths> & Resources;

export const API_BASE_PATH = '/api/v1';

export function createReviewRequestClient(options: ClientOptions): ReviewRequestClient {
  const client = createFetchClient<paths>({
    baseUrl: `${options.baseUrl.replace(/\/+$/, '')}${API_BASE_PATH}`,
    headers: { Authorization: `Bearer ${options.apiKey}` },
    fetch: retryingFetch(options.fetch ?? ((request) => globalThis.fetch(request)), options.retry),
  });
  client.use(idempotencyKeys(options.idempotencyKey));
  return Object.assign(client, resourcesOf(client));
}
