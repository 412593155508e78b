import createFetchClient, { type Client } from 'openapi-fetch';
import type { paths } from './generated/api';
import { idempotencyKeys } from './idempotency';
import { retryingFetch, type RetryPolicy } from './retry';

export interface ClientOptions {
  /** The service's origin, e.g. `https://reviews.example.com`; the API is under `/api/v1` of it. */
  baseUrl: string;
  /** An organization's API key (`rrs_…`), sent as `Authorization: Bearer`. */
  apiKey: string;
  /** Retries on 429 and 503; never on another status. */
  retry?: RetryPolicy;
  /** Makes the Idempotency-Key of a POST that has none of the caller's (default: a random UUID). */
  idempotencyKey?: () => string;
  /** The `fetch` to send with (default: the global one). */
  fetch?: (request: Request) => Promise<Response>;
}

/** A client typed by the public OpenAPI document: `client.GET('/cascades/{id}', …)`, `client.POST('/contacts', …)`. */
export type ReviewRequestClient = Client<paths>;

export const API_BASE_PATH = '/api/v1';

export function createReviewRequestClient(options: ClientOptions): ReviewRequestClient {
  const client = createFetchClient<paths>({
    baseUrl: `${options.baseUrl.replace(/\/+$/, '')}${API_BASE_PATH}`,
    headers: { Authorization: `Bearer ${options.apiKey}` },
    fetch: retryingFetch(options.fetch ?? ((request) => globalThis.fetch(request)), options.retry),
  });
  client.use(idempotencyKeys(options.idempotencyKey));
  return client;
}
